"""Older results files stay readable: load(), the gate and --update-baseline across versions.

Old files are made the way old colbench wrote them: the column lists of versions 1 and 2
are facts of this project's history (``git log -p colbench/results/rows.py``), kept here
literally so that a later schema change cannot quietly change what "version 1" means.
``data/gloo-smoke-v2`` is a real version-2 run, frozen: the first of the three runs
pooled in results/baselines/gloo-smoke as committed in a4e1dda (that baseline is
re-measured whenever the columns change).
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from colbench.bench.rowmaker import host_bound
from colbench.commands.gate.command import update_baseline
from colbench.errors import UsageError
from colbench.results.rows import COLUMNS, HOST_BOUND_RATIO, RESULTS, load
from colbench.results.tables import TableWriter
from colbench.results.validity import LOAD_COLUMNS, SCHEMA_VERSION, may_lack
from tests.conftest import run_main

SMOKE = Path(__file__).resolve().parents[2] / "results" / "baselines" / "gloo-smoke"
V2_RUN = Path(__file__).resolve().parent / "data" / "gloo-smoke-v2"

#: Version 1, the first release (366e744).
V1_COLUMNS = [
    "schema_version", "run_id", "variant", "backend", "device", "world_size", "nnodes",
    "op", "dtype", "redop", "root", "in_place", "requested_bytes", "size_bytes", "count",
    "warmup", "iters", "average", "time_us", "time_min_us", "time_p50_us", "time_p99_us",
    "time_max_us", "algbw_gbps", "busbw_gbps", "wrong",
]  # fmt: skip
#: Version 2 as main had it before `sweep --repeat` (e2f9806): no repeat column.
V2_NO_REPEAT = [
    *V1_COLUMNS[:7],
    "group_size",
    "groups",
    *V1_COLUMNS[7:-1],
    "aggbw_gbps",
    "wrong",
    "status",
]
#: Version 2 as released last (ac91b1f .. a4e1dda).
V2_COLUMNS = [*V2_NO_REPEAT, "repeat"]


def write_old(path: Path, columns: Sequence[str], version: int, rows: Sequence[dict]) -> Path:
    """A results.csv holding only ``columns`` of each row, stamped ``version``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(columns)
        for row in rows:
            out.writerow([version if c == "schema_version" else row.get(c, "") for c in columns])
    return path


def smoke_rows() -> list[dict[str, str]]:
    """The frozen version-2 run's rows, as text."""
    with (V2_RUN / "results.csv").open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def current_run(run_dir: Path, rows: Sequence[dict[str, str]]) -> Path:
    """A run of this colbench's schema with the given rows' numbers, and a complete meta."""
    run_dir.mkdir(parents=True)
    writer = TableWriter(run_dir / "results.csv", RESULTS)
    try:
        for row in rows:
            # This version writes every row's engine (a v2 row has none to copy).
            current = {"schema_version": SCHEMA_VERSION, "engine": row.get("engine") or "torch"}
            writer.write({c: row.get(c) for c in COLUMNS} | current)
    finally:
        writer.close()
    (run_dir / "meta.json").write_text(json.dumps({"run_id": run_dir.name, "status": "complete"}))
    return run_dir


def test_update_baseline_over_a_version_1_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = smoke_rows()[:40]
    base = tmp_path / "base"
    write_old(base / "results.csv", V1_COLUMNS, 1, rows)
    # The version-2 run's meta.json, counting the rows this cut of it holds (a baseline
    # that holds fewer rows than its meta.json says is incomplete, and refused).
    meta = json.loads((V2_RUN / "meta.json").read_text())
    meta.update(rows=len(rows), rows_planned=len(rows))
    (base / "meta.json").write_text(json.dumps(meta))
    run = current_run(tmp_path / "run", rows)
    code, out, err = run_main(
        capsys, "gate", str(base), str(run), "--check", "busbw_gbps:-95%", "--update-baseline"
    )
    assert code == 0, err
    assert "colbench gate: PASS" in out
    assert "is the new baseline" in err
    assert len(load(base)) == 40
    assert (base / "results.csv").read_text() == (run / "results.csv").read_text()


# --- load() across versions ----------------------------------------------------------


