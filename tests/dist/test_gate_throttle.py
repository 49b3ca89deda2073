"""The gate against a real slowdown: a 2-rank gloo job over a veth pair shaped by tc.

One rank runs in each of two network namespaces (colbench's launched mode, as under a
real launcher on two hosts). The baseline is measured at RATE_MBIT; an honest rerun at
the same rate must pass, a run at 0.7 x RATE_MBIT must fail with bus bandwidth worse,
and a run with one wrong element must fail even though it is much faster (loopback,
no shaping). Skipped, with the reason, where namespaces cannot be made.
"""

from __future__ import annotations

import dataclasses
import datetime
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from colbench.bench import RankBench, RunInfo
from colbench.config import SweepConfig
from colbench.groups import Groups, SideGroup
from colbench.launch import free_port
from colbench.ops.base import Buffers, Collective, Context
from colbench.plan import plan
from colbench.results import RowWriter, load
from colbench.run.rank import exit_now
from colbench.sizes import parse_sizes
from colbench.timing import HostTimer
from tests import netns
from tests.conftest import run_colbench
from tests.corrupting import Corrupting

#: Large enough that the shaped link, not gloo's CPU work, sets the time of the sizes
#: the gate judges (1M and up take 20-80 ms per call at this rate).
RATE_MBIT = 400.0
SLOW_FACTOR = 0.7
OPS = "all_reduce,all_gather,broadcast"
SIZES = "512K-4M"
#: Five samples a side let the rank test reach p <= 0.05 with a few overlaps, so a busy
#: machine (other test suites on the same two cores) does not hide a real slowdown.
REPEAT = 5
SWEEP = ["--op", OPS, "--sizes", SIZES, "-n", "5", "-w", "1", "--repeat", str(REPEAT)]
SWEEP += ["--backend", "gloo"]
CHECKS = ["--check", "busbw_gbps:-15%", "--check", "time_p50_us:+25%", "--min-size", "1M"]
#: Rows whose performance the gate judges: all_reduce and broadcast in-place, all_gather
#: in both placements, at 1M, 2M and 4M.
JUDGED_ROWS = 12
#: ... and at 512K, outside the window.
ROWS = 16
#: The busbw change's field in a console line: mark, verdict, op, dtype, redop, place,
#: size, n(b/c), detect, change.
BUSBW_COLUMN = 9

_reason = netns.unavailable()
pytestmark = [
    pytest.mark.skipif(_reason is not None, reason=f"no network namespaces: {_reason}"),
    # Bandwidths on a shaped link are compared: `make test` runs these with no other test.
    pytest.mark.serial,
]


@pytest.fixture(scope="module")
def pair() -> Iterator[netns.VethPair]:
    with netns.veth_pair("t") as made:
        yield made


