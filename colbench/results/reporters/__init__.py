"""Sinks of the row stream: reporters (CSV, meta.json, progress, per-rank CSV, console
table), and the figure primitives every figure shares.

See :mod:`.reporters` for the one interface rank 0 feeds its rows through.
"""
