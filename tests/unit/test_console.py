"""The nccl-tests style table (colbench.results.reporters.console): golden lines and the sink."""

from __future__ import annotations

import re
from typing import Any

import pytest

from colbench.bench import ops
from colbench.results.reporters.console import (
    HOST_BOUND_NOTE,
    UNITS_NOTE,
    TableSink,
    column_header,
    fit,
    format_line,
    format_time_us,
    run_header,
)

HEADER = [
    "#                                                                     out-of-place"
    "                        in-place",
    "#       size         count      type   redop    root"
    "     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
    "#        (B)    (elements)                              "
    " (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
]


def row(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "op": "all_gather",
        "size_bytes": 1008,
        "count": 84,
        "dtype": "float32",
        "redop": "none",
        "root": -1,
        "in_place": 0,
        "time_us": 12.3456,
        "algbw_gbps": 0.0816,
        "busbw_gbps": 0.0544,
        "wrong": 0,
    }
    base.update(overrides)
    return base


def test_column_header_golden() -> None:
    assert column_header() == HEADER


def test_header_columns_line_up_with_rows() -> None:
    line = format_line([row(), row(in_place=1)])
    assert len(HEADER[1]) == len(line)
    # Every header name ends where its column's values end (all right-aligned).
    names = " " + HEADER[1][1:]  # the leading '#' marks a comment, not a column

    def ends(text: str) -> list[int]:
        return [m.end() for m in re.finditer(r"\S+", text)]

    assert ends(names) == ends(line)
    assert len(ends(line)) == 13


def test_format_line_golden_both_placements() -> None:
    line = format_line([row(), row(in_place=1, time_us=123.45, algbw_gbps=8.1, busbw_gbps=5.4)])
    assert line == (
        "        1008            84     float    none      -1"
        "    12.35    0.08    0.05      0"
        "    123.5    8.10    5.40      0"
    )


def test_format_line_missing_placement_is_na() -> None:
    only_in = row(
        dtype="bfloat16", redop="sum", size_bytes=4096, count=2048, in_place=1, time_us=15000.4
    )
    assert format_line([only_in]) == (
        "        4096          2048  bfloat16     sum      -1"
        "      n/a     n/a     n/a    n/a"
        "    15000    0.08    0.05      0"
    )
    assert format_line([row(root=2, wrong=5)]) == (
        "        1008            84     float    none       2"
        "    12.35    0.08    0.05      5"
        "      n/a     n/a     n/a    n/a"
    )


def test_unchecked_rows_print_na_for_wrong() -> None:
    line = format_line([row(wrong=None), row(in_place=1, wrong=None)])
    assert line.split()[-1] == "n/a"
    assert line.split()[8] == "n/a"


def test_nccl_type_names_in_the_table() -> None:
    for dtype, shown in (("float16", "half"), ("float64", "double"), ("int8", "int8")):
        assert format_line([row(dtype=dtype)]).split()[2] == shown
    assert format_line([row(dtype="none")]).split()[2] == "none"


@pytest.mark.parametrize(
    ("time_us", "text"),
    [
        (0.0, "0.00"),
        (1.234, "1.23"),
        (99.994, "99.99"),
        (100.0, "100.0"),
        (123.45, "123.5"),
        (9999.94, "9999.9"),
        (10000.0, "10000"),
        (123456.7, "123457"),
    ],
)
def test_time_precision_shrinks_as_time_grows(time_us: float, text: str) -> None:
    assert format_time_us(time_us) == text


def test_run_header_states_the_units() -> None:
    lines = run_header(
        ops=["all_reduce"],
        backend="gloo",
        world_size=2,
        nnodes=1,
        device="cpu",
        warmup=5,
        iters=20,
        average="avg",
        check=True,
        seed=0,
        ranks=[(0, "hostA", 123, "cpu"), (1, "hostA", 124, "cpu")],
    )
    assert f"# {UNITS_NOTE}" in lines
    assert "1K = 1024" in UNITS_NOTE and "GB/s" in UNITS_NOTE
    assert all(line.startswith("#") for line in lines)
    assert sum("Rank" in line for line in lines) == 2


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def echo(self, line: str) -> None:
        self.events.append(("echo", line))

    def warn(self, line: str) -> None:
        self.events.append(("warn", line))

    def lines(self) -> list[str]:
        return [v for k, v in self.events if k == "echo"]


