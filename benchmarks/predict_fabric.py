"""Does ``colbench predict`` foresee 6 and 8 ranks from 2, 3 and 4, on a real shaped fabric?

One network namespace per rank ("node"), all behind one bridge (tests/netns.py
``fabric``); every node's link is shaped with htb to --rate-mbit both ways, so each rank
has a NIC of known rate, small packets (ACKs, gloo's control messages) pass queued data,
and, where the kernel has netem, every packet a node sends is delayed by --delay-ms (a
known per-hop latency). Inside every namespace TCP does not restart slow start after an
idle gap (net.ipv4.tcp_slow_start_after_idle=0): otherwise every timed call after a
barrier would start from a small congestion window again, a cost the ring model has no
term for. Ranks run as FIFO threads (RANK_WRAPPER). all_reduce and all_gather run with
gloo (ring algorithms only) at every world size, one launched rank per node; the fit uses
the smaller world sizes and is checked against the larger ones.

Printed: each run; a cross-check fit of this script's own (numpy least squares of the
ring model, time = c + steps(N) * alpha + bytes(N) * size * beta, all_reduce's 2(N-1)
steps moving 2(N-1)/N of the size per rank and all_gather's N-1 steps moving (N-1)/N)
with its error table; then ``colbench predict``'s fit and table against the measured
runs; then PASS/FAIL for the largest relative error of the predicted time per (op, size)
from --min-size up against --max-error (the CLI's verdict; ``--own-fit``: the
cross-check's instead). Needs root (namespaces). docs/predict-validation.md holds the
table of a run and what each fabric setting is for.

    .venv/bin/python benchmarks/predict_fabric.py --out /tmp/pf
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from colbench.config.sizes import format_size, parse_size  # noqa: E402
from colbench.results.rows import load  # noqa: E402
from tests import netns  # noqa: E402

OPS = ("all_reduce", "all_gather")
#: Ranks run as real-time (FIFO, lowest priority) threads: with 8 ranks and other work on
#: 2 cores, the fair scheduler let a woken rank wait for the running ones' time slices,
#: 1-2 ms per ring step that grew with the number of ranks (4K all_gather on 8 ranks:
#: 14 ms, against 3.5 ms as FIFO). The ranks sleep on the network most of the time, so
#: they take little from anything else.
RANK_WRAPPER = ("chrt", "--fifo", "1")
#: 1 ms of a 100 Mbit/s link per data packet: several times the ranks' CPU time per ring
#: step on 8 ranks (0.46 ms), so the fabric, not the CPU, sets small messages' latency.
PACKET_COST_BYTES = 12_500


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--fit-ranks", default="2,3,4", help="world sizes the fit uses")
    parser.add_argument("--check-ranks", default="6,8", help="world sizes predicted")
    parser.add_argument("--sizes", default="4K-2M", help="colbench --sizes")
    parser.add_argument("--iters", type=int, default=5, help="timed calls per size")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls per size")
    parser.add_argument("--repeat", type=int, default=5, help="sweep repeats (median taken)")
    parser.add_argument("--rate-mbit", type=float, default=100.0, help="every node's link")
    parser.add_argument(
        "--delay-ms", type=float, default=None, help="per-hop delay (default 1 with netem, else 0)"
    )
    parser.add_argument(
        "--packet-cost-bytes",
        type=int,
        default=None,
        help="bytes htb charges per data packet (default 12500, 1 ms at 100 Mbit/s, "
        "where there is no delay; else 0)",
    )
    parser.add_argument("--min-size", default="4K", help="smallest size judged")
    parser.add_argument("--max-error", type=float, default=15.0, help="PASS bound, percent")
    parser.add_argument("--own-fit", action="store_true", help="check with this script's fit")
    parser.add_argument("--out", type=Path, default=Path("/tmp/colbench-predict-fabric"))
    return parser.parse_args(argv)


def _ranks(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def measure(fabric: netns.Fabric, world_size: int, out: Path, args: argparse.Namespace) -> Path:
    """One colbench sweep of OPS on the first ``world_size`` nodes; its run directory."""
    run = out / f"{world_size}n"
    argv = ["sweep", "--op", ",".join(OPS), "--sizes", args.sizes, "--backend", "gloo"]
    argv += ["-n", str(args.iters), "-w", str(args.warmup), "--repeat", str(args.repeat)]
    argv += ["--placement", "in", "--no-table", "--out", str(run)]
    started = time.monotonic()
    results = fabric.colbench(argv, timeout_s=600, nodes=world_size, wrapper=RANK_WRAPPER)
    codes = [proc.returncode for proc in results]
    if any(codes):
        tails = "".join(f"\n[rank {r}] {p.stderr[-1500:]}" for r, p in enumerate(results))
        raise RuntimeError(f"sweep at {world_size} ranks: exit codes {codes}{tails}")
    print(f"measured {world_size} ranks in {time.monotonic() - started:.0f} s -> {run}")
    return run


def medians(runs: Sequence[Path]) -> pd.DataFrame:
    """Median time per (op, world_size, size) over the runs' repeats."""
    frame = pd.concat([load(run) for run in runs], ignore_index=True)
    frame = frame[frame["status"] == "ok"]
    keys = ["op", "world_size", "requested_bytes", "size_bytes"]
    return frame.groupby(keys, as_index=False)["time_us"].median()


