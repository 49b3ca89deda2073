"""nccl-tests' command line as nccl-tests 2.19.6 declares it, the facts colbench's flags answer to.

A user swaps nccl-tests' program for ``colbench sweep``; each flag must then mean what it
meant, or be refused with the reason. Here: every option of nccl-tests' getopt table
(``src/common.cu``) in its order, with its meaning and default there, and the flags sweep
refuses (:data:`REFUSED`); sweep's options name the flag they take (``nccl_tests="-w"``).
A unit test checks every flag is answered once; docs/nccl-tests.md's table is made of both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The nccl-tests release whose command line :data:`FLAGS` describes.
VERSION = "2.19.6"


@dataclass(frozen=True)
class NcclTestsFlag:
    """One option of nccl-tests' getopt table."""

    short: str
    long: str
    meaning: str
    """What it does there, in a few words."""
    default: str
    """nccl-tests' default, as its help and README give it."""


FLAGS: tuple[NcclTestsFlag, ...] = tuple(
    NcclTestsFlag(*row)
    for row in (
        ("-t", "--nthreads", "threads per process, each driving -g GPUs", "1"),
        ("-g", "--ngpus", "GPUs driven by each thread", "1"),
        ("-b", "--minbytes", "smallest size (binary suffixes)", "32M"),
        ("-e", "--maxbytes", "largest size (binary suffixes)", "32M"),
        ("-i", "--stepbytes", "bytes added per step, when -f is 1", "1M"),
        ("-f", "--stepfactor", "whole factor per step; 1 steps by -i instead", "1 (off: use -i)"),
        ("-n", "--iters", "timed iterations per size", "20"),
        ("-m", "--agg_iters", "operations aggregated in one NCCL group per iteration", "1"),
        (
            "-w",
            "--warmup_iters",
            "untimed calls at each size of one doubling pass, before any timing",
            "1",
        ),
        ("-N", "--run_cycles", "run the whole size loop this many times; 0 forever", "1"),
        ("-p", "--parallel_init", "0/1: each thread initialises NCCL itself", "0"),
        ("-c", "--check", "passes of fill, run once, check the result; 0 none", "1"),
        ("-o", "--op", "reduction: sum, prod, min, max, avg, mulsum or all", "sum"),
        (
            "-d",
            "--datatype",
            "element type: int8, uint8, int32, uint32, int64, uint64, half, float, double, "
            "bfloat16, f8e4m3, f8e5m2 or all",
            "float",
        ),
        ("-r", "--root", "root rank of rooted collectives; -1 every rank in turn", "0"),
        ("-z", "--blocking", "0-3: wait (and barrier) after each call or batch", "0"),
        ("-y", "--stream_null", "0/1: run on CUDA's default stream", "0"),
        ("-T", "--timeout", "seconds before a test is declared hung; 0 none", "0 (none)"),
        ("-G", "--cudagraph", "capture the -n calls in a CUDA graph, launch it N times", "0 (off)"),
        ("-C", "--report_cputime", "0/1: report CPU time instead of latency", "0"),
        ("-S", "--report_timestamps", "0/1: a timestamp on each line", "0"),
        ("-J", "--output_file", "write a JSON report to this file", "none"),
        ("-a", "--average", "combine ranks' times: 0 rank 0, 1 average, 2 min, 3 max", "1"),
        ("-R", "--local_register", "0/1/2: register buffers (local, symmetric)", "0"),
        ("-x", "--cta_policy", "0/1/2: NCCL's CTA policy", "unset"),
        ("-D", "--device_implementation", "a device-API implementation (needs -R 2)", "0"),
        ("-V", "--device_cta_count", "CTAs of the device-API implementation", "16"),
        ("-M", "--memory", "0/1: report device memory use", "0"),
        ("-u", "--unalign", "misalign the buffers by this many elements", "0"),
        ("-I", "--per_iter_timing", "0/1: time every iteration (CUDA events)", "0"),
        ("-K", "--per_iter_skip", "leading iterations left out of -I's summary", "0"),
        ("-h", "--help", "print the usage", ""),
    )
)

BY_SHORT: dict[str, NcclTestsFlag] = {f.short: f for f in FLAGS}


@dataclass(frozen=True)
class Refusal:
    """An nccl-tests flag colbench does not take, and why (declared in :data:`REFUSED`)."""

    short: str
    """The flag as :data:`FLAGS` names it; its long form is refused alike."""
    reason: str
    """Why, and what to use instead: the one line a user who gave it reads."""
    same: tuple[str, ...] = ()
    """Values that ask for what colbench does anyway (``-g 1``: one GPU per rank): taken
    without a word, so a pasted nccl-tests line that sets them runs."""

    flag: NcclTestsFlag = field(init=False, repr=False)
    """The flag in nccl-tests' table."""
    name: str = field(init=False)
    """The parameter name its CLI option is parsed into (hidden from ``--help``)."""

    def __post_init__(self) -> None:
        # Looked up once, as the table is declared: a flag nccl-tests lacks fails on import,
        # and a command line is parsed without a call into this table.
        flag = BY_SHORT[self.short]
        object.__setattr__(self, "flag", flag)
        object.__setattr__(self, "name", "nccl_tests_" + flag.long.removeprefix("--"))

    def message(self, value: str) -> str:
        """The usage error for ``value``, or "" when the value asks for colbench's own way."""
        if value.strip() in self.same:
            return ""
        return f"nccl-tests' {self.short}/{self.flag.long} {value} is not taken here: {self.reason}"


#: nccl-tests' flags that ``sweep`` does not take, each with why and what to use; the rest
#: are options of its table (their ``nccl_tests``). docs/nccl-tests.md's table is made of both.
REFUSED: tuple[Refusal, ...] = (
    Refusal("-t", "one rank per process here, one GPU each; use --nprocs", same=("1",)),
    Refusal("-g", "one rank per GPU here; use --nprocs", same=("1",)),
    Refusal(
        "-m",
        "torch.distributed issues one collective per call, with no NCCL group to aggregate "
        "calls in",
        same=("1",),
    ),
    Refusal(
        "-z",
        "colbench times a batch of -n calls and waits once, at its end (nccl-tests' -z 0)",
        same=("0",),
    ),
    Refusal("-y", "torch runs each collective on its process group's own stream", same=("0",)),
    Refusal(
        "-C",
        "colbench reports device time (and, on NCCL, the enqueue time of a call in enqueue_us)",
        same=("0",),
    ),
    Refusal("-S", "rows carry no clock time; meta.json records when the run started", same=("0",)),
    Refusal("-D", "NCCL's device API is not reachable through torch.distributed", same=("0",)),
    Refusal(
        "-V", "NCCL's device API (-D) is not reachable through torch.distributed", same=("16",)
    ),
    Refusal(
        "-M",
        "colbench reports no device memory use; --memory-check and --memory-limit guard allocation",
        same=("0",),
    ),
    Refusal("-u", "torch allocates aligned buffers; misaligned ones are not offered", same=("0",)),
    Refusal(
        "-K",
        "-I's summary here counts every timed iteration (per_iter_skip 0); more warm-up "
        "(-w) leaves the leading calls out of it",
        same=("0",),
    ),
)