@pytest.fixture(scope="module")
def baseline(pair: netns.VethPair, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _measure(pair, RATE_MBIT, tmp_path_factory.mktemp("gate") / "baseline")


def _measure(pair: netns.VethPair, rate_mbit: float, out: Path) -> Path:
    pair.set_rate(rate_mbit)
    proc = pair.sweep([*SWEEP, "--no-table"], out)
    assert proc.returncode == 0, proc.stderr
    return out


def _gate(*args: str) -> Any:
    return run_colbench("gate", *args, timeout=120)


def test_a_run_passes_against_itself(baseline: Path) -> None:
    proc = _gate(str(baseline), str(baseline), *CHECKS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Every judged row is within its limits: same, or insensitive where the shared CPU
    # made even the shaped link's samples too noisy to have seen a slowdown.
    last = proc.stdout.splitlines()[-1]
    assert proc.returncode == 0 and last.startswith("colbench gate: PASS"), last
    verdicts = [line.split()[0] for line in proc.stdout.splitlines() if not line.startswith("#")]
    verdicts = verdicts[:-1]
    assert verdicts.count("ok") == ROWS - JUDGED_ROWS, proc.stdout
    assert verdicts.count("same") + verdicts.count("insensitive") == JUDGED_ROWS, proc.stdout


def test_an_identical_rerun_passes(pair: netns.VethPair, baseline: Path, tmp_path: Path) -> None:
    rerun = _measure(pair, RATE_MBIT, tmp_path / "rerun")
    frame = load(rerun)
    assert len(frame) == ROWS * REPEAT and sorted(set(frame["repeat"])) == list(range(REPEAT))
    proc = _gate(str(baseline), str(rerun), *CHECKS)
    assert proc.returncode == 0, proc.stdout
    assert " worse " not in proc.stdout


def test_a_slower_link_fails_with_bandwidth_worse(
    pair: netns.VethPair, baseline: Path, tmp_path: Path
) -> None:
    slow = _measure(pair, RATE_MBIT * SLOW_FACTOR, tmp_path / "slow")
    # Each row's rank test on its own (--fwer none) finds most rows worse. The default,
    # Holm over the 12 rows, needs 5 samples a side to separate completely (p = 0.004 <=
    # 0.05 / 12); with the CPU shared by other suites the link's samples may not, and the
    # gate then says its rows were too noisy to judge (test_gate_power.py covers Holm).
    junit = tmp_path / "gate.xml"
    proc = _gate(str(baseline), str(slow), *CHECKS, "--fwer", "none", "--junit", str(junit))
    assert proc.returncode == 1, proc.stdout
    worse = [line for line in proc.stdout.splitlines() if line.startswith("! worse")]
    # 0.7 x the rate: transfers take 1/0.7 as long, bus bandwidth drops by about 30%.
    assert len(worse) >= JUDGED_ROWS // 2, proc.stdout
    assert not any(" better " in line for line in proc.stdout.splitlines()), proc.stdout
    for line in worse:
        busbw_change = float(line.split()[BUSBW_COLUMN].rstrip("%"))
        assert -45 < busbw_change < -15, line
    failures = ET.parse(junit).getroot().findall(".//failure")
    assert len(failures) == len(worse)
    assert all(f.get("type") == "worse" for f in failures)


# --- one wrong element, on a run that is faster than the baseline --------------------

CORRUPT_OP, CORRUPT_BYTES, CORRUPT_RANK = "all_reduce", 1 << 20, 1


def _one_row(coll: Collective, bufs: Buffers, ctx: Context) -> bool:
    """One rank's output of one op at one size."""
    size_bytes = bufs.recv.numel() * bufs.recv.element_size()
    return coll.name == CORRUPT_OP and ctx.rank == CORRUPT_RANK and size_bytes == CORRUPT_BYTES


class _CsvSink:
    def __init__(self, writer: RowWriter) -> None:
        self.writer = writer

    def rows(self, coll: Collective, rows: Any) -> None:
        for row in rows:
            self.writer.write(row)

    def note(self, message: str) -> None:
        pass


def _corrupted_rank(rank: int, port: int, csv_path: str) -> None:
    store = dist.TCPStore(
        "127.0.0.1", port, 2, is_master=rank == 0, timeout=datetime.timedelta(seconds=120)
    )
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    try:
        cfg = SweepConfig.of(
            ops=tuple(OPS.split(",")),
            sizes_bytes=tuple(parse_sizes(SIZES)),
            iters=5,
            warmup=1,
            repeat=REPEAT,
        )
        work = [
            dataclasses.replace(w, coll=Corrupting(w.coll, _one_row)) for w in plan(cfg, 2, "gloo")
        ]
        info = RunInfo("corrupted", "gloo", "cpu", 2, 1)
        writer = RowWriter(Path(csv_path)) if rank == 0 else None
        sink = _CsvSink(writer) if writer is not None else None
        groups = Groups(SideGroup.create(2, 60))
        RankBench(cfg, info, rank, torch.device("cpu"), HostTimer(), sink, groups).run(work)
        if writer is not None:
            writer.close()
    finally:
        dist.destroy_process_group()
    # As colbench's own ranks do: torch's teardown at exit sometimes aborts a clean rank.
    exit_now(0)


def test_one_wrong_element_fails_even_when_faster(baseline: Path, tmp_path: Path) -> None:
    run = tmp_path / "corrupted"
    run.mkdir()
    # Loopback and no shaping: every collective is several times faster than the baseline's.
    mp.start_processes(
        _corrupted_rank,
        args=(free_port(), str(run / "results.csv")),
        nprocs=2,
        start_method="spawn",
    )
    frame = load(run)
    wrong = frame[frame["wrong"] > 0]
    # One row has one wrong element, in every repeat.
    assert len(wrong) == REPEAT and set(wrong["wrong"]) == {1}
    proc = _gate(str(baseline), str(run), *CHECKS)
    assert proc.returncode == 1, proc.stdout
    lines = proc.stdout.splitlines()
    worse = [line for line in lines if line.startswith("! worse")]
    assert len(worse) == 1, proc.stdout
    (line,) = worse
    assert f"{CORRUPT_OP} " in line and f" {CORRUPT_BYTES} " in line
    assert "1 wrong element(s)" in line
    # Its bandwidth improved: it is judged better on speed and still fails.
    assert float(line.split()[BUSBW_COLUMN].rstrip("%")) > 15, line
    assert sum(" better " in line for line in lines) >= JUDGED_ROWS - 3, proc.stdout
    assert lines[-1].startswith("colbench gate: FAIL (1 failure(s))")
