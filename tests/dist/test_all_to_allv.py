"""all_to_allv on real gloo ranks: every pattern exact, its numbers re-derived by hand,
and --split's strided (rail) groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from colbench.results.rows import load
from tests.conftest import call_colbench

pytestmark = pytest.mark.dist


@pytest.mark.parametrize(
    ("spec", "nprocs"),
    [("zipf:1.5", 4), ("topk:128,16,8,2", 2), ("spread:1", 3), ("uniform", 3)],
)
def test_every_pattern_and_dtype_is_exact(tmp_path: Path, spec: str, nprocs: int) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "all_to_allv", "--splits", spec, "--dtype", "all", "--sizes", "1K,64K",
        "--backend", "gloo", "--nprocs", str(nprocs), "-n", "2", "-w", "1", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(out)
    assert len(frame) == 2 * 8 and (frame["wrong"] == 0).all()
    assert set(frame["splits"]) == {spec} and set(frame["split"]) == {""}
    # The busiest rank's bytes are what size_bytes reports; none sends less than the mean.
    assert (frame["size_bytes"] >= frame["mean_bytes"]).all()
    assert (frame[["send_imbalance", "recv_imbalance"]] >= 1).all().all()
    if spec in ("uniform", "spread:1"):
        # Every rank sends (and receives) as much: no imbalance.
        assert (frame["send_imbalance"] == 1).all() and (frame["recv_imbalance"] == 1).all()
    if spec.startswith("zipf"):
        # Skewed receivers, even senders.
        assert (frame["send_imbalance"] == 1).all() and (frame["recv_imbalance"] > 1.2).all()


#: 4 ranks, rows = senders. Sent: 8192, 3072, 2048, 4096 B (mean 4352); received:
#: 2560, 5632, 4096, 5120 B. The busiest rank is rank 0, by what it sends.
MATRIX = "0 4096 2048 2048\n1024 0 1024 1024\n512 512 0 1024\n1024 1024 1024 1024\n"


def test_a_traffic_matrix_by_hand(tmp_path: Path) -> None:
    matrix = tmp_path / "traffic.txt"
    matrix.write_text(MATRIX)
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "alltoallv", "--splits", f"file:{matrix}", "--sizes", "4352,8704",
        "--backend", "gloo", "--nprocs", "4", "-n", "3", "-w", "1", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(out)
    assert (frame["wrong"] == 0).all()
    assert frame["splits"].str.fullmatch(r"file:traffic\.txt@[0-9a-f]{12}").all()
    for _, row in frame.iterrows():
        scale = row["requested_bytes"] // 4352  # the file's own bytes, then twice them
        assert row["size_bytes"] == 8192 * scale
        assert row["count"] == 4352 * scale // 4 // 4  # the uniform share per peer
        assert row["mean_bytes"] == 4352 * scale
        assert row["send_imbalance"] == pytest.approx(8192 / 4352, rel=1e-5)
        assert row["recv_imbalance"] == pytest.approx(5632 / 4352, rel=1e-5)
        # nccl-tests: algbw from the busiest rank's bytes, busbw = algbw * (n-1)/n (each
        # cell as the CSV holds it: 6 significant digits).
        algbw = 8192 * scale / row["time_us"] / 1e3
        assert row["algbw_gbps"] == pytest.approx(algbw, rel=2e-5)
        assert row["busbw_gbps"] == pytest.approx(algbw * 3 / 4, rel=2e-5)
        assert row["meanbw_gbps"] == pytest.approx(4352 * scale / row["time_us"] / 1e3, rel=2e-5)
    assert "the busiest rank sends 1.88x and receives 1.29x the mean rank's 8704 B" in proc.stderr


def test_mod_split_runs_every_collective_in_rails(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "all_gather,all_to_allv,broadcast", "--splits", "zipf:1",
        "--split", "mod:2", "--sizes", "1K,16K", "--root", "1", "--backend", "gloo",
        "--nprocs", "4", "-n", "2", "-w", "1", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(out)
    assert (frame["wrong"].dropna() == 0).all()
    assert set(frame["split"]) == {"mod:2"}
    assert set(frame["group_size"]) == {2} and set(frame["groups"]) == {2}
    assert "4 rank(s) in 2 groups of 2 by rank mod 2" in proc.stdout


def test_div_split_is_group_size(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "all_reduce", "--split", "DIV 2", "--sizes", "1K", "--backend", "gloo",
        "--nprocs", "4", "-n", "1", "-w", "0", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(out)
    assert frame[["split", "group_size", "groups"]].values.tolist() == [["div:2", 2, 2]]
    assert "4 rank(s) in 2 groups of 2 on" in proc.stdout
