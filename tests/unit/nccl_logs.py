"""Hand-made nccl-tests logs in both column layouts, written the way nccl-tests prints.

Values come from a known model so tests can check the import against them; nothing
here is copied from a real log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

NEW_HEADER = "\n".join(
    [
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
        "#       size         count      type   redop    root"
        "     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                              "
        " (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ]
)

OLD_HEADER = "\n".join(
    [
        "#" + " " * 45 + "out-of-place" + " " * 23 + "in-place",
        "#       size         count    type     time   algbw   busbw  error"
        "     time   algbw   busbw  error",
        "#        (B)    (elements)             (us)  (GB/s)  (GB/s)"
        "            (us)  (GB/s)  (GB/s)",
    ]
)


def rank_lines(
    world_size: int,
    hosts: Sequence[str],
    device: str,
    group: bool = True,
    bus: Callable[[int], str] = lambda rank: f"0x{rank:02x}",
) -> str:
    """``bus``: the bracketed PCI address of each rank's GPU, as nccl-tests before 2.14.1
    (``0x1b``, the bus alone) or since (``0000:1b:00``, domain:bus:device) prints it."""
    per_host = world_size // len(hosts)
    lines = ["# Using devices"]
    for rank in range(world_size):
        host = hosts[rank // per_host]
        grp = "Group  0 " if group else ""
        lines.append(
            f"#  Rank {rank:2d} {grp}Pid {4000 + rank:6d} on {host:>10} device "
            f"{rank % per_host:2d} [{bus(rank)}] {device}"
        )
    return "\n".join(lines)


def time_text(time_us: float) -> str:
    # nccl-tests' precision rule: fewer decimals as the number grows.
    if time_us >= 10000:
        return f"{time_us:.0f}"
    if time_us >= 100:
        return f"{time_us:.1f}"
    return f"{time_us:.2f}"


def new_row(
    size: int,
    count: int,
    dtype: str,
    redop: str,
    root: int,
    times: tuple[float, float],
    factor: float,
    wrong: tuple[str, str] = ("0", "0"),
) -> str:
    cells = f"{size:12d}  {count:12d}  {dtype:>8}  {redop:>6}  {root:6d}"
    for time_us, wrong_text in zip(times, wrong, strict=True):
        algbw = size / time_us / 1e3
        cells += f"  {time_text(time_us):>7}  {algbw:6.2f}  {algbw * factor:6.2f}  {wrong_text:>5}"
    return cells


def old_row(
    size: int, count: int, dtype: str, times: tuple[float, float], errors: tuple[str, str]
) -> str:
    # No redop/root columns; bandwidths use today's all_gather definitions at n = 3.
    cells = f"{size:12d}  {count:12d}  {dtype:>6}"
    for time_us, error in zip(times, errors, strict=True):
        algbw = size / time_us / 1e3
        cells += f"  {time_text(time_us):>7}  {algbw:6.2f}  {algbw * 2 / 3:6.2f}  {error}"
    return cells


def model_time_us(size: int) -> float:
    """A latency-bandwidth curve: 20 us + size at 12 GB/s."""
    return 20.0 + size / 12e3


def new_all_reduce_log(
    world_size: int = 4,
    prefix: str = "",
    hosts: Sequence[str] = ("node-a", "node-b"),
    bus: Callable[[int], str] = lambda rank: f"0x{rank:02x}",
) -> str:
    """nccl-tests 2.x all_reduce_perf -b 1K -e 1M -f 4 on two hosts, NCCL INFO noise inside."""
    factor = 2 * (world_size - 1) / world_size
    rows = []
    for exponent in range(10, 21, 2):
        size = 1 << exponent
        t = model_time_us(size)
        rows.append(new_row(size, size // 4, "float", "sum", -1, (t, t * 0.98), factor))
    body = "\n".join(
        [
            "# nThread 1 nGpus 1 minBytes 1024 maxBytes 1048576 step: 4(factor) warmup iters: 5 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0",
            "#",
            rank_lines(world_size, hosts, "NVIDIA H100 80GB HBM3", bus=bus),
            "#",
            NEW_HEADER.splitlines()[0],
            "node-a:123:456 [0] NCCL INFO comm 0x1 rank 0 nranks 4 - Init COMPLETE",
            *NEW_HEADER.splitlines()[1:],
            *rows,
            "# Out of bounds values : 0 OK",
            "# Avg bus bandwidth    : 1.234 ",
            "#",
        ]
    )
    return "\n".join(prefix.format(i=i) + line for i, line in enumerate(body.splitlines())) + "\n"


def old_all_gather_log() -> str:
    """Old nccl-tests all_gather_perf (error column, no redop/root), 3 ranks, one bad size."""
    rows = []
    for size, error in ((48, "0e+00"), (1536, "0e+00"), (49152, "0e+00"), (1572864, "1e+00")):
        t = model_time_us(size)
        rows.append(old_row(size, size // 4 // 3, "float", (t, t * 1.01), (error, error)))
    return "\n".join(
        [
            "Running: ./build/all_gather_perf -b 48 -e 1536K -f 32 -g 3",
            "# nThread 1 nGpus 3 minBytes 48 maxBytes 1572864 step: 32(factor) warmup iters: 5 "
            "iters: 20 validation: 1",
            "#",
            rank_lines(3, ["box"], "Tesla V100-SXM2-16GB", group=False),
            "#",
            OLD_HEADER,
            *rows,
            "# Out of bounds values : 2 FAILED",
            "# Avg bus bandwidth    : 4.2",
            "",
        ]
    )
