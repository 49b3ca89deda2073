"""``colbench predict`` foresees 6 ranks from 3 and 4 on a real shaped fabric.

One network namespace per rank behind one bridge (tests/netns.py), every node's link
shaped to RATE_MBIT both ways, so each rank has its own NIC of known rate and the
network, not the 2-core CPU, sets the time of the larger sizes; every data packet pays a
known cost of PACKET_COST_BYTES of link time (1 ms), the fabric's latency per message,
which this kernel cannot add as a delay (no netem). The fabric is the one of
docs/predict-validation.md, where each setting is explained: small packets pass queued
data on a link, TCP does not restart slow start after idle gaps (a per-namespace
sysctl), and ranks run as FIFO threads so that a woken rank does not wait for CPU time
slices. all_reduce and all_gather are measured with gloo (ring algorithms) at 3 and 4
ranks, the ring model is fitted by the real CLI and checked against a real 6-rank run:
the largest relative error of the predicted time from 4K up must be within
MAX_ERROR_PCT. A smaller version of benchmarks/predict_fabric.py (which fits 2, 3 and 4
ranks and predicts 6 and 8, over more sizes).

Why not 2 ranks, as the benchmark does: on this fabric a 2-rank ring is not the ring of
larger N (our reading: its one TCP connection per rank carries data both ways, so the
acknowledgements of one direction ride on the other's data packets, which pay the
per-packet cost); a 2-rank all_gather of 256K took 21.9 ms (median of 3) where 3 ranks, moving more,
took 19.5 ms. Those points bent the all_gather fit (residuals 13% rms, 27% max) and the
6-rank 4K prediction missed by 15.1%; fitted on 3 and 4 ranks, the same runs predict every
6-rank point within 7.9%. Skipped where namespaces cannot be made.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from colbench.config.sizes import parse_size
from tests import netns
from tests.conftest import REPO

RATE_MBIT = 100.0
MAX_ERROR_PCT = 15.0
MIN_SIZE = "4K"
PACKET_COST_BYTES = 12_500
FIT_RANKS = (3, 4)
CHECK_RANKS = 6
SWEEP = ["sweep", "--op", "all_reduce,all_gather", "--sizes", "4K,64K,256K,1M", "--backend", "gloo"]
# Medians of 3 repeats of 5 calls: a single call on 2 shared cores can lose milliseconds
# to the scheduler, a large share of the smallest size's time.
SWEEP += ["-n", "5", "-w", "2", "--repeat", "3", "--placement", "in", "--no-table"]

_reason = netns.unavailable()
pytestmark = [
    pytest.mark.fabric,  # namespaces, shaped links, and times compared across runs
    pytest.mark.skipif(_reason is not None, reason=f"no network namespaces: {_reason}"),
]


def _sweep(fabric: netns.Fabric, ranks: int, out: Path) -> str:
    results = fabric.colbench(
        [*SWEEP, "--out", str(out)], timeout_s=300, nodes=ranks, wrapper=("chrt", "--fifo", "1")
    )
    codes = [proc.returncode for proc in results]
    assert codes == [0] * ranks, f"{ranks} ranks: exit codes {codes}" + "".join(
        f"\n[rank {rank}] {proc.stderr[-1500:]}" for rank, proc in enumerate(results)
    )
    return str(out)


def _predict(fitted: list[str], against: str, out: Path) -> subprocess.CompletedProcess[str]:
    """Run the real ``colbench predict --against``."""
    argv = [sys.executable, "-m", "colbench", "predict", *fitted, "--algo", "ring"]
    argv += ["--op", "all_reduce", "--op", "all_gather", "--against", against]
    argv += ["--min-size", MIN_SIZE, "--max-error", f"{MAX_ERROR_PCT:g}"]
    argv += ["--out", str(out)]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    print(proc.stdout)
    return proc


def _measure_and_predict(fabric: netns.Fabric, out: Path) -> subprocess.CompletedProcess[str]:
    """Sweep at 3 and 4 ranks and at 6, then predict 6 from the others.

    One 6-rank point of eight can be caught in a slow spell of a shared runner: CI once
    measured all_reduce of 64K at 39.0 ms where this fabric gives 31.0 (the other seven
    points within 5.4%), two of its three passes slow. A miss is measured once more, in
    fresh ranks: the model must hold against one of two independent 6-rank runs, so a
    model that is wrong still fails both.
    """
    fitted = [_sweep(fabric, n, out / f"{n}n") for n in FIT_RANKS]
    against = _sweep(fabric, CHECK_RANKS, out / f"{CHECK_RANKS}n")
    proc = _predict(fitted, against, out / "p")
    if proc.returncode != 1:  # 0: within the bound; anything else is no miss to re-measure
        return proc
    print(f"re-measuring {CHECK_RANKS} ranks after a miss:\n{proc.stdout[-1500:]}")
    again = _sweep(fabric, CHECK_RANKS, out / f"{CHECK_RANKS}n-again")
    return _predict(fitted, again, out / "p-again")


def test_ring_prediction_of_six_ranks_from_three_and_four_is_within_15_percent(
    tmp_path: Path,
) -> None:
    with netns.fabric(CHECK_RANKS, "pr") as fabric:
        fabric.shape(RATE_MBIT, small_first=True, packet_cost_bytes=PACKET_COST_BYTES)
        fabric.sysctl("net.ipv4.tcp_slow_start_after_idle", 0)
        proc = _measure_and_predict(fabric, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    checked = pd.read_csv(Path(proc.args[-1]) / "against.csv")
    # Every measured (op, size) of the 6-rank run was predicted, by the ring model.
    assert set(checked["op"]) == {"all_reduce", "all_gather"}
    assert set(checked["algo"]) == {"ring"} and set(checked["world_size"]) == {CHECK_RANKS}
    assert len(checked) == 2 * 4
    # --min-size 4K judges what was asked for at 4K and up: all_gather of 4K on 6 ranks
    # measures 4032 B (672 B per rank) and is judged too.
    judged = checked[checked["requested_bytes"] >= parse_size(MIN_SIZE)]
    assert len(judged) == 2 * 4 and judged["size_bytes"].min() == 4032
    assert (judged["error_pct"].abs() <= MAX_ERROR_PCT).all(), checked.to_string()
    assert proc.stdout.count("largest |error| from 4K: ") == 2, proc.stdout
