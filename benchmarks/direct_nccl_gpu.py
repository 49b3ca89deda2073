"""The direct NCCL engine's proof on a GPU (issue 37), in the issue's order of priority.

Run on a GPU machine with nccl4py installed from the wheels carried there (docs/gpu.md,
"The direct NCCL engine"). Every step's raw output goes to ``$OUT/<step>/`` (colbench's run
directories, stdout and stderr); each step prints PASS, FAIL or SKIP with its figure. Steps:

1. nccl4py's libnccl is torch's (same version);
2. a world of one: every op exact on both engines (float32, bfloat16; sum, max), eager
   and under -G;
3. eager out-of-place all_gather, 8 B-8 MiB, both engines; with ``NCCL_TESTS_DIR`` (an
   nccl-tests build against the same NCCL) also all_gather_perf on the same GPU: the
   direct engine within 1.15x of nccl-tests per call;
4. the torch tax at three sizes, per torch setting (flight recorder, timing events,
   desync debug, async error handling off);
5. NCCL's newer knobs on the direct engine: -R 1 and -R 2 in a world of one and -R 2
   on 2 emulated ranks (rows, or NCCL's reason for refusing), -x 0,1,2 and
   NCCL_NVLS_ENABLE=0,2 as variants, each with what NCCL's probe log says it did;
6. 4 emulated ranks (--ranks-per-gpu 4) on both engines, exact.

    OUT=/tmp/out python benchmarks/direct_nccl_gpu.py [--quick]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 1.15
TAX_SIZES = "1K,1M,64M"
#: torch settings that change its cost per call, each against torch's defaults.
TORCH_SETTINGS = (
    ("TORCH_NCCL_TRACE_BUFFER_SIZE", "0,2000"),
    ("TORCH_NCCL_ENABLE_TIMING", "0,1"),
    ("TORCH_NCCL_DESYNC_DEBUG", "0,1"),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3,0"),
)


def colbench(out: Path, name: str, *args: str, timeout: float = 240, env: dict | None = None):
    """Run colbench into ``out/name``; keep its stdout and stderr beside its run dir."""
    where = out / name
    where.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "colbench", *args, "--out", str(where / "run")],
            capture_output=True, text=True, timeout=timeout, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, check=False,
        )  # fmt: skip
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, stdout, stderr = 124, str(exc.stdout or ""), f"timed out after {timeout} s"
    (where / "stdout.txt").write_text(stdout)
    (where / "stderr.txt").write_text(stderr)
    print(f"   {name}: exit {code} in {time.monotonic() - started:.0f} s", flush=True)
    return code, stdout, stderr


def rows(run: Path) -> list[dict[str, str]]:
    path = run / "results.csv"
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def verdict(step: str, ok: bool | None, text: str) -> bool:
    word = "SKIP" if ok is None else "PASS" if ok else "FAIL"
    print(f"{word} {step}: {text}", flush=True)
    return ok is not False


def exact(out: Path, name: str, *more: str, nprocs: int = 1) -> bool:
    code, _, err = colbench(
        out, name, "sweep", "--engine", "torch,nccl", "--op", "all", "--dtype",
        "float32,bfloat16", "--redop", "sum,max", "--sizes", "1K-1M", "--iters", "5",
        "--nprocs", str(nprocs), *more,
    )  # fmt: skip
    found = rows(out / name / "run")
    ok = [r for r in found if r["status"] == "ok"]
    wrong = sum(int(r["wrong"] or 0) for r in ok)
    engines = {r["engine"] for r in ok}
    text = f"{len(ok)} rows, engines {sorted(engines)}, {wrong} wrong; {err.strip()[-200:]}"
    return verdict(name, code == 0 and wrong == 0 and engines == {"torch", "nccl"}, text)


def step_library(out: Path) -> bool:
    import torch

    from colbench.direct.nccl4py import Nccl, version_text

    nccl = Nccl()
    ours, torchs = version_text(nccl.version()), ".".join(map(str, torch.cuda.nccl.version()))
    (out / "library.txt").write_text(f"nccl4py: {ours} {nccl.library_path()}\ntorch: {torchs}\n")
    return verdict("library", ours == torchs, f"nccl4py loaded NCCL {ours}, torch {torchs}")


def step_all_gather(out: Path, quick: bool) -> bool:
    iters = "20" if quick else "100"
    code, _, _ = colbench(
        out, "all_gather", "sweep", "--engine", "torch,nccl", "--op", "all_gather",
        "--placement", "out", "--sizes", "8-8M", "--iters", iters, "--repeat", "3",
    )  # fmt: skip
    found = [r for r in rows(out / "all_gather" / "run") if r["status"] == "ok"]
    direct = {}
    for r in found:
        if r["engine"] == "nccl":
            direct.setdefault(int(r["size_bytes"]), []).append(float(r["time_us"]))
    medians = {size: statistics.median(t) for size, t in direct.items()}
    (out / "all_gather" / "direct_us.txt").write_text(
        "".join(f"{s} {t:.3f}\n" for s, t in sorted(medians.items()))
    )
    tests = os.environ.get("NCCL_TESTS_DIR")
    if not tests:
        return verdict("all_gather", None if code == 0 else False,
                       f"direct engine {min(medians.values(), default=0):.2f}-"
                       f"{max(medians.values(), default=0):.2f} us; no NCCL_TESTS_DIR")  # fmt: skip
    perf = Path(tests) / "all_gather_perf"
    log = subprocess.run([str(perf), "-b", "8", "-e", "8M", "-f", "2", "-g", "1", "-n", iters],
                         capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    (out / "all_gather" / "nccl_tests.txt").write_text(log.stdout + log.stderr)
    theirs = {}
    for line in log.stdout.splitlines():
        parts = line.split()
        if parts and parts[0].isdigit() and len(parts) > 6:
            theirs[int(parts[0])] = float(parts[5])  # out-of-place time, us
    ratios = {s: medians[s] / theirs[s] for s in medians if theirs.get(s)}
    (out / "all_gather" / "ratios.txt").write_text(
        "".join(
            f"{s} {medians[s]:.3f} {theirs[s]:.3f} {r:.3f}\n" for s, r in sorted(ratios.items())
        )
    )
    worst = max(ratios.values(), default=float("inf"))
    return verdict("all_gather", code == 0 and worst <= TARGET_RATIO,
                   f"direct/nccl-tests per call {min(ratios.values(), default=0):.3f}-{worst:.3f} "
                   f"over {len(ratios)} sizes (target <= {TARGET_RATIO})")  # fmt: skip


def step_tax(out: Path) -> bool:
    ok = True
    for name, values in TORCH_SETTINGS:
        code, stdout, _ = colbench(
            out, f"tax-{name}", "sweep", "--engine", "torch,nccl", "--op", "all_reduce",
            "--sizes", TAX_SIZES, "--iters", "50", "--repeat", "3", "--env", f"{name}={values}",
        )  # fmt: skip
        summary = [line for line in stdout.splitlines() if "torch adds" in line]
        ok = verdict(f"tax {name}", code == 0, "; ".join(summary)[:400]) and ok
    return ok


#: NCCL's newer knobs (issue 37 item 4), each a run of the direct engine: (name, args).
KNOB_RUNS = (
    ("register-local-1", ("-R", "1", "--nprocs", "1")),
    ("register-symmetric-1", ("-R", "2", "--nprocs", "1")),
    ("register-symmetric-2", ("-R", "2", "--ranks-per-gpu", "2", "--nprocs", "2")),
    ("cta-policy", ("-x", "0,1,2", "--ranks-per-gpu", "2", "--nprocs", "2")),
    ("nvls", ("--env", "NCCL_NVLS_ENABLE=0,2", "--ranks-per-gpu", "2", "--nprocs", "2")),
)


def step_knobs(out: Path) -> bool:
    """Each knob's rows are exact, or unsupported with the reason; what NCCL's log says
    it did (the probe's note) and every unsupported reason are kept in ``knobs.txt``."""
    ok, said = True, []
    for name, more in KNOB_RUNS:
        code, _, err = colbench(
            out, name, "sweep", "--engine", "nccl", "--op", "all_reduce,all_gather",
            "--sizes", "1K,1M,64M", "--iters", "20", *more,
        )  # fmt: skip
        found = rows(out / name / "run")
        measured = [r for r in found if r["status"] == "ok"]
        refused = [r for r in found if r["status"] == "unsupported"]
        wrong = sum(int(r["wrong"] or 0) for r in measured)
        algos = sorted({f"{r['nccl_algo']}/{r['nccl_proto']}" for r in measured})
        lines = [ln for ln in err.splitlines() if "NCCL's log" in ln or "unsupported" in ln]
        said += [f"## {name}", *lines, f"algorithms: {', '.join(algos)}", ""]
        text = f"{len(measured)} ok, {len(refused)} unsupported, {wrong} wrong; {algos}"
        ok = verdict(f"knob {name}", code == 0 and wrong == 0 and bool(found), text) and ok
    (out / "knobs.txt").write_text("\n".join(said))
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "direct-nccl-out"))
    out.mkdir(parents=True, exist_ok=True)
    results = [
        step_library(out),
        exact(out, "exact-eager"),
        exact(out, "exact-graph", "--cuda-graph", "5"),
        step_all_gather(out, args.quick),
        step_tax(out),
        step_knobs(out),
        exact(out, "exact-emulated-4", "--ranks-per-gpu", "4", "--sizes", "1K-64K", nprocs=4),
    ]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
