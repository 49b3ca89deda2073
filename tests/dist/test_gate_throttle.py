"""The gate against a real slowdown: a 2-rank gloo job over a veth pair shaped by tc.

One rank runs in each of two network namespaces (colbench's launched mode, as under a
real launcher on two hosts). Issue 21's case: the baseline is measured at RATE_MBIT with
3 samples a side; with the gate's default settings an honest rerun at the same rate and
the run against itself must pass, a run at 0.7 x RATE_MBIT (every row about 30% slower,
twice the limit) must fail although no row of 3 against 3 samples can be judged alone:
the pooled test carries the verdict. A run with one wrong element must fail even though
it is much faster (loopback, no shaping). Skipped, with the reason, where namespaces
cannot be made. benchmarks/gate_throttle.py repeats the case (docs/gate.md).

Issue 33: beside another job on the 2 cores the link must still set the time, in the
baseline as in the runs gated against it. At 400 Mbit/s with a 4 KB token bucket it did
not: a 0.7x run read 2% slower than a baseline measured beside 3 busy loops (and an
honest rerun 33% faster than it). Every call now takes 65 ms or more of link time, and the
bucket (tests/netns.py) keeps a stall of up to 10 ms from costing the link any time;
measured the same way, the 0.7x run read -30% and honest reruns -7% to +4%.
"""

from __future__ import annotations

import dataclasses
import datetime
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from colbench.bench.loop import BenchContext, RankBench
from colbench.bench.ops.base import Buffers, Collective, Context
from colbench.bench.plan import RunInfo, plan
from colbench.config.model import SweepConfig
from colbench.config.sizes import parse_sizes
from colbench.host.child import exit_now
from colbench.host.launchers.rendezvous import free_port
from colbench.results.rows import RESULTS, load
from colbench.results.tables import TableWriter
from tests import netns
from tests.conftest import run_colbench
from tests.corrupting import Corrupting

#: Slow enough that the shaped link, not gloo's CPU work nor a busy core's stalls, sets
#: the time of the sizes the gate judges (1M-4M take 65-265 ms per call at this rate,
#: unshaped 2-7 ms beside 2 busy loops).
RATE_MBIT = 100.0
SLOW_FACTOR = 0.7
#: Issue 21's sweep: torch has no out-of-place all_reduce, so `--placement out` leaves
#: the all_gather rows at 1M, 2M and 4M; 3 samples each (the README's --repeat). 2 calls
#: a sample, not 4: at 65 ms and more a call the link's pace needs no averaging, and the
#: slower link would otherwise add 12 s to the file.
OPS = "all_reduce,all_gather"
SIZES = "1M-4M"
REPEAT = 3
SWEEP = ["--op", OPS, "--sizes", SIZES, "-n", "2", "-w", "1", "--repeat", str(REPEAT)]
SWEEP += ["--placement", "out", "--backend", "gloo"]
CHECKS = ["--check", "busbw_gbps:-15%"]
#: Rows whose performance the gate judges (every row: no size window).
JUDGED_ROWS = 3
#: The busbw change's field in a console line after its mark column: verdict, op,
#: dtype, redop, place, size, n(b/c), detect, change.
BUSBW_COLUMN = 8

