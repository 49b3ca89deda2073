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
    import pandas as pd

    reason = pd.Series("", index=frame.index, dtype="string")

    def note(mask: Any, text: str) -> None:
        nonlocal reason
        reason = reason.mask((reason == "") & mask.fillna(False).astype(bool), text)

    for column, mask in non_finite.items():
        note(mask, f"{column} is not finite")
    for column in rules.non_negative:
        note(frame[column] < 0, f"{column} is negative")
    note(frame["world_size"] < 1, "world_size is below 1")
    note(~frame["status"].isin(sorted(rules.statuses)), "its status is not one colbench writes")
    if run_world_size is not None:
        run_id, world_size = run_world_size
        other = (frame["run_id"] == run_id) & (frame["world_size"] != world_size)
        note(other, f"its world_size is not its run's ({world_size}, meta.json)")
    if repeats_known:
        repeated = frame.duplicated(subset=["run_id", *rules.key, "repeat"], keep="first")
        note(pd.Series(repeated, index=frame.index), "it repeats the key of an earlier row")
    note(frame["status"] == STATUS_INVALID, "its file marks it invalid")
    bad = reason != ""
    if not bad.any():
        return frame, Counter()
    out = frame.copy()
    out["status"] = out["status"].mask(bad, STATUS_INVALID)
    out[REASON_COLUMN] = reason
    return out, Counter(str(r) for r in reason[bad])


def summary(counts: Counter[str]) -> str:
    """'3 row(s) are invalid and not judged (2: time_us is not finite; 1: ...)'."""
    total = sum(counts.values())
    kinds = "; ".join(f"{n}: {why}" for why, n in counts.most_common())
    return f"{total} row(s) are invalid and not judged ({kinds})"
