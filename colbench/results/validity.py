"""Rows no measurement can have, found where results enter (``store.results.load``).

A time, size or bandwidth that is negative or not finite, a row that repeats the key of an
earlier one, a row of another world size than its run's, a status no colbench writes: a
hand-edited file, a log of a broken run, a copy pasted twice. Such a row is kept, every cell
as read, but its status becomes ``invalid`` and :data:`REASON_COLUMN` says why, so no
verdict (gate, compare, fit, plot, predict) takes it as data: every reader keeps only rows
of status ``ok``. The loader says how many, once.

Apart from :mod:`colbench.results.rows` (which passes its column groups in) so that the
rules read as one list, with no import back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
