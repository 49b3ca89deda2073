"""Start-up: from the command to the first measured row, at 2 ranks on gloo.

Starts `python -m colbench sweep` as a user would and watches results.csv for its first
data row. For comparison it also times the bare floor: a script that spawns 2 ranks
with torch.multiprocessing (spawn), joins a gloo group and runs one all_reduce.

Target (issue #6): <= 3 s to the first row.

    python benchmarks/startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

TARGET_S = 3.0

_BARE_SPAWN = textwrap.dedent(
    """
    import datetime, sys, time
    import torch, torch.distributed as dist, torch.multiprocessing as mp

    def rank(r, port):
        store = dist.TCPStore("127.0.0.1", port, 2, is_master=r == 0,
                              timeout=datetime.timedelta(seconds=60))
        dist.init_process_group("gloo", store=store, rank=r, world_size=2)
        dist.all_reduce(torch.ones(256))
        if r == 0:
            print(time.time(), flush=True)

    if __name__ == "__main__":
        import socket
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        mp.start_processes(rank, args=(port,), nprocs=2, start_method="spawn")
    """
)


def first_row_s() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        csv = out / "results.csv"
        start = time.time()
        proc = subprocess.Popen(
            [sys.executable, "-m", "colbench", "sweep", "--sizes", "1K", "-n", "5", "-w", "1",
             "--no-table", "--out", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            while True:
                if csv.exists() and csv.read_text().count("\n") >= 2:
                    return time.time() - start
                if proc.poll() is not None:
                    raise RuntimeError("colbench exited before writing a row")
                time.sleep(0.01)
        finally:
            proc.wait()


def bare_spawn_s() -> float:
    start = time.time()
    # spawn re-imports the main module, so the script must be a file, not -c.
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "bare_spawn.py"
        script.write_text(_BARE_SPAWN)
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, check=True
        )
    return float(done.stdout.split()[0]) - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    colbench, bare = [], []
    for _ in range(args.repeats):
        colbench.append(first_row_s())
        bare.append(bare_spawn_s())
    med, floor = statistics.median(colbench), statistics.median(bare)
    verdict = "PASS" if med <= TARGET_S else "FAIL"
    print(f"{'figure':<44}{'median s':>10}{'target':>8}  verdict")
    label = "command -> first row (colbench, 2 ranks)"
    print(f"{label:<44}{med:>10.2f}{TARGET_S:>8.1f}  {verdict}")
    print(f"{'bare spawn + gloo init + 1 all_reduce':<44}{floor:>10.2f}{'':>8}  (reference)")
    return 0 if med <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
