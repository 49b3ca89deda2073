"""Which dist tests fail on their own? Run them N times and count failures per test.

A test that times real ranks on an unshaped loopback and asserts what noise can break
fails now and then, whatever the code does: a flaky test is a defect (issue 21). This
runs the chosen tests RUNS times the way ``make test`` does (the ``serial`` ones alone,
then the rest over --workers pytest-xdist workers, a file per worker at a time), reads
each run's JUnit XML, and prints every test that failed at least once with its count and
the first line of each distinct failure, then PASS (no test failed in any run) or FAIL.
It is not part of ``make test``: it takes RUNS times as long as the tests themselves.

``--busy N`` starts N one-core busy loops beside the tests for the whole of every run,
as another job on a shared runner or laptop would (issue 33: a shaped link read 9%
faster than its baseline when the CPU, not the link, set the time). They are killed
after the runs, also on Ctrl-C or SIGTERM, and die with this process if it is killed.

    .venv/bin/python benchmarks/dist_repeat.py --runs 10
    .venv/bin/python benchmarks/dist_repeat.py --runs 10 tests/dist/test_predict_cli.py
    .venv/bin/python benchmarks/dist_repeat.py --busy 1 --runs 10 tests/dist/test_gate_throttle.py

Heavy: run it under the machine's lock (flock /tmp/colbench-heavy.lock ...).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

REPO = Path(__file__).resolve().parent.parent


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("tests", nargs="*", default=["tests/dist"], help="pytest paths or ids")
    parser.add_argument("--runs", type=int, default=10, help="times to run the tests")
    parser.add_argument("--workers", type=int, default=2, help="xdist workers (0: one process)")
    parser.add_argument("-k", dest="keyword", default="", help="pytest -k expression")
    parser.add_argument("--busy", type=int, default=0, help="one-core busy loops beside the tests")
    return parser.parse_args(argv)


#: PR_SET_PDEATHSIG (linux/prctl.h): the kernel signals the child when its parent dies.
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # A busy loop must not outlive a SIGKILLed benchmark: nothing would be left to kill it.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _terminated(signum: int, frame: FrameType | None) -> None:
    # SIGTERM as Ctrl-C: unwinds through busy_loops' finally, which kills the loops.
    raise KeyboardInterrupt


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` processes each spinning one core (``while True: pass``), killed on exit."""
    previous = signal.signal(signal.SIGTERM, _terminated)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", "while True: pass"], preexec_fn=_die_with_parent
                )
            )
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        signal.signal(signal.SIGTERM, previous)


def pytest_runs(args: argparse.Namespace, junit: Path) -> list[list[str]]:
    """The pytest command lines of one run, as ``make test`` splits them."""
    base = [sys.executable, "-m", "pytest", *args.tests, "-q", "-p", "no:cacheprovider"]
    if args.keyword:
        base += ["-k", args.keyword]
    serial = [*base, "-m", "serial", "-p", "no:xdist", f"--junitxml={junit}.serial.xml"]
    rest = [*base, "-m", "not serial", f"--junitxml={junit}.rest.xml"]
    if args.workers > 0:
        rest += ["-n", str(args.workers), "--dist", "loadfile"]
    return [serial, rest]


def outcomes(xml_file: Path) -> dict[str, tuple[str, str]]:
    """Test id -> (outcome, first line of the failure) from one JUnit XML file."""
    if not xml_file.exists():
        return {}
    found: dict[str, tuple[str, str]] = {}
    for case in ET.parse(xml_file).iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome, why = "passed", ""
        for kind in ("failure", "error", "skipped"):
            node = case.find(kind)
            if node is not None:
                outcome = "skipped" if kind == "skipped" else "failed"
                lines = (node.get("message") or node.text or "").strip().splitlines()
                why = lines[0][:160] if lines else ""
                break
        # A setup error and the test's own failure are one failed test.
        if found.get(test, ("passed", ""))[0] != "failed":
            found[test] = (outcome, why)
    return found


def one_run(args: argparse.Namespace, junit: Path) -> tuple[dict[str, tuple[str, str]], list[int]]:
    """Run the tests once as ``make test`` does: test id -> outcome, and pytest's exit codes."""
    codes = []
    for command in pytest_runs(args, junit):
        proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        codes.append(proc.returncode)
    result: dict[str, tuple[str, str]] = {}
    for part in ("serial", "rest"):
        result.update(outcomes(Path(f"{junit}.{part}.xml")))
    return result, codes


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    failures: Counter[str] = Counter()
    reasons: dict[str, Counter[str]] = defaultdict(Counter)
    seen: Counter[str] = Counter()
    took_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="dist-repeat-") as tmp, busy_loops(args.busy):
        for run in range(args.runs):
            started = time.monotonic()
            result, codes = one_run(args, Path(tmp) / f"run{run}")
            took_s.append(time.monotonic() - started)
            failed = sorted(t for t, (o, _) in result.items() if o == "failed")
            for test, (outcome, why) in result.items():
                if outcome == "skipped":
                    continue
                seen[test] += 1
                if outcome == "failed":
                    failures[test] += 1
                    reasons[test][why] += 1
            print(
                f"run {run + 1}/{args.runs}: {len(result)} tests, {len(failed)} failed, "
                f"{took_s[-1]:.0f} s, pytest exit {codes}, {args.busy} busy loop(s), "
                f"load average {load_average():.1f}" + "".join(f"\n  FAILED {t}" for t in failed),
                flush=True,
            )
    print(f"\n{len(seen)} tests run, {args.runs} runs beside {args.busy} busy loop(s), "
          f"{min(took_s):.0f}-{max(took_s):.0f} s a run; failures per test:")  # fmt: skip
    for test, count in failures.most_common():
        print(f"  {count}/{seen[test]}  {test}")
        for why, times in reasons[test].most_common(3):
            print(f"        {times}x {why}")
    if not failures:
        print("  none")
    verdict = "PASS" if not failures else "FAIL"
    print(f"{verdict}: {len(failures)} test(s) failed in at least one of {args.runs} runs")
    return 0 if not failures else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("dist_repeat: interrupted; busy loops stopped", file=sys.stderr)
        sys.exit(130)