def ring_terms(op: str, world_size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(steps, share of size_bytes each rank sends) of gloo's ring algorithm."""
    n = world_size.astype(float)
    if op == "all_reduce":
        return 2 * (n - 1), 2 * (n - 1) / n
    return n - 1, (n - 1) / n


def own_fit(fit: pd.DataFrame, check: pd.DataFrame) -> pd.DataFrame:
    """Least squares (relative residuals) of c + steps*alpha + share*size*beta per op on
    ``fit``; predicted against measured for every row of ``check``."""
    rows = []
    for op in OPS:
        mine = fit[fit["op"] == op]
        steps, share = ring_terms(op, mine["world_size"].to_numpy())
        measured = mine["time_us"].to_numpy()
        design = np.column_stack([np.ones_like(steps), steps, share * mine["size_bytes"]])
        coef, *_ = np.linalg.lstsq(design / measured[:, None], np.ones_like(measured), rcond=None)
        residual = design @ coef / measured - 1
        print(
            f"{op}: ring model c={coef[0]:.0f} us alpha={coef[1]:.0f} us/step "
            f"beta={coef[2] * 1e3:.3f} ns/B ({8 / coef[2]:.1f} Mbit/s); "
            f"residuals rms {np.sqrt(np.mean(residual**2)) * 100:.1f}% "
            f"max {np.max(np.abs(residual)) * 100:.1f}%"
        )
        theirs = check[check["op"] == op]
        steps, share = ring_terms(op, theirs["world_size"].to_numpy())
        predicted = coef[0] + steps * coef[1] + share * theirs["size_bytes"] * coef[2]
        rows.append(theirs.assign(predicted_time_us=predicted.to_numpy()))
    table = pd.concat(rows, ignore_index=True).rename(columns={"time_us": "measured_time_us"})
    table["error_pct"] = (table["predicted_time_us"] / table["measured_time_us"] - 1) * 100
    return table


def judge(table: pd.DataFrame, min_size: str, max_error_pct: float) -> bool:
    """Print the error table and the largest |error| per op from ``min_size`` (as asked
    for: all_gather of 4K on 6 ranks measures 4032 B); True when within the bound."""
    table = table.sort_values(["op", "size_bytes", "world_size"])
    print(
        f"{'op':<11} {'size':>6} {'ranks':>5} {'predicted_us':>13} {'measured_us':>12} {'error':>7}"
    )
    for row in table.to_dict("records"):
        print(
            f"{row['op']:<11} {format_size(int(row['size_bytes'])):>6} {row['world_size']:>5} "
            f"{row['predicted_time_us']:>13.0f} {row['measured_time_us']:>12.0f} "
            f"{row['error_pct']:>6.1f}%"
        )
    judged = table[table["requested_bytes"] >= parse_size(min_size)]
    worst_pct = 0.0
    for op in OPS:
        rows = judged[judged["op"] == op]
        at = int(rows["error_pct"].abs().to_numpy().argmax())
        error_pct = float(abs(rows["error_pct"].iloc[at]))
        worst_pct = max(worst_pct, error_pct)
        print(
            f"{op}: largest |error| from {min_size}: {error_pct:.1f}% "
            f"({format_size(int(rows['size_bytes'].to_numpy()[at]))}, "
            f"{rows['world_size'].to_numpy()[at]} ranks)"
        )
    return worst_pct <= max_error_pct


def predict_cli(
    fit_runs: Sequence[Path], check_runs: Sequence[Path], args: argparse.Namespace
) -> bool:
    """``colbench predict FIT --against CHECK --max-error``; True when it exits 0."""
    argv = [sys.executable, "-m", "colbench", "predict", *map(str, fit_runs), "--op", "all_reduce"]
    argv += ["--op", "all_gather", "--algo", "ring"]
    for run in check_runs:
        argv += ["--against", str(run)]
    argv += ["--min-size", args.min_size, "--max-error", f"{args.max_error:g}"]
    argv += ["--out", str(args.out / "predict")]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    print(proc.stdout, proc.stderr, sep="")
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"colbench predict failed with exit {proc.returncode}")
    return proc.returncode == 0