def test_every_column_since_version_1_says_how_old_files_read() -> None:
    assert may_lack(1) == set(COLUMNS) - set(V1_COLUMNS)
    v4 = {"slowest_rank", "skew_us", "time_ranks_avg_us", "time_ranks_max_us"}
    v5 = {"fabric", "ranks_per_gpu", "nccl_algo", "nccl_proto"}
    v6 = {"ceiling_gbps", "pct_of_ceiling"}
    v7 = {"split", "splits", "mean_bytes", "meanbw_gbps", "send_imbalance", "recv_imbalance"}
    v8 = {"load", "load_alone_tflops", "load_beside_tflops", "load_alone_busbw_gbps",
          "load_beside_busbw_gbps"}  # fmt: skip
    v9 = {"engine"}
    assert may_lack(2) == {"group_size", "groups", "aggbw_gbps", "repeat", "enqueue_us",
                           "host_bound", *v4, *v5, *v6, *v7, *v8, *v9}  # fmt: skip
    assert may_lack(3) == v4 | v5 | v6 | v7 | v8 | v9
    assert may_lack(4) == v5 | v6 | v7 | v8 | v9
    assert may_lack(5) == v6 | v7 | v8 | v9
    assert may_lack(6) == v7 | v8 | v9
    assert may_lack(7) == v8 | v9
    assert may_lack(8) == v9
    assert may_lack(SCHEMA_VERSION) == frozenset()


def test_version_1_reads_with_this_versions_columns(tmp_path: Path) -> None:
    rows = smoke_rows()[:6]
    frame = load(write_old(tmp_path / "v1.csv", V1_COLUMNS, 1, rows))
    assert list(frame.columns) == list(COLUMNS)
    assert frame["schema_version"].tolist() == [1] * 6
    # Before subgroups one group ran on all ranks; before --repeat a row was sample 0;
    # before status every written row was measured; enqueue time was never measured.
    assert (frame["group_size"] == frame["world_size"]).all() and (frame["groups"] == 1).all()
    assert frame["aggbw_gbps"].tolist() == frame["busbw_gbps"].tolist()
    assert frame["status"].tolist() == ["ok"] * 6 and frame["repeat"].tolist() == [0] * 6
    assert frame["enqueue_us"].isna().all() and frame["host_bound"].isna().all()
    assert frame["time_us"].tolist() == [float(r["time_us"]) for r in rows]
    assert str(frame["group_size"].dtype) == "int64" and str(frame["host_bound"].dtype) == "Int64"


@pytest.mark.parametrize(
    ("columns", "repeats"),
    [
        (V2_NO_REPEAT, [0, 0, 0]),
        (V2_COLUMNS, [0, 1, 2]),
        # The repeat branch before it met subgroups (fa476a0): no group columns.
        ([c for c in V2_COLUMNS if c not in ("group_size", "groups", "aggbw_gbps")], [0, 1, 2]),
    ],
)
def test_every_form_of_version_2_reads(
    tmp_path: Path, columns: list[str], repeats: list[int]
) -> None:
    # Rows 0, 118 and 236 of the smoke baseline: one key, repeats 0, 1 and 2.
    rows = [smoke_rows()[i] for i in (0, 118, 236)]
    assert [int(r["repeat"]) for r in rows] == [0, 1, 2]
    frame = load(write_old(tmp_path / "v2.csv", columns, 2, rows))
    assert list(frame.columns) == list(COLUMNS)
    assert frame["repeat"].tolist() == repeats
    assert frame["group_size"].tolist() == [2, 2, 2] and frame["groups"].tolist() == [1, 1, 1]
    assert frame["enqueue_us"].isna().all()


def test_a_real_version_2_run_reads(tmp_path: Path) -> None:
    frame = load(V2_RUN)
    assert list(frame.columns) == list(COLUMNS) and len(frame) == 354
    assert set(frame["schema_version"]) == {2}
    assert frame["host_bound"].isna().all() and set(frame["status"]) == {"ok"}


