"""The public path to load results: ``from colbench.results import load`` (docs/output.md).

Kept so scripts written against the documented path keep working; the tables themselves live
in :mod:`colbench.store.results`.
"""

from colbench.store.results import KEY_COLUMNS, Row, load

__all__ = ["KEY_COLUMNS", "Row", "load"]
