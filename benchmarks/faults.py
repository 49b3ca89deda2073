"""Faults of the disk, the network, signals and inputs, made for real: does each end as
documented?

Run: python benchmarks/faults.py [--runs N] [--only NAME[,NAME...]]

Target (issue 34): every class ends as expected in every run: the documented exit code,
a message that names what failed, no traceback, and the rows measured before the fault
still readable. One case per fault class; each is run N times (default 3) and the script
prints, per class, how many runs ended as expected, the first mismatch, then PASS or FAIL.

Faults are made as they happen to users: a file-size limit (RLIMIT_FSIZE, as a quota
does), a run directory renamed while the ranks are held still, a 16 KiB tmpfs in a
private mount namespace (``unshare -m``, root only), a listener on the rendezvous port
that never answers or answers HTTP, signals to the parent, a stale launcher environment,
an interface that does not exist, an address-space limit, impossible values and shapes
in results.csv, meta.json and traces, a reader that closes the pipe.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from colbench.results.rows import load  # noqa: E402
from tests.dist.test_rendezvous_address import _hold, _http, listener  # noqa: E402

PY = sys.executable
SWEEP = ["sweep", "--op", "all_reduce", "--sizes", "1K-256K", "-n", "5", "-w", "1",
         "--no-table", "--no-progress"]  # fmt: skip
LONG = ["--sizes", "1K-4M", "-n", "20", "--repeat", "3"]


@dataclass
class Outcome:
    code: int
    stderr: str
    rows_ok: bool = True


@dataclass
class Case:
    name: str
    what: str
    run: Callable[[Path], Outcome]
    code: int | tuple[int, ...]
    said: str
    needs_root: bool = False


def colbench(*args: str, env: dict[str, str] | None = None, **kw: object) -> Outcome:
    proc = subprocess.run(
        [PY, "-m", "colbench", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        check=False,
        **kw,  # type: ignore[arg-type]
    )
    return Outcome(proc.returncode, proc.stdout + proc.stderr)


def rows_of(run: Path) -> int:
    try:
        return len(load(run))
    except Exception:
        return -1


def started(out: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PY, "-m", "colbench", *SWEEP, *extra, "--out", str(out)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_rows(out: Path, rows: int, proc: subprocess.Popen[str]) -> list[int]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError, ValueError, KeyError), open(out / "results.csv") as f:
            if sum(1 for _ in f) - 1 >= rows:
                return [int(p) for p in json.loads((out / "meta.json").read_text())["rank_pids"]]
        time.sleep(0.05)
    raise RuntimeError("the sweep wrote no rows in time")


def finished(proc: subprocess.Popen[str]) -> Outcome:
    _, err = proc.communicate(timeout=300)
    return Outcome(proc.returncode, err)


# -- writes ---------------------------------------------------------------------------------


def file_size_limit(tmp: Path) -> Outcome:
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))

    out = colbench(*SWEEP, "--repeat", "3", "--out", str(tmp / "run"), preexec_fn=limit)
    out.rows_ok = rows_of(tmp / "run") >= 5
    return out


def renamed_directory(tmp: Path) -> Outcome:
    proc = started(tmp / "run", *LONG)
    pids = wait_rows(tmp / "run", 2, proc)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    (tmp / "run").rename(tmp / "moved")
    for pid in pids:
        os.kill(pid, signal.SIGCONT)
    out = finished(proc)
    out.rows_ok = rows_of(tmp / "moved") >= 2
    return out


def full_filesystem(tmp: Path) -> Outcome:
    small = tmp / "small"
    small.mkdir()
    sweep = " ".join([PY, "-m", "colbench", *SWEEP, "--repeat", "3", "--out", f"{small}/run"])
    script = f"mount -t tmpfs -o size=16k tmpfs {small} && {sweep}; c=$?; "
    script += f"cp {small}/run/results.csv {small}/run/meta.json {tmp}/ 2>/dev/null; exit $c"
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], cwd=REPO, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    (tmp / "kept").mkdir()
    for name in ("results.csv", "meta.json"):
        if (tmp / name).exists():
            shutil.move(tmp / name, tmp / "kept" / name)
    return Outcome(proc.returncode, proc.stderr, rows_of(tmp / "kept") >= 5)


# -- signals ----------------------------------------------------------------------------------


def signalled(signum: int) -> Callable[[Path], Outcome]:
    def case(tmp: Path) -> Outcome:
        proc = started(tmp / "run", *LONG)
        wait_rows(tmp / "run", 2, proc)
        proc.send_signal(signum)
        out = finished(proc)
        meta = json.loads((tmp / "run" / "meta.json").read_text())
        out.rows_ok = rows_of(tmp / "run") >= 2 and meta.get("status") == "interrupted"
        return out

    return case


def killed_parent_then_gate(tmp: Path) -> Outcome:
    base = tmp / "base"
    colbench(*SWEEP, "--out", str(base))
    proc = started(tmp / "run", *LONG)
    wait_rows(tmp / "run", 2, proc)
    proc.kill()
    proc.wait()
    time.sleep(1)  # the ranks follow their parent (PDEATHSIG)
    out = colbench("gate", str(base), str(tmp / "run"), "--fail-inconclusive")
    out.rows_ok = rows_of(tmp / "run") >= 2
    return out


# -- the network and the environment -----------------------------------------------------------

QUICK = ["sweep", "--op", "all_reduce", "--sizes", "1K", "-n", "1", "-w", "0", "--no-table",
         "--no-progress", "--init-timeout", "5"]  # fmt: skip


def rendezvous(serve: Callable[..., None]) -> Callable[[Path], Outcome]:
    def case(tmp: Path) -> Outcome:
        with listener(serve) as port:
            env = {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1",
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}  # fmt: skip
            return colbench(*QUICK, "--out", str(tmp / "run"), env=env)

    return case


def stale_world_of_one(tmp: Path) -> Outcome:
    env = {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "29999"}  # fmt: skip
    out = colbench(*SWEEP, "--nprocs", "2", "--out", str(tmp / "run"), env=env)
    out.rows_ok = rows_of(tmp / "run") > 0 and load(tmp / "run")["world_size"].eq(2).all()
    return out


def launcher_world_above_one(tmp: Path) -> Outcome:
    env = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "29999"}  # fmt: skip
    return colbench(*SWEEP, "--nprocs", "2", "--out", str(tmp / "run"), env=env)


def bad_interface(tmp: Path) -> Outcome:
    return colbench(*SWEEP, "--out", str(tmp / "run"), env={"GLOO_SOCKET_IFNAME": "nosuch0"})


def address_space_limit(tmp: Path) -> Outcome:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (300 << 20, 300 << 20))

    return colbench(*SWEEP, "--out", str(tmp / "run"), preexec_fn=limit)


# -- inputs ---------------------------------------------------------------------------------------


def _two_runs(tmp: Path) -> tuple[Path, Path]:
    base, cur = tmp / "base", tmp / "cur"
    colbench(*SWEEP, "--out", str(base))
    colbench(*SWEEP, "--out", str(cur))
    return base, cur


def _edit_csv(run: Path, column: str, value: str) -> None:
    lines = (run / "results.csv").read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    cells = lines[1].rstrip("\n").split(",")
    cells[header.index(column)] = value
    lines[1] = ",".join(cells) + "\n"
    (run / "results.csv").write_text("".join(lines))


def infinite_time(tmp: Path) -> Outcome:
    base, cur = _two_runs(tmp)
    _edit_csv(base, "time_us", "inf")
    _edit_csv(cur, "time_us", "inf")
    # Correctness and presence only: single samples on a shared machine are noise.
    out = colbench("gate", str(base), str(cur), "--check", "wrong:0")
    compare = colbench("compare", str(base), str(cur), "--out", str(tmp / "c.png"))
    out.stderr += compare.stderr
    out.rows_ok = compare.code == 0 and "inf%" not in out.stderr
    return out


def negative_size(tmp: Path) -> Outcome:
    base, cur = _two_runs(tmp)
    _edit_csv(cur, "size_bytes", "-1024")
    # The row is no longer a measurement of its key: the key is missing (once it was a
    # "new" row that passed).
    return colbench("gate", str(base), str(cur), "--check", "wrong:0")


def run_given_twice(tmp: Path) -> Outcome:
    base, cur = _two_runs(tmp)
    return colbench("gate", str(base), str(cur), str(cur))


def meta_of_wrong_shape(tmp: Path) -> Outcome:
    base, cur = _two_runs(tmp)
    meta = json.loads((cur / "meta.json").read_text())
    (cur / "meta.json").write_text(json.dumps({**meta, "versions": "2.13", "env": [1]}))
    return colbench("gate", str(base), str(cur))


def malformed_trace(tmp: Path) -> Outcome:
    trace = tmp / "trace.json"
    event = {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 1, "dur": 5,
             "args": {"Collective name": "allreduce", "dtype": 7, "In msg nelems": 4,
                      "Out msg nelems": 4, "Group size": 2, "Process Group Name": "0"}}  # fmt: skip
    trace.write_text(json.dumps({"traceEvents": [event]}))
    return colbench("replay", str(trace), "--dry-run")


def closed_pipe(tmp: Path) -> Outcome:
    """`| head` that ended before colbench wrote: the read end is closed."""
    trace = tmp / "trace.json"
    call = {"comms": "all_reduce", "in_msg_size": 4, "out_msg_size": 4, "dtype": "float",
            "world_size": 2}  # fmt: skip
    trace.write_text(json.dumps([call]))
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [PY, "-m", "colbench", "replay", str(trace), "--dry-run"], cwd=REPO, stdout=write,
            stderr=subprocess.PIPE, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        os.close(write)
    return Outcome(proc.returncode, proc.stderr)


CASES = [
    Case("write-fsize", "results.csv past a file-size limit", file_size_limit, 6,
         r"cannot write \S+results\.csv: File too large"),
    Case("write-renamed", "run directory renamed mid-run", renamed_directory, 6,
         r"cannot write \S+: No such file or directory \(its directory was removed"),
    Case("write-full", "a full filesystem (16 KiB tmpfs)", full_filesystem, 6,
         r"cannot write \S+: No space left on device", needs_root=True),
    Case("signal-hup", "SIGHUP to the parent", signalled(signal.SIGHUP), 129,
         r"interrupted by SIGHUP"),
    Case("signal-quit", "SIGQUIT to the parent", signalled(signal.SIGQUIT), 131,
         r"interrupted by SIGQUIT"),
    Case("signal-term", "SIGTERM to the parent", signalled(signal.SIGTERM), 143,
         r"interrupted by SIGTERM"),
    Case("killed-parent", "SIGKILL to the parent, then gated", killed_parent_then_gate, 1,
         r"FAIL \(incomplete run"),
    Case("store-silent", "a rendezvous port that never answers", rendezvous(_hold), 4,
         r"accepted the connection but nothing answered within 5 s"),
    Case("store-http", "an HTTP server on the rendezvous port", rendezvous(_http), 2,
         r"answered but is not a torch store"),
    Case("env-stale", "WORLD_SIZE=1 left in the shell, --nprocs 2", stale_world_of_one, 0,
         r"ignoring"),
    Case("env-world", "a launcher world of 2 and --nprocs 2", launcher_world_above_one, 2,
         r"--nprocs"),
    Case("env-ifname", "GLOO_SOCKET_IFNAME that does not exist", bad_interface, 2,
         r"nosuch0"),
    Case("memory-as", "an address-space limit of 300 MiB", address_space_limit, 2,
         r"address space|ulimit -v|memory"),
    Case("value-inf", "inf times in baseline and current", infinite_time, (0, 5),
         r"invalid and not judged"),
    Case("value-size", "a negative size in the current run", negative_size, 1,
         r"size_bytes is negative"),
    Case("value-twice", "one run given twice to the gate", run_given_twice, 2,
         r"would count twice"),
    Case("meta-shape", "meta.json of the wrong shape", meta_of_wrong_shape, (0, 5),
         r"field 'versions' is a string, not an object"),
    Case("trace-dtype", "a trace whose dtype is a number", malformed_trace, 2,
         r"trace \S+trace\.json, call 1"),
    Case("pipe-closed", "replay --dry-run | head -1", closed_pipe, 141, r"^$"),
]  # fmt: skip


def judge(case: Case, out: Outcome) -> str:
    """'' when the run ended as documented, else what differed."""
    codes = case.code if isinstance(case.code, tuple) else (case.code,)
    if out.code not in codes:
        return f"exit {out.code}, not {case.code}: {out.stderr.strip().splitlines()[-1:]}"
    if "Traceback" in out.stderr:
        return "a traceback"
    if not re.search(case.said, out.stderr, flags=re.M):
        return f"no line matching {case.said!r}"
    if not out.rows_ok:
        return "the rows measured before the fault are not all readable"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each case")
    parser.add_argument("--only", default="", help="comma-separated case names")
    args = parser.parse_args(argv)
    chosen = [c for c in CASES if not args.only or c.name in args.only.split(",")]
    root = os.geteuid() == 0 and shutil.which("unshare") is not None
    failed = 0
    print(f"{'class':<14} {'fault':<44} {'expected':>9}  as expected")
    for case in chosen:
        if case.needs_root and not root:
            print(f"{case.name:<14} {case.what:<44} {'':>9}  skipped: needs root and unshare")
            continue
        misses: list[str] = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="colbench-fault-") as tmp:
                try:
                    why = judge(case, case.run(Path(tmp)))
                except Exception as exc:
                    why = f"{type(exc).__name__}: {exc}"
            if why:
                misses.append(why)
        good = args.runs - len(misses)
        failed += bool(misses)
        note = f"; first miss: {misses[0]}" if misses else ""
        print(f"{case.name:<14} {case.what:<44} {case.code!s:>9}  {good} of {args.runs}{note}")
    print("PASS" if failed == 0 else f"FAIL: {failed} class(es) did not end as documented")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