def test_a_newer_version_is_refused_clearly(tmp_path: Path) -> None:
    rows = [dict(smoke_rows()[0], enqueue_us="3.5", host_bound="0")]
    path = write_old(tmp_path / "new.csv", [*COLUMNS, "rank_skew_us"], SCHEMA_VERSION + 1, rows)
    with pytest.raises(UsageError) as info:
        load(path)
    assert str(info.value) == (
        f"{path} has schema version {SCHEMA_VERSION + 1}, newer than this colbench reads "
        f"(1 to {SCHEMA_VERSION}): upgrade colbench to read it"
    )


@pytest.mark.parametrize(("version", "message"), [(0, "no colbench wrote it"), ("v2", "number")])
def test_a_version_no_colbench_wrote_is_refused(
    tmp_path: Path, version: object, message: str
) -> None:
    path = write_old(tmp_path / "odd.csv", list(COLUMNS), version, smoke_rows()[:1])  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=message):
        load(path)


def test_an_old_file_still_needs_its_own_columns(tmp_path: Path) -> None:
    kept = [c for c in V1_COLUMNS if c != "busbw_gbps"]
    with pytest.raises(UsageError, match=r"lacks 1 column\(s\) of schema version 1 \(busbw_gbps\)"):
        load(write_old(tmp_path / "v1.csv", kept, 1, smoke_rows()[:1]))


def test_rows_of_several_versions_in_one_file(tmp_path: Path) -> None:
    """A file's rows may name several versions (a baseline pooled across an upgrade): the
    header must then have the newest one's columns, and each row keeps its version."""
    old, new = smoke_rows()[0], dict(smoke_rows()[1], enqueue_us="40.5", host_bound="1")
    path = tmp_path / "mixed.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(COLUMNS)
        out.writerow([old.get(c, "") for c in COLUMNS])
        out.writerow([SCHEMA_VERSION if c == "schema_version" else new.get(c, "") for c in COLUMNS])
    frame = load(path)
    assert frame["schema_version"].tolist() == [2, SCHEMA_VERSION]
    assert frame["host_bound"].tolist()[1] == 1 and frame["enqueue_us"].tolist()[1] == 40.5
    assert frame["host_bound"].isna().tolist() == [True, False]
    # A version-4 row under a version-2 header has no cells for its enqueue time.
    lines = path.read_text().splitlines()
    v2 = write_old(tmp_path / "v2.csv", V2_COLUMNS, 2, [old])
    with v2.open("a", encoding="utf-8") as f:
        f.write(",".join([str(SCHEMA_VERSION), *lines[2].split(",")[1 : len(V2_COLUMNS)]]) + "\n")
    lacking = (
        rf"lacks 24 column\(s\) of schema version {SCHEMA_VERSION} "
        r"\(enqueue_us, host_bound, slowest_rank,"
    )
    with pytest.raises(UsageError, match=lacking):
        load(v2)


def test_the_writer_never_appends_to_a_file_of_another_layout(tmp_path: Path) -> None:
    path = write_old(tmp_path / "results.csv", V2_COLUMNS, 2, smoke_rows()[:2])
    before = path.read_bytes()
    with pytest.raises(UsageError, match="another schema"):
        TableWriter(path, RESULTS)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("enqueue_us", "time_us", "expected"),
    [
        (9.0, 10.0, 1),
        (8.99, 10.0, 0),
        (45.0, 46.0, 1),
        (60.0, 45.0, 1),
        (2.0, 363.0, 0),
        (None, 10.0, None),
        (3.0, None, None),
        (math.nan, 10.0, None),
    ],
)
def test_host_bound_rule(enqueue_us: float | None, time_us: float | None, expected: int) -> None:
    assert HOST_BOUND_RATIO == 0.9
    assert host_bound(enqueue_us, time_us) == expected


def test_new_columns_round_trip(tmp_path: Path) -> None:
    writer = TableWriter(tmp_path / "results.csv", RESULTS)
    base = {c: smoke_rows()[0].get(c) for c in COLUMNS} | {"schema_version": SCHEMA_VERSION}
    writer.write(base | {"enqueue_us": 44.25, "host_bound": host_bound(44.25, 45.88)})
    writer.write(base | {"enqueue_us": None, "host_bound": None})
    writer.close()
    frame = load(tmp_path)
    assert frame["enqueue_us"].tolist()[0] == 44.25 and math.isnan(frame["enqueue_us"][1])
    assert frame["host_bound"].tolist()[0] == 1 and frame["host_bound"].isna().tolist()[1]


