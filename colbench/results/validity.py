"""Where results enter (``colbench.results.rows.load``): a table's text cells typed, and
the rows no measurement can have found.

Loading a run is most of what gate, compare, fit and predict spend, and typing its cells was
most of a load: each number column parses in one pandas call, each distinct cell once, and
only a column pandas refuses (a blank or nan cell) takes the text pass per cell
(tests/unit/test_typed.py holds that pass for every column and checks both agree).

A time, size or bandwidth that is negative or not finite, a row that repeats the key of an
earlier one, a row of another world size than its run's, a status no colbench writes: a
hand-edited file, a log of a broken run, a copy pasted twice. Such a row is kept, every cell
as read, but its status becomes ``invalid`` and :data:`REASON_COLUMN` says why, so no
verdict (gate, compare, fit, plot, predict) takes it as data: every reader keeps only rows
of status ``ok``. The loader says how many, once. The rules' column groups come from
:mod:`colbench.results.rows`, which passes them in.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench.errors import UsageError
from colbench.results.tables import Table

#: Values of the ``status`` column: measured, out of memory, not runnable under the run's
#: variant, and (STATUS_INVALID) values no measurement can have: kept, not judged.
STATUS_OK = "ok"
STATUS_OOM = "oom"
STATUS_UNSUPPORTED = "unsupported"
STATUS_INVALID = "invalid"
#: Why a row is invalid: a column of loaded frames that hold an invalid row (empty for
#: every other row), so the frame of a sound file has results.csv's columns alone;
#: results.csv keeps the status, and a reload finds the reason again.
REASON_COLUMN = "invalid_reason"


@dataclass(frozen=True)
class Rules:
    """What a valid row holds, by column group."""

    #: Every status a colbench writes.
    statuses: frozenset[str]
    #: Numbers that are never negative where present: times, sizes, bandwidths, counts.
    non_negative: tuple[str, ...]
    #: What makes two rows of one run the same measurement (with run_id and repeat).
    key: tuple[str, ...]


def mark(
    frame: Any,
    non_finite: Mapping[str, Any],
    rules: Rules,
    run_world_size: tuple[str, int] | None,
    repeats_known: bool = True,
) -> tuple[Any, Counter[str]]:
    """``frame`` with its invalid rows' status set to ``invalid`` and their reason in
    :data:`REASON_COLUMN`; and how many rows each reason (its kind, without the row's
    values) took.

    ``non_finite``: per numeric column, which of its cells held inf or nan as text (an
    empty cell is a value not measured, which is valid). ``run_world_size``: the run_id
    and world size meta.json records for the file's own run. ``repeats_known``: the file
    has a ``repeat`` column; some version-2 files lack it, and their --repeat samples
    share one key, as they were written.
    """
    import numpy as np
    import pandas as pd

    rules_hit = [(_flags(mask), f"{column} is not finite") for column, mask in non_finite.items()]
    rules_hit += [(_below(frame[c], 0), f"{c} is negative") for c in rules.non_negative]
    rules_hit.append((_below(frame["world_size"], 1), "world_size is below 1"))
    known = frame["status"].isin(sorted(rules.statuses))
    rules_hit.append((~_flags(known), "its status is not one colbench writes"))
    if run_world_size is not None:
        run_id, world_size = run_world_size
        other = _flags(frame["run_id"] == run_id) & _flags(frame["world_size"] != world_size)
        rules_hit.append((other, f"its world_size is not its run's ({world_size}, meta.json)"))
    if repeats_known:
        repeated = frame.duplicated(subset=["run_id", *rules.key, "repeat"], keep="first")
        rules_hit.append((_flags(repeated), "it repeats the key of an earlier row"))
    rules_hit.append((_flags(frame["status"] == STATUS_INVALID), "its file marks it invalid"))
    # One pass over a rules x rows table rather than a pandas mask per rule: a row's
    # reason is the first rule it breaks, in the order above.
    hits = np.vstack([flags for flags, _ in rules_hit])
    bad = hits.any(axis=0)
    if not bad.any():
        return frame, Counter()
    texts = np.array([text for _, text in rules_hit], dtype=object)
    first = texts[hits.argmax(axis=0)]
    out = frame.copy()
    out["status"] = out["status"].mask(pd.Series(bad, index=frame.index), STATUS_INVALID)
    out[REASON_COLUMN] = pd.Series(np.where(bad, first, ""), index=frame.index, dtype="string")
    # Counted in row order: the summary lists equal counts in the order rows first had them.
    return out, Counter(str(r) for r in first[bad])


def _flags(mask: Any) -> Any:
    """A boolean Series as a numpy array of bools, a missing value (a comparison with an
    empty cell) as False: an empty cell is a value not measured, which is valid."""
    import numpy as np

    if hasattr(mask, "to_numpy"):
        return mask.to_numpy(dtype=bool, na_value=False)
    return np.asarray(mask, dtype=bool)


def _below(numbers: Any, bound: int) -> Any:
    """Which of a numeric column's values are below ``bound``, in numpy (a pandas
    comparison per column cost more than the rest of the rules): an empty cell is not."""
    import numpy as np

    return numbers.to_numpy(dtype="float64", na_value=np.nan) < bound


def summary(counts: Counter[str]) -> str:
    """'3 row(s) are invalid and not judged (2: time_us is not finite; 1: ...)'."""
    total = sum(counts.values())
    kinds = "; ".join(f"{n}: {why}" for why, n in counts.most_common())
    return f"{total} row(s) are invalid and not judged ({kinds})"


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
