"""Readers of the row stream: reporters (CSV, meta.json, progress, console table) and plots.

See :mod:`.reporters` for the one interface rank 0 feeds its rows through.
"""