def test_table_sink_prints_sections_and_summarises() -> None:
    # That the rows reach results.csv and the progress bar first is the reporters'
    # order (tests/unit/test_reporters.py).
    rec = Recorder()
    sink = TableSink(echo=rec.echo)
    gather = ops.get("all_gather")
    reduce = ops.get("all_reduce")
    ag = [
        [row(busbw_gbps=1.0), row(in_place=1, busbw_gbps=3.0)],
        [row(size_bytes=2016, busbw_gbps=2.0), row(size_bytes=2016, in_place=1, busbw_gbps=2.0)],
    ]
    ar = [[row(op="all_reduce", in_place=1, busbw_gbps=10.0, wrong=2)]]
    for rows in ag:
        sink.rows(gather, rows)
    sink.rows(reduce, ar[0])
    sink.close()

    assert sink.rows_shown == 5
    assert sink.wrong_total == 2
    out = rec.lines()
    # One block header per op, each followed by the column header.
    assert out.count("# all_gather") == 1 and out.count("# all_reduce") == 1
    i = out.index("# all_gather")
    assert out[i + 1 : i + 4] == HEADER
    j = out.index("# all_reduce")
    # An op with one form says so under its title, before the header with its n/a group.
    assert out[j + 1] == "#   in-place only (torch has no out-of-place all_reduce)"
    assert out[j + 2 : j + 5] == HEADER
    footers = [line for line in out if line.startswith("# Avg bus bandwidth")]
    assert footers == [
        "# Avg bus bandwidth    : 2 GB/s  (all_gather)",
        "# Avg bus bandwidth    : 10 GB/s  (all_reduce)",
    ]
    assert i < out.index(footers[0]) < j < out.index(footers[1])
    assert out[-1] == "# Wrong elements       : 2 FAILED"


def test_table_sink_sections_golden() -> None:
    """What a reader sees for an op with both placements and one with in-place only:
    one line per size, out-of-place and in-place side by side (nccl-tests' layout), the
    absent form's group n/a and explained once under the op's title."""
    rec = Recorder()
    sink = TableSink(echo=rec.echo)
    sink.rows(ops.get("all_gather"), [row(), row(in_place=1, time_us=9.5, busbw_gbps=0.0706)])
    ar = row(op="all_reduce", redop="sum", size_bytes=1024, count=256, in_place=1)
    sink.rows(ops.get("all_reduce"), [ar])
    sink.close()
    assert rec.lines() == [
        "# all_gather",
        *HEADER,
        "        1008            84     float    none      -1"
        "    12.35    0.08    0.05      0     9.50    0.08    0.07      0",
        "# Avg bus bandwidth    : 0.0625 GB/s  (all_gather)",
        "#",
        "# all_reduce",
        "#   in-place only (torch has no out-of-place all_reduce)",
        *HEADER,
        "        1024           256     float     sum      -1"
        "      n/a     n/a     n/a    n/a    12.35    0.08    0.05      0",
        "# Avg bus bandwidth    : 0.0544 GB/s  (all_reduce)",
        "#",
        "# Wrong elements       : 0 OK",
    ]


def test_table_sink_all_correct_says_ok() -> None:
    rec = Recorder()
    sink = TableSink(echo=rec.echo)
    sink.rows(ops.get("all_gather"), [row(wrong=None), row(in_place=1, wrong=None)])
    sink.close()
    assert rec.lines()[-1] == "# Wrong elements       : 0 OK"
    assert "n/a" in rec.lines()[-4] and "N/A" not in "".join(rec.lines())


def test_a_row_without_a_measurement_is_shown_by_its_status() -> None:
    rec = Recorder()
    sink = TableSink(echo=rec.echo)
    no_numbers = dict.fromkeys(("time_us", "algbw_gbps", "busbw_gbps"))
    oom = row(in_place=1, wrong=None, status="oom", **no_numbers)
    sink.rows(ops.get("all_gather"), [row(status="ok"), oom])
    sink.close()
    line = next(line for line in rec.lines() if line.startswith("        1008"))
    assert line.split()[-4:] == ["oom", "oom", "oom", "n/a"]
    assert "# Avg bus bandwidth    : 0.0544 GB/s  (all_gather)" in rec.lines()


# --- values that outgrow their column ------------------------------------------------

GiB_HALF = {"size_bytes": 536870912, "count": 134217728}
NO_NUMBERS = dict.fromkeys(("time_us", "algbw_gbps", "busbw_gbps", "wrong"))


def test_a_wide_value_never_merges_with_its_neighbour() -> None:
    # Measured on an H100 (issue 11): in-place all_gather at 512 MiB printed as
    # "45.8811702.86", time and algbw run together.
    line = format_line(
        [
            row(**GiB_HALF, time_us=363.0, algbw_gbps=1478.98, busbw_gbps=1478.98),
            row(**GiB_HALF, in_place=1, time_us=45.88, algbw_gbps=11702.86, busbw_gbps=11702.86),
        ]
    )
    assert line == (
        "   536870912     134217728     float    none      -1"
        "    363.0 1478.98 1478.98      0"
        "    45.88 11702.9 11702.9      0"
    )
    assert len(line) == len(HEADER[1])


