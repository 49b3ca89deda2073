"""A table's text cells typed: what a run's CSV reader makes of the cells it read.

Loading a run is most of what gate, compare, fit and predict spend, and typing its cells was
most of a load: each number column parses in one pandas call, each distinct cell once, and
only a column pandas refuses (a blank or nan cell) takes the text pass per cell.
tests/unit/test_typed.py holds the text pass for every column that this replaced, and
checks both give the same frame, masks and errors.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any

from colbench.errors import UsageError
from colbench.results.tables import Table


def typed(file: Path, raw: Any, table: Table) -> tuple[Any, dict[str, Any]]:
    """``raw``'s cells (text) of the table's columns typed: text columns as strings, the
    rest as numbers (an empty cell: a missing number); other columns are kept as they are.
    And, per floating-point column, the cells that held inf or nan (validity's input)."""
    text_columns, float_columns = table.text_columns, table.float_columns
    frame = raw.copy()
    non_finite: dict[str, Any] = {}
    for column in table.columns:
        # Text columns keep empty strings (an empty variant means "no variant").
        if column in text_columns:
            frame[column] = raw[column].astype("string")
            continue
        numbers, nan_cells = _numbers(file, column, raw[column], column in float_columns)
        if column in float_columns:
            frame[column] = numbers.astype("float64")
            bad = (frame[column].abs() == math.inf) | nan_cells
            if bad.any():
                non_finite[column] = bad
            continue
        frame[column] = _whole(file, column, numbers)
    return frame, non_finite


def _whole(file: Path, column: str, numbers: Any) -> Any:
    """A count column's numbers as integers: Int64 keeps a missing count missing; int64 is
    what a whole column gives. A fraction, an infinity or a number past int64 is refused:
    casting a column with no missing cell to int64 would cut 1.5 to 1 and wrap 1e30."""
    import numpy as np

    present = numbers.dropna()
    if present.dtype.kind == "f":
        whole = np.isfinite(present) & (present == np.trunc(present))
        fits = bool((whole & (present >= -(2.0**63)) & (present < 2.0**63)).all())
    else:
        fits = present.dtype.kind != "u" or bool((present <= np.iinfo(np.int64).max).all())
    try:
        if not fits:
            raise ValueError(column)
        return numbers.astype("Int64" if numbers.isna().any() else "int64")
    except (ValueError, TypeError, OverflowError):
        raise UsageError(
            f"{file}: column {column} holds a value that is not a whole number"
        ) from None


def _numbers(file: Path, column: str, cells: Any, floats: bool) -> tuple[Any, Any]:
    """A column's cells as numbers, and which held nan (False: none)."""
    import pandas as pd

    # Most columns need no text pass: pandas reads " 12 " and inf, an empty cell as NaN,
    # and refuses blank and nan cells (test_typed.py), so in a column it parses as numbers
    # the pass would have masked only empty cells, which read as the same NaN.
    with contextlib.suppress(ValueError, TypeError, OverflowError):
        numbers = _parsed(cells)
        if numbers.dtype.kind in "iuf":  # not a huge integer: pandas keeps those as text
            return numbers, False
    text = cells.fillna("").astype(str).str.strip()
    # A nan cell is no value, and unlike an empty cell (not measured) no measurement wrote it.
    nan_cells = text.str.lower().isin(("nan", "+nan", "-nan")) & floats
    try:
        return pd.to_numeric(cells.mask((text == "") | nan_cells, None)), nan_cells
    except (ValueError, TypeError):
        raise UsageError(f"{file}: column {column} holds a value that is not a number") from None


def _parsed(cells: Any) -> Any:
    """``pd.to_numeric(cells)``, parsing each distinct cell once where cells repeat (sizes,
    counts, flags): the number type it picks follows from which cells it saw, not how often."""
    import pandas as pd

    codes, distinct = pd.factorize(cells.to_numpy(dtype=object), use_na_sentinel=False)
    if len(distinct) * 4 > len(codes):  # times and bandwidths: nearly every cell differs
        return pd.to_numeric(cells)
    numbers: Any = pd.to_numeric(distinct)  # an array, as distinct is
    return pd.Series(numbers[codes], index=cells.index, name=cells.name)
