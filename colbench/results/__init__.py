"""The files of a run: tables declared once and versioned (old files filled in), the run
directory that owns them, meta.json, and the reporters (:mod:`.reporters`) that write rows.

``from colbench.results import load`` is the public path to load results (docs/output.md).
"""

from colbench.results.rows import KEY_COLUMNS, Row, load

__all__ = ["KEY_COLUMNS", "Row", "load"]