_reason = netns.unavailable()
pytestmark = [
    pytest.mark.skipif(_reason is not None, reason=f"no network namespaces: {_reason}"),
    # Bandwidths on a shaped link are compared: `make test-fabric` runs these with no
    # other test.
    pytest.mark.fabric,
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


def _rows(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line[:1] in (" ", "!")]


def _busbw_change_pct(line: str) -> float:
    """A console row's busbw change, in percent ("!" marks a failing row, " " the rest)."""
    return float(line[1:].split()[BUSBW_COLUMN].rstrip("%"))


def test_a_run_passes_against_itself(baseline: Path) -> None:
    proc = _gate(str(baseline), str(baseline), *CHECKS)
    last = proc.stdout.splitlines()[-1]
    assert proc.returncode == 0 and last.startswith("colbench gate: PASS"), proc.stdout
    # No row can be judged alone (3 against 3): each is insensitive, the pooled test is
    # what the gate could see with (on performance, or, when the shared CPU spread even
    # the shaped link's samples beyond twice the limit, on correctness only, saying so).
    verdicts = [line.split()[0] for line in _rows(proc.stdout)]
    assert verdicts == ["insensitive"] * JUDGED_ROWS, proc.stdout
    assert "no row can be judged alone (3/3 samples" in last and "; pooled >= " in last
    assert "# pooled busbw_gbps: same, median change +0.0%" in proc.stdout


def test_an_identical_rerun_passes(pair: netns.VethPair, baseline: Path, tmp_path: Path) -> None:
    rerun = _measure(pair, RATE_MBIT, tmp_path / "rerun")
    frame = load(rerun)
    assert len(frame) == JUDGED_ROWS * REPEAT and sorted(set(frame["repeat"])) == [0, 1, 2]
    proc = _gate(str(baseline), str(rerun), *CHECKS)
    assert proc.returncode == 0, proc.stdout
    assert " worse" not in proc.stdout


def test_a_slower_link_fails_with_the_default_settings(
    pair: netns.VethPair, baseline: Path, tmp_path: Path
) -> None:
    slow = _measure(pair, RATE_MBIT * SLOW_FACTOR, tmp_path / "slow")
    junit = tmp_path / "gate.xml"
    proc = _gate(str(baseline), str(slow), *CHECKS, "--junit", str(junit))
    assert proc.returncode == 1, proc.stdout
    last = proc.stdout.splitlines()[-1]
    assert last.startswith("colbench gate: FAIL (1 failure(s)): 3 rows: "), last
    assert "no row can be judged alone (3/3 samples: p >= 0.05 > 0.0083)" in last
    # 0.7 x the rate: transfers take 1/0.7 as long, bus bandwidth drops by about 30%.
    (pooled,) = [line for line in proc.stdout.splitlines() if line.startswith("# pooled")]
    assert pooled.startswith("# pooled busbw_gbps: worse, median change -"), pooled
    assert -45 < float(pooled.split("median change ")[1].split("%")[0]) < -15, pooled
    for line in _rows(proc.stdout):
        assert -45 < _busbw_change_pct(line) < 0, line
    failures = ET.parse(junit).getroot().findall(".//failure")
    assert len(failures) == 1 and failures[0].get("type") == "worse"
    cases = ET.parse(junit).getroot().findall(".//testcase[@classname='colbench.gate.pooled']")
    assert len(cases) == 1 and cases[0].find("failure") is not None


# --- one wrong element, on a run that is faster than the baseline --------------------

CORRUPT_OP, CORRUPT_BYTES, CORRUPT_RANK = "all_gather", 1 << 20, 1


def _one_row(coll: Collective, bufs: Buffers, ctx: Context) -> bool:
    """One rank's output of one op at one size."""
    size_bytes = bufs.recv.numel() * bufs.recv.element_size()
    return coll.name == CORRUPT_OP and ctx.rank == CORRUPT_RANK and size_bytes == CORRUPT_BYTES


class _CsvSink:
    def __init__(self, writer: TableWriter) -> None:
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
            ops=(CORRUPT_OP,),
            sizes_bytes=tuple(parse_sizes(SIZES)),
            iters=4,
            warmup=1,
            repeat=REPEAT,
            placements=("out",),
        )
        work = [
            dataclasses.replace(w, coll=Corrupting(w.coll, _one_row)) for w in plan(cfg, 2, "gloo")
        ]
        info = RunInfo("corrupted", "gloo", "cpu", 2, 1)
        writer = TableWriter(Path(csv_path), RESULTS) if rank == 0 else None
        sink = _CsvSink(writer) if writer is not None else None
        RankBench(BenchContext.on_cpu(cfg, info, rank), sink).run(work)
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
    # Its bandwidth improved: it is faster on every row and still fails.
    assert _busbw_change_pct(line) > 15, line
    assert all(_busbw_change_pct(x) > 15 for x in _rows(proc.stdout)), proc.stdout
    assert lines[-1].startswith("colbench gate: FAIL (1 failure(s))")
