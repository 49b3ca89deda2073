"""Rooms on the main job's way: the colbench modules each process of a small sweep works in.

Runs `colbench sweep --backend gloo --nprocs 2 --op all_reduce --sizes 1K` as a user would,
with a profile hook in every process (benchmarks/rooms_hook/sitecustomize.py, put on
PYTHONPATH): each process lists the colbench modules whose functions it calls. Prints how
many the parent, rank 0 and rank 1 work in (calls made by imports excluded: dataclasses'
generated methods, tables built at import), and beside it how many they enter at all, those
calls included; with --list, which.

Target (issue #35): parent <= 30, each rank <= 20. By this hook, at main 4f9e018: parent 43
(85 entered, import-time calls included), rank 0 52, rank 1 38; with the lazy CLI: 44 (75),
51, 37; with the host, config and rank side folded (host/world.py, host/child.py, the
sweep command one module, bench/timing.py, nothing called that a gloo sweep does not
need): 30 (69), 37, 21; with the other ranks doing no hardware work (only a node's first
rank reads its facts, only rank 0 works out the ceiling its rows carry) and the GPUs' NVML
links read in hardware/links.py: 30 (69), 36, 20; with --ranks-per-gpu's emulation in
host/launchers/gpus.py and the file writing in results/tables.py: 30 (69), 34, 20; with
host/job.py holding a rank's in-flight record, host/supervise.py a run's end, and
host/launchers/env.py the host's limits: 29 (67), 32, 18; with meta.json's gathering in
results/rundir.py: 29 (66), 31, 18; with the element types in bench/ops/data.py: 28
(65), 30, 17 (tests/dist/test_job_rooms.py holds those).
The issue's own hook read 86 / 43 / 33 at c2fc7e0.

    python benchmarks/job_rooms.py [--list]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOOK = Path(__file__).resolve().parent / "rooms_hook"
SWEEP = ("sweep", "--backend", "gloo", "--nprocs", "2", "--op", "all_reduce", "--sizes", "1K")
TARGETS = {"parent": 30, "rank 0": 20, "rank 1": 20}


def rooms(timeout_s: float = 300) -> dict[str, list[str]]:
    """The modules the parent and each rank worked in, by role, in the order entered;
    those entered only by imports are named ``import <module>``."""
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "rooms"
        listing.mkdir()
        path = os.pathsep.join(p for p in (str(HOOK), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "COLBENCH_ROOMS": str(listing), "PYTHONPATH": path}
        argv = [sys.executable, "-m", "colbench", *SWEEP, "--out", str(Path(tmp) / "run")]
        done = subprocess.run(
            argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s
        )
        if done.returncode != 0:
            raise RuntimeError(f"the sweep exited {done.returncode}: {done.stderr.strip()}")
        found: dict[str, list[str]] = {}
        for file in listing.glob("*.txt"):
            head, *lines = file.read_text().splitlines()
            ranks = [line.split()[1] for line in lines if line.startswith("rank ")]
            role = f"rank {ranks[0]}" if ranks else "parent"
            if role == "parent" and int(head.split()[3]) != os.getpid():
                continue  # a helper process of the sweep's own, not the command
            worked = {line for line in lines if line.startswith("colbench")}
            found[role] = [
                line
                for line in lines
                if line in worked or (line.startswith("import ") and line[7:] not in worked)
            ]
        return found


def worked_in(lines: list[str]) -> list[str]:
    """The modules a process called into, not only imported."""
    return [line for line in lines if not line.startswith("import ")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print each process's modules")
    args = parser.parse_args()
    found = rooms()
    print(f"{'process':<10}{'modules':>8}{'target':>8}  verdict  {'entered':>8}")
    status = 0
    for role, target in TARGETS.items():
        count = len(worked_in(found.get(role, [])))
        verdict = "PASS" if role in found and count <= target else "FAIL"
        status = status or int(verdict == "FAIL")
        print(f"{role:<10}{count:>8}{target:>8}  {verdict:<7}  {len(found.get(role, [])):>8}")
    if args.list:
        for role, modules in sorted(found.items()):
            print(f"\n{role}:", *modules, sep="\n  ")
    return status


if __name__ == "__main__":
    sys.exit(main())
