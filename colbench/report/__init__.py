"""Readers of the row stream: the console table (and, later, plots)."""
