"""How fast colbench reads nccl-tests logs and fits alpha-beta models.

Run: python benchmarks/import_and_fit.py [--lines N]

The log is generated here (nccl-tests' new layout with NCCL INFO noise and mpirun
--tag-output prefixes, as large multi-node logs look), so the numbers do not depend on
any third-party file.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from colbench.commands.fit.model import fit_time
from colbench.importers.nccl_tests import parse_log

HEADER = (
    "#       size         count      type   redop    root"
    "     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
)


def make_log(table_lines: int, world_size: int = 16, info_per_row: int = 10) -> str:
    out = ["# Using devices"]
    out += [
        f"#  Rank {r:2d} Group  0 Pid {100 + r:6d} on node{r // 8} device {r % 8:2d} "
        "[0x00] NVIDIA H100 80GB HBM3"
        for r in range(world_size)
    ]
    out += ["#", HEADER]
    factor = 2 * (world_size - 1) / world_size
    for i in range(table_lines):
        size = 8 << (i % 30)
        t = 20.0 + size / 200e3
        algbw = size / t / 1e3
        cells = f"{size:12d}  {size // 4:12d}  {'float':>8}  {'sum':>6}  {-1:6d}"
        cells += f"  {t:7.2f}  {algbw:6.2f}  {algbw * factor:6.2f}  {0:5d}" * 2
        out.append(cells)
        out += [
            f"node0:1:2 [{k}] NCCL INFO Channel {k:02d} : 0[0] -> 1[1] via P2P"
            for k in range(info_per_row)
        ]
    return "\n".join(f"[1,{i % world_size}]<stdout>:{line}" for i, line in enumerate(out)) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=3000, help="table lines in the log")
    args = parser.parse_args()
    text = make_log(args.lines)
    started = time.perf_counter()
    imported = parse_log(text, source="all_reduce_perf.log")
    elapsed = time.perf_counter() - started
    total_lines = text.count("\n")
    print(
        f"import: {total_lines} log lines ({args.lines} table lines, {len(imported.rows)} rows) "
        f"in {elapsed * 1e3:.0f} ms = {total_lines / elapsed / 1e3:.0f}k lines/s"
    )
    rng = np.random.default_rng(0)
    sizes = 2.0 ** np.arange(3, 34)
    times = (20 + sizes / 200e3) * np.exp(rng.normal(0, 0.03, len(sizes)))
    repeats = 200
    started = time.perf_counter()
    for _ in range(repeats):
        fit_time(sizes, times)
    elapsed = time.perf_counter() - started
    print(f"fit: {len(sizes)} sizes in {elapsed / repeats * 1e3:.2f} ms per fit")


if __name__ == "__main__":
    main()
