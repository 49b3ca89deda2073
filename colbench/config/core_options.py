"""The core of ``colbench sweep``'s options, first in its ``--help``: which collectives, at
which sizes, types, reductions and root, in which placement, and how each size is timed,
checked and averaged (nccl-tests' own flags, most of them).

:class:`CoreOptions` is the base of :class:`colbench.config.options.SweepOptions`, whose
fields follow its own, so ``--help``, suites and docs/options.md keep the table's order.
"""

from __future__ import annotations

from dataclasses import dataclass

from colbench.bench import ops
from colbench.bench.ops.data import parse_dtypes, parse_redops
from colbench.config.model import check_passes, parse_average, parse_collectives, parse_placements
from colbench.config.option_table import measure
from colbench.config.sizes import parse_sizes


@dataclass(frozen=True)
class CoreOptions:
    """The head of sweep's options table (:class:`colbench.config.options.SweepOptions`)."""

    op: str = measure(
        "all_reduce",
        "--op",
        help="Collectives, comma list or 'all': "
        + ", ".join(ops.BY_NAME)
        + ". Unlike nccl-tests' --op (the reduction, -o/--redop here), --op names the "
        "collective.",
        yaml="list",
        parse=parse_collectives,
    )
    sizes: str | None = measure(
        None,
        "--sizes",
        "-s",
        help="Range 1K-1G (doubling) or list 1K,4K,1M (binary units). Default 1K-16M "
        "(nccl-tests' is 32M only).",
        yaml="list",
        parse=parse_sizes,
        to=None,
    )
    minbytes: str | None = measure(
        None,
        "--minbytes",
        "-b",
        help="Smallest size (binary units), as nccl-tests' -b: with no -f, sizes step by -i "
        "(1M), as there; without -e, up to nccl-tests' 32M.",
        nccl_tests="-b",
        yaml="size",
        to=None,
    )
    maxbytes: str | None = measure(
        None,
        "--maxbytes",
        "-e",
        help="Largest size (binary units), as nccl-tests' -e; without -b, from nccl-tests' 32M.",
        nccl_tests="-e",
        yaml="size",
        to=None,
    )
    factor: int | None = measure(
        None,
        "--factor",
        "--stepfactor",
        "-f",
        help="Multiply the size by this whole number per step; 1 steps by -i instead (as "
        "nccl-tests). Default 2 with --sizes MIN-MAX, 1 with -b/-e (nccl-tests' default).",
        nccl_tests="-f",
        to=None,
    )
    step: str | None = measure(
        None,
        "--step",
        "--stepbytes",
        "-i",
        help="Add this many bytes per step instead (default 1M where -f is 1; with -f above 1 "
        "the factor wins, as in nccl-tests).",
        nccl_tests="-i",
        yaml="size",
        to=None,
    )
    dtype: str = measure(
        "float32",
        "--dtype",
        "--datatype",
        "-d",
        help="Element types, comma list or 'all': float32, float16, bfloat16, float64, "
        "int8, uint8, int32, int64 (nccl-tests' float, half, double work too; its uint32, "
        "uint64, f8e4m3, f8e5m2 are not here, nor in 'all').",
        nccl_tests="-d",
        yaml="list",
        parse=parse_dtypes,
    )
    redop: str = measure(
        "sum",
        "--redop",
        "-o",
        help="Reduction ops, comma list or 'all': sum, prod, min, max, avg (float only); "
        "nccl-tests' --op, whose mulsum is not here.",
        nccl_tests="-o",
        yaml="list",
        parse=parse_redops,
    )
    root: int = measure(
        0,
        "--root",
        "-r",
        help="Root rank of broadcast, reduce, gather, scatter; -1 every rank in turn (as "
        "nccl-tests).",
        nccl_tests="-r",
    )
    placement: str = measure(
        "out,in",
        "--placement",
        help="out (separate buffers), in (in-place form) or out,in.",
        yaml="list",
        parse=parse_placements,
        to="placements",
        convert=parse_placements,
    )
    iters: int = measure(20, "--iters", "-n", help="Timed calls per size.", nccl_tests="-n")
    repeat: int = measure(
        1,
        "--repeat",
        "--run_cycles",
        "-N",
        help="Measure the whole sweep this many times, interleaved (every size once, then "
        "again); every sample is a CSV row with its repeat index (for colbench gate). "
        "nccl-tests' -N; its 0 (forever) is refused.",
        nccl_tests="-N",
    )
    init_only: bool = measure(
        False,
        "--init-only",
        help="Measure communicator set-up only (PARAM's --init-only): each repeat makes a "
        "fresh communicator of every rank (torch: a new group and its first call, where "
        "torch starts NCCL lazily; --engine nccl: NCCL's unique-id bootstrap and "
        "ncclCommInitRank), timed, with the device memory it took; rows in init.csv, no "
        "collective rows. Variants run one after the other.",
    )
    warmup: int = measure(
        5,
        "--warmup",
        "--warmup_iters",
        "-w",
        help="Untimed calls at each size, just before it is timed (nccl-tests makes its -w "
        "calls in one doubling pass over the sizes first). Default 5; nccl-tests' is 1.",
        nccl_tests="-w",
    )
    check: int = measure(
        1,
        "--check",
        "-c",
        help="Passes of fill, run once, verify after each size's timing (as nccl-tests): "
        "1 (default), 0 none.",
        nccl_tests="-c",
        yaml="check",
        convert=check_passes,
    )
    average: str = measure(
        "avg",
        "--average",
        "-a",
        help="Combine ranks' times: avg, min, max, rank0 (or nccl-tests 1, 2, 3, 0).",
        nccl_tests="-a",
        yaml="list",
        parse=parse_average,
        convert=parse_average,
    )
