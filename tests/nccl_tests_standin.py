"""A stand-in for an nccl-tests program, for machines without GPUs.

:func:`write` makes an executable ``<op>_perf`` that records the arguments it was given
(JSON) and prints a real nccl-tests log (one of tests/data/nccl-tests-logs) cut down to
what it was asked for: the sizes its -b/-e/-f/-i name, the -g ranks' ``Rank`` lines, its
-n/-w/-c/-G in the parameter line, its -r in the root column, and algbw/busbw recomputed
from the real time for -g ranks (busbw with the op's factor, as nccl-tests prints it). The
times are the real log's, untouched.
"""

from __future__ import annotations

import sys
from pathlib import Path

from colbench.bench import ops
from tests.datadir import NCCL_TESTS_LOGS

_PROGRAM = r"""#!{python}
import getopt, json, sys

REAL_LOG, RECORD, FACTORS = {real_log!r}, {record!r}, {factors!r}
with open(RECORD, "w") as record:
    json.dump(sys.argv[1:], record)
opts = dict(getopt.getopt(sys.argv[1:], "b:e:f:i:g:d:o:r:n:w:c:a:G:")[0])
ranks = int(opts.get("-g", "1"))
size, sizes = int(opts["-b"]), []
while size <= int(opts["-e"]):
    sizes.append(size)
    # nccl-tests' defaults: factor 1 (so none), step 1 MiB.
    size = size * int(opts["-f"]) if "-f" in opts else size + int(opts.get("-i", 1 << 20))
step = opts["-f"] + "(factor)" if "-f" in opts else opts.get("-i", "1048576") + "(bytes)"
params = (
    f"# nThread 1 nGpus {{ranks}} minBytes {{sizes[0]}} maxBytes {{sizes[-1]}} step: {{step}} "
    f"warmup iters: {{opts['-w']}} iters: {{opts['-n']}} agg iters: 1 "
    f"validation: {{opts['-c']}} graph: {{opts.get('-G', '0')}}"
)
columns, rank_lines, printed = None, 0, set()
for line in open(REAL_LOG).read().splitlines():
    tokens = line.lstrip("#").split()
    if line.startswith("# nThread"):
        print(params)
    elif line.startswith("#") and tokens[:1] == ["Rank"]:
        rank_lines += 1
        if rank_lines <= ranks:
            print(line)
    elif line.startswith("#") and tokens[:3] == ["size", "count", "type"]:
        columns = tokens
        print(line)
    elif columns and not line.startswith("#") and len(tokens) == len(columns):
        if int(tokens[0]) not in sizes:
            continue
        if "root" in columns and tokens[columns.index("root")] != "-1":
            tokens[columns.index("root")] = opts.get("-r", "0")
        for at in [i for i, name in enumerate(columns) if name == "time"]:
            algbw = int(tokens[0]) / float(tokens[at]) / 1e3
            tokens[at + 1] = f"{{algbw:.2f}}"
            tokens[at + 2] = f"{{algbw * FACTORS[ranks]:.2f}}"
        printed.add(int(tokens[0]))
        print("  ".join(f"{{t:>8}}" for t in tokens))
    else:
        print(line)
if printed != set(sizes):
    sys.exit(f"stand-in: {{REAL_LOG}} has no rows for {{sorted(set(sizes) - printed)}}")
"""


def write(directory: Path, op: str, real_log: str, record: Path, name: str | None = None) -> Path:
    """An executable stand-in for ``op``'s nccl-tests program in ``directory``."""
    coll = ops.get(op)
    program = directory / (name or coll.nccl_tests_binary)
    factors = {n: coll.busbw_factor(n) for n in range(1, 17)}
    program.write_text(
        _PROGRAM.format(
            python=sys.executable,
            real_log=str(NCCL_TESTS_LOGS / real_log),
            record=str(record),
            factors=factors,
        )
    )
    program.chmod(0o755)
    return program


def real_rows(real_log: str) -> dict[int, list[str]]:
    """The real log's table rows by size, as printed (to check the join against)."""
    rows: dict[int, list[str]] = {}
    columns: list[str] = []
    for line in (NCCL_TESTS_LOGS / real_log).read_text().splitlines():
        tokens = line.lstrip("#").split()
        if line.startswith("#") and tokens[:3] == ["size", "count", "type"]:
            columns = tokens
        elif columns and not line.startswith("#") and len(tokens) == len(columns):
            rows[int(tokens[0])] = tokens
    return rows
