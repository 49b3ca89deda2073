"""The files of a run: tables declared once and versioned (old files filled in), the run
directory that owns them, and meta.json."""
