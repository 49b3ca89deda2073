"""Rooms on the main job's way: the colbench modules each process of a small sweep works in.

Runs `colbench sweep --backend gloo --nprocs 2 --op all_reduce --sizes 1K` as a user would,
with a profile hook in every process (benchmarks/rooms_hook/sitecustomize.py, put on
PYTHONPATH): each process lists the colbench modules whose functions it calls (code run by
an import excluded). Prints how many the parent, rank 0 and rank 1 enter; with --list,
which.

Target (issue #35): parent <= 30, each rank <= 20 (at c2fc7e0: 86 / 43 / 33; at the start
of the branch that added this script, by this hook: 80 / 50 / 37).

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
    """The modules the parent and each rank entered, by role, in the order entered."""
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
            found[role] = [line for line in lines if line.startswith("colbench")]
        return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print each process's modules")
    args = parser.parse_args()
    found = rooms()
    print(f"{'process':<10}{'modules':>8}{'target':>8}  verdict")
    status = 0
    for role, target in TARGETS.items():
        count = len(found.get(role, []))
        verdict = "PASS" if role in found and count <= target else "FAIL"
        status = status or int(verdict == "FAIL")
        print(f"{role:<10}{count:>8}{target:>8}  {verdict}")
    if args.list:
        for role, modules in sorted(found.items()):
            print(f"\n{role}:", *modules, sep="\n  ")
    return status


if __name__ == "__main__":
    sys.exit(main())
