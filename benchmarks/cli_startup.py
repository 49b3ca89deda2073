"""CLI start-up: help, explain, version and a usage error, none of which imports torch.

Runs each command as a user would (`python -m colbench ...`, a fresh interpreter every
time) and reports the median wall time, and the median CPU time (user + system), a
figure a busy machine inflates less. For comparison it times `import torch` alone:
what these commands paid before they stopped importing it.

Targets, median of 5 runs: `colbench --help` <= 0.1 s (issue #35: it builds no command's
parameters and imports none of numpy, pandas, matplotlib, torch); the others <= 0.3 s
(issue #14). Running any command costs more than listing them: Typer converts parameters
through pydantic, which it imports when it builds one (about 0.05 s here).

    python benchmarks/cli_startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 0.1
#: A command's own start-up, Typer's pydantic included.
COMMAND_TARGET_S = 0.3
REPO = Path(__file__).resolve().parent.parent

#: (label, arguments, the exit code that shows the command did its job, target seconds)
COMMANDS = (
    ("colbench --help", ["--help"], 0, TARGET_S),
    ("colbench explain all_reduce", ["explain", "all_reduce"], 0, COMMAND_TARGET_S),
    ("colbench version", ["version"], 0, COMMAND_TARGET_S),
    ("colbench sweep --op bogus (usage error)", ["sweep", "--op", "bogus"], 2, COMMAND_TARGET_S),
)


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_s(argv: list[str], expected_code: int) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``argv``, checked to have done its job."""
    cpu_before, start = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, check=False)
    wall = time.perf_counter() - start
    if done.returncode != expected_code:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return wall, _children_cpu_s() - cpu_before


def medians(argv: list[str], expected_code: int, repeats: int) -> tuple[float, float]:
    runs = [timed_s(argv, expected_code) for _ in range(repeats)]
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'figure':<44}{'median s':>10}{'cpu s':>8}{'target':>8}  verdict")
    status = 0
    for label, cli_args, code, target in COMMANDS:
        wall, cpu = medians([sys.executable, "-m", "colbench", *cli_args], code, args.repeats)
        verdict = "PASS" if wall <= target else "FAIL"
        status = status or int(wall > target)
        print(f"{label:<44}{wall:>10.3f}{cpu:>8.3f}{target:>8.1f}  {verdict}")
    wall, cpu = medians([sys.executable, "-c", "import torch"], 0, args.repeats)
    label = 'python -c "import torch"'
    print(f"{label:<44}{wall:>10.2f}{cpu:>8.2f}{'':>8}  (reference)")
    return status


if __name__ == "__main__":
    sys.exit(main())