def main() -> int:
    args = parse_args()
    # SIGTERM would end the process without unwinding: the fabric's namespaces would stay.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if why := netns.unavailable():
        print(f"cannot build the fabric: {why}")
        return 2
    if args.delay_ms is None:
        args.delay_ms = 0.0 if netns.qdisc_unavailable("netem", "delay", "1ms") else 1.0
    if args.packet_cost_bytes is None:
        # Without a delay, a per-packet cost is the fabric's known latency: below 64K the
        # ranks' CPU time per ring step, which grows with ranks per core, would set it.
        args.packet_cost_bytes = 0 if args.delay_ms else PACKET_COST_BYTES
    fit_ranks, check_ranks = _ranks(args.fit_ranks), _ranks(args.check_ranks)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    cost_ms = args.packet_cost_bytes * 8 / (args.rate_mbit * 1e3)
    print(
        f"fabric: {args.rate_mbit:g} Mbit/s per node both ways, {args.delay_ms:g} ms per hop, "
        f"{args.packet_cost_bytes} B ({cost_ms:g} ms) per data packet"
    )
    with netns.fabric(max(fit_ranks + check_ranks), "pf") as fabric:
        fabric.shape(
            args.rate_mbit,
            delay_ms=args.delay_ms,
            small_first=True,
            packet_cost_bytes=args.packet_cost_bytes,
        )
        fabric.sysctl("net.ipv4.tcp_slow_start_after_idle", 0)
        fit_runs = [measure(fabric, n, args.out, args) for n in fit_ranks]
        check_runs = [measure(fabric, n, args.out, args) for n in check_ranks]
    # This script's own fit first, as a cross-check of the CLI's (or instead of it).
    table = own_fit(medians(fit_runs), medians(check_runs))
    ok = judge(table, args.min_size, args.max_error)
    table.to_csv(args.out / "own_fit_against.csv", index=False)
    if not args.own_fit:
        ok = predict_cli(fit_runs, check_runs, args)
    print(
        ("PASS" if ok else "FAIL") + f": largest |error| from {args.min_size} "
        f"{'within' if ok else 'over'} {args.max_error:g}%"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
