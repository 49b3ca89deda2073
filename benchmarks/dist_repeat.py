"""Which dist tests fail on their own? Run them N times and count failures per test.

A test that times real ranks on an unshaped loopback and asserts what noise can break
fails now and then, whatever the code does: a flaky test is a defect (issue 21). This
runs the chosen tests RUNS times the way ``make test`` does (the ``serial`` ones alone,
then the rest over --workers pytest-xdist workers, a file per worker at a time), reads
each run's JUnit XML, and prints every test that failed at least once with its count and
the first line of each distinct failure, then PASS (no test failed in any run) or FAIL.
It is not part of ``make test``: it takes RUNS times as long as the tests themselves.

    .venv/bin/python benchmarks/dist_repeat.py --runs 10
    .venv/bin/python benchmarks/dist_repeat.py --runs 10 tests/dist/test_predict_cli.py

Heavy: run it under the machine's lock (flock /tmp/colbench-heavy.lock ...).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("tests", nargs="*", default=["tests/dist"], help="pytest paths or ids")
    parser.add_argument("--runs", type=int, default=10, help="times to run the tests")
    parser.add_argument("--workers", type=int, default=2, help="xdist workers (0: one process)")
    parser.add_argument("-k", dest="keyword", default="", help="pytest -k expression")
    return parser.parse_args(argv)


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
    found = {}
    for case in ET.parse(xml_file).iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome, why = "passed", ""
        for kind in ("failure", "error", "skipped"):
            node = case.find(kind)
            if node is not None:
                outcome = "skipped" if kind == "skipped" else "failed"
                why = (node.get("message") or node.text or "").strip().splitlines()[:1]
                why = why[0][:160] if why else ""
                break
        # A setup error and the test's own failure are one failed test.
        if found.get(test, ("passed", ""))[0] != "failed":
            found[test] = (outcome, why)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    failures: Counter[str] = Counter()
    reasons: dict[str, Counter[str]] = defaultdict(Counter)
    seen: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="dist-repeat-") as tmp:
        for run in range(args.runs):
            junit = Path(tmp) / f"run{run}"
            started = time.monotonic()
            codes = []
            for command in pytest_runs(args, junit):
                proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
                codes.append(proc.returncode)
            result: dict[str, tuple[str, str]] = {}
            for part in ("serial", "rest"):
                result.update(outcomes(Path(f"{junit}.{part}.xml")))
            failed = sorted(t for t, (o, _) in result.items() if o == "failed")
            for test, (outcome, why) in result.items():
                if outcome == "skipped":
                    continue
                seen[test] += 1
                if outcome == "failed":
                    failures[test] += 1
                    reasons[test][why] += 1
            took = time.monotonic() - started
            print(
                f"run {run + 1}/{args.runs}: {len(result)} tests, {len(failed)} failed, "
                f"{took:.0f} s, pytest exit {codes}" + "".join(f"\n  FAILED {t}" for t in failed),
                flush=True,
            )
    print(f"\n{len(seen)} tests run, {args.runs} runs; failures per test:")
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
    sys.exit(main())