# --- the gate and --update-baseline across versions ----------------------------------


@pytest.mark.parametrize("baseline", [V2_RUN, SMOKE], ids=["version-2", "committed"])
def test_gate_a_current_run_against_an_older_baseline_and_update_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], baseline: Path
) -> None:
    """`make gate-smoke` and `make gate-baseline` on a baseline of an older schema: the
    frozen version-2 run, and the committed smoke baseline whatever its version."""
    committed = (baseline / "results.csv").read_bytes()
    base = tmp_path / "base"
    shutil.copytree(baseline, base)
    with (baseline / "results.csv").open(newline="", encoding="utf-8") as f:
        rows = [dict(r, enqueue_us="30", host_bound="0") for r in csv.DictReader(f)]
    run = current_run(tmp_path / "run", rows)
    gate_args = ["--check", "busbw_gbps:-95%", "--min-size", "64K"]
    code, out, err = run_main(capsys, "gate", str(base), str(run), *gate_args)
    assert code == 0, out + err
    # Every row joined and passed; whether the noisy smoke samples could have seen a
    # slowdown (same or insensitive) is the power's business (test_gate_power.py).
    last = out.splitlines()[-1]
    assert last.startswith("colbench gate: PASS"), last
    assert not any(word in last for word in ("worse", "missing", "not comparable", "new")), last
    code, _, err = run_main(capsys, "gate", str(base), str(run), *gate_args, "--update-baseline")
    assert code == 0 and "is the new baseline" in err
    frame = load(base)
    assert set(frame["schema_version"]) == {SCHEMA_VERSION} and len(frame) == len(rows)
    assert (frame["enqueue_us"] == 30).all()
    code, out, _ = run_main(capsys, "gate", str(base), str(run), *gate_args)
    assert code == 0 and out.splitlines()[-1].startswith("colbench gate: PASS")
    assert (baseline / "results.csv").read_bytes() == committed


def test_update_baseline_pools_runs_of_two_versions(tmp_path: Path) -> None:
    import pandas as pd

    rows = smoke_rows()
    old = tmp_path / "old"
    write_old(old / "results.csv", V2_NO_REPEAT, 2, rows[:20])
    (old / "meta.json").write_text(json.dumps({"run_id": "old", "status": "complete"}))
    new = current_run(tmp_path / "new", [dict(r, enqueue_us="12.5") for r in rows[20:30]])
    target = update_baseline([old, new], tmp_path / "base")
    with (target / "results.csv").open(newline="") as f:
        assert next(csv.reader(f)) == list(COLUMNS)
    pooled = load(target)
    assert pooled["schema_version"].tolist() == [2] * 20 + [SCHEMA_VERSION] * 10
    expected = pd.concat([load(old), load(new)], ignore_index=True)
    pd.testing.assert_frame_equal(pooled, expected)


def test_version_5_reads_with_empty_ceilings(tmp_path: Path) -> None:
    rows = smoke_rows()[:4]
    v5_columns = [c for c in COLUMNS if c not in ("ceiling_gbps", "pct_of_ceiling")]
    frame = load(write_old(tmp_path / "v5.csv", v5_columns, 5, rows))
    assert list(frame.columns) == list(COLUMNS)
    assert frame["ceiling_gbps"].isna().all() and frame["pct_of_ceiling"].isna().all()
    assert frame["busbw_gbps"].tolist() == [float(r["busbw_gbps"]) for r in rows]


def test_version_7_reads_as_nothing_beside_the_collective(tmp_path: Path) -> None:
    rows = smoke_rows()[:4]
    v7_columns = [c for c in COLUMNS if c not in LOAD_COLUMNS]
    frame = load(write_old(tmp_path / "v7.csv", v7_columns, 7, rows))
    assert list(frame.columns) == list(COLUMNS)
    assert frame["load"].tolist() == [""] * 4
    for column in LOAD_COLUMNS[1:]:
        assert frame[column].isna().all()
    assert frame["time_us"].tolist() == [float(r["time_us"]) for r in rows]
