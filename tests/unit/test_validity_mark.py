"""validity.mark in one vectorised pass finds what a pandas mask per rule found: the same
frame, the same reason per row (the first rule it breaks), the same counts in the same
order, on real runs (the golden smoke runs) and on a copy of one with a row breaking each
rule, some rows two at once, and empty cells in integer columns."""

from __future__ import annotations

import csv
import shutil
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from colbench.results import validity
from colbench.results.rows import load

DATA = Path(__file__).resolve().parent / "data"
REAL_RUNS = [DATA / "golden" / "gloo-smoke", DATA / "gloo-smoke-v2"]


def _mark_per_rule(
    frame: Any,
    non_finite: Mapping[str, Any],
    rules: validity.Rules,
    run_world_size: tuple[str, int] | None,
    repeats_known: bool = True,
) -> tuple[Any, Counter[str]]:
    """The rules as validity.mark applied them before (main 926ef1f): a mask per rule,
    each filling only the rows no earlier rule took. The oracle, slow and plain."""
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
    note(frame["status"] == validity.STATUS_INVALID, "its file marks it invalid")
    bad = reason != ""
    if not bad.any():
        return frame, Counter()
    out = frame.copy()
    out["status"] = out["status"].mask(bad, validity.STATUS_INVALID)
    out[validity.REASON_COLUMN] = reason
    return out, Counter(str(r) for r in reason[bad])


def _load_both_ways(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    """Load the run for real, checking every call of mark against the oracle on the same
    input (the frame and cells rows.load typed)."""
    real = validity.mark
    seen: list[tuple[Any, Any]] = []

    def both(*args: Any, **kw: Any) -> tuple[Any, Counter[str]]:
        got = real(*args, **kw)
        seen.append((got, _mark_per_rule(*args, **kw)))
        return got

    monkeypatch.setattr(validity, "mark", both)
    load(path)
    return seen


def _assert_same(seen: list[tuple[Any, Any]]) -> Counter[str]:
    ((got, want),) = seen
    pd.testing.assert_frame_equal(got[0], want[0], check_exact=True)
    # The Counter's order is the order of the summary's equal counts.
    assert list(got[1].items()) == list(want[1].items())
    return got[1]


@pytest.mark.parametrize("run", REAL_RUNS, ids=lambda p: p.name)
def test_mark_finds_what_a_mask_per_rule_found_on_real_runs(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _assert_same(_load_both_ways(run, monkeypatch)) == Counter()


def _broken_copy(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(REAL_RUNS[0], run)
    with (run / "results.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        columns, rows = list(reader.fieldnames or []), list(reader)
    edits = [
        {"time_us": "inf"}, {"time_p50_us": "nan"}, {"busbw_gbps": "-inf"},
        {"time_us": "-3.5"}, {"size_bytes": "-1024"}, {"status": "exploded"},
        {"world_size": "0"}, {"world_size": "3"}, {"status": "invalid"},
        {"time_us": "-1", "status": "exploded"}, {"time_max_us": "inf", "count": "-2"},
        {"count": "", "wrong": ""}, {"wrong": "", "algbw_gbps": "-1"}, {"status": "oom"},
    ]  # fmt: skip
    for index, edit in enumerate(edits):
        rows[7 * index + 3].update(edit)
    rows += [dict(rows[0]), dict(rows[5]), dict(rows[5])]
    with (run / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return run


def test_mark_finds_what_a_mask_per_rule_found_on_broken_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    counts = _assert_same(_load_both_ways(_broken_copy(tmp_path), monkeypatch))
    assert counts["it repeats the key of an earlier row"] == 3
    assert counts["its world_size is not its run's (2, meta.json)"] == 1
    assert sum(counts.values()) == 15 and "15 row(s) are invalid" in capsys.readouterr().err