def test_huge_values_switch_to_the_exponent_form() -> None:
    huge = {"size_bytes": 1 << 41, "count": 1 << 39}
    line = format_line(
        [
            row(**huge, time_us=1.5e7, algbw_gbps=1.5e6, busbw_gbps=123456.789, wrong=123456789),
            row(**huge, in_place=1, time_us=1.5e7, host_bound=1, algbw_gbps=1e-9, busbw_gbps=0.0),
        ]
    )
    assert line == (
        " 2.19902e+12  549755813888     float    none      -1"
        " 15000000 1.5e+06  123457  1e+08"
        " 1.5e+07*    0.00    0.00      0"
    )
    assert len(line.split()) == 13


def test_tiny_values_keep_the_fixed_form() -> None:
    line = format_line([row(time_us=0.004, algbw_gbps=1e-12, busbw_gbps=1e-12)])
    assert line == (
        "        1008            84     float    none      -1"
        "     0.00    0.00    0.00      0"
        "      n/a     n/a     n/a    n/a"
    )


@pytest.mark.parametrize(
    ("value", "text", "width", "shown"),
    [
        (12.5, "12.50", 8, "12.50"),
        (1234567.0, "1234567.00", 8, "1.2e+06"),
        (1234567.0, "1234567.00", 7, "1e+06"),
        (999999.0, "999999.00", 8, "999999"),
        (1e300, "1" + "0" * 300, 8, "1e+300"),
    ],
)
def test_fit_leaves_a_space(value: float, text: str, width: int, shown: str) -> None:
    assert fit(value, text, width) == shown
    assert len(shown) < width


def test_text_too_long_for_its_column_still_gets_a_space() -> None:
    line = format_line([row(dtype="complex_float256", redop="none")])
    assert " complex_float256 " in line


# --- host-bound rows and unsupported rows -------------------------------------------


def test_host_bound_times_are_marked_and_explained() -> None:
    line = format_line([row(host_bound=1), row(in_place=1, host_bound=0)])
    assert line.split()[5] == "12.35*" and line.split()[9] == "12.35"
    assert len(line) == len(HEADER[1])

    def header(backend: str) -> list[str]:
        return run_header(
            ops=["all_gather"],
            backend=backend,
            world_size=1,
            nnodes=1,
            device="NVIDIA H100",
            warmup=5,
            iters=20,
            average="avg",
            check=True,
            seed=0,
        )

    assert f"# {HOST_BOUND_NOTE}" in header("nccl")
    assert "--cuda-graph" in HOST_BOUND_NOTE and "0.9x" in HOST_BOUND_NOTE
    # gloo's calls block the host: there is nothing to mark, so no legend either.
    assert not any("host-bound" in line for line in header("gloo"))


def test_table_sink_counts_host_bound_rows() -> None:
    rec = Recorder()
    sink = TableSink(echo=rec.echo)
    sink.rows(ops.get("all_gather"), [row(host_bound=1), row(in_place=1, host_bound=1)])
    sink.rows(ops.get("all_gather"), [row(size_bytes=2016, host_bound=0)])
    sink.close()
    assert sink.host_bound_rows == 2
    assert rec.lines()[-1].startswith("# Host-bound rows      : 2 (time marked *)")
    assert "--cuda-graph" in rec.lines()[-1]
    quiet = Recorder()
    sink = TableSink(echo=quiet.echo)
    sink.rows(ops.get("all_gather"), [row(host_bound=None)])
    sink.close()
    assert not any("Host-bound" in line for line in quiet.lines())


def test_an_unsupported_row_is_shown_like_an_oom_row() -> None:
    rec = Recorder()
    sink = TableSink(echo=rec.echo)
    unsupported = row(in_place=1, status="unsupported", **NO_NUMBERS)
    sink.rows(ops.get("all_gather"), [row(status="unsupported", **NO_NUMBERS), unsupported])
    sink.rows(ops.get("all_gather"), [row(size_bytes=2016, status="ok")])
    sink.close()
    line = next(line for line in rec.lines() if line.startswith("        1008"))
    assert line == (
        "        1008            84     float    none      -1"
        "              unsupported    n/a"
        "              unsupported    n/a"
    )
    # The status ends where busbw ends; #wrong stays in its column.
    assert len(line) == len(HEADER[1])
    assert "# Avg bus bandwidth    : 0.0544 GB/s  (all_gather)" in rec.lines()
