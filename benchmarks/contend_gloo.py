"""How much does a GEMM load slow gloo on this machine, and how often does the gate see it?

Issue 25's proof, repeated: tests/dist/test_contend.py's sweep (2 gloo ranks over
unshaped loopback, all_reduce 1K and 8K, 20 repeats, ``--contend gemm:384``: one matmul
thread per rank beside the collective), then the paired gate with its check:

    colbench sweep --op all_reduce --sizes 1K,8K -n 20 -w 3 --repeat 20 --backend gloo \\
        --nprocs 2 --contend gemm:384
    colbench gate RUN --variant-a contend=none --variant-b contend=gemm:384:float32 \\
        --check time_us:+10%

Printed per trial: each size's median ratio B/A over its pairs, the share of pairs with
B more than 10% slower, the GEMM's median TFLOP/s alone and beside, the pooled row's
verdict and the gate's exit code; then how many trials the gate failed (the test's pass
count). Run it under the machine-wide lock:

    flock /tmp/colbench-heavy.lock .venv/bin/python benchmarks/contend_gloo.py --trials 10

The numbers in docs/contend.md come from it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from colbench.results.rows import load  # noqa: E402
from tests.dist.test_contend import LIMIT_PCT, LOADED, SWEEP  # noqa: E402


def colbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "colbench", *args],
        capture_output=True, text=True, cwd=REPO, check=False, timeout=600,
    )  # fmt: skip


def trial(out: Path) -> tuple[str, bool]:
    """One sweep and its gate: (the printed line, whether the pooled row failed)."""
    proc = colbench(*SWEEP, "--contend", "gemm:384", "--out", str(out))
    if proc.returncode != 0:
        return f"sweep exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1]}", False
    gate = colbench(
        "gate", str(out), "--variant-a", "contend=none", "--variant-b", LOADED,
        "--check", f"time_us:+{LIMIT_PCT}%",
    )  # fmt: skip
    pooled = next(
        (line.split() for line in gate.stdout.splitlines() if line.split()[:3] == ["all"] * 3),
        [],
    )
    frame = load(out)
    alone = frame[frame["variant"] == "contend=none"].set_index(["size_bytes", "repeat"])
    loaded = frame[frame["variant"] == LOADED].set_index(["size_bytes", "repeat"])
    ratio = loaded["time_us"] / alone["time_us"]
    parts = []
    for size, group in ratio.groupby(level=0):
        above = (group > 1 + LIMIT_PCT / 100).mean()
        parts.append(f"{size} B x{statistics.median(group):.2f} ({above:.0%} > +{LIMIT_PCT}%)")
    gemm = (
        f"gemm {loaded['load_alone_tflops'].median() * 1e3:.1f} GFLOP/s alone, "
        f"{loaded['load_beside_tflops'].median() * 1e3:.1f} beside"
    )
    verdict = pooled[-1] if pooled else "?"
    line = f"{'; '.join(parts)}; {gemm}; pooled {verdict}, gate exit {gate.returncode}"
    return line, gate.returncode == 1 and verdict == "fail"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    args = parser.parse_args()
    caught = 0
    with tempfile.TemporaryDirectory(prefix="colbench-contend-") as tmp:
        for index in range(args.trials):
            line, failed = trial(Path(tmp) / f"run{index}")
            caught += failed
            print(f"trial {index + 1:2d}: {line}", flush=True)
    print(f"the paired gate saw the slowdown in {caught} of {args.trials} trials")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
