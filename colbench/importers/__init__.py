"""Readers that turn other tools' output into colbench rows (``colbench import``)."""
