"""The cross-check's report: nccl-tests and colbench per size, as text, CSV and a figure.

The two runs are joined by :func:`colbench.commands.compare.pairs.compare_runs`
(A = nccl-tests, B = colbench) on time, the one metric that means something at every world
size (busbw is 0 at one rank); busbw of both is shown beside it. nccl-tests reports both
placements of every op; rows in a placement colbench did not measure (torch has no out-of-place
all_reduce) are left out of the table and the figure, with one line saying so.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from colbench import text
from colbench.commands.compare import comparison as compare
from colbench.commands.compare import pairs
from colbench.commands.crosscheck.plan import MULTI_NODE, Plan
from colbench.config.sizes import format_size
from colbench.errors import UsageError
from colbench.results import tables
from colbench.results.series import PLACEMENT_NAMES, Run
from colbench.text import Column

#: What a cross-check writes beside the two runs.
JOINED_CSV = "crosscheck.csv"
_COLUMNS = (
    Column("placement", 14, "<", ""), Column("size", 8, gap=""),
    Column("nccl-tests us", 15, gap=""), Column("colbench us", 13, gap=""),
    Column("ratio", 8, gap=""), Column("nccl-tests busbw", 18, gap=""),
    Column("colbench busbw", 16, gap=""), Column("note", gap="  "),
)  # fmt: skip
JOINED_TEXT = "crosscheck.txt"
FIGURE = "crosscheck.png"
#: The joined table's columns, in the CSV's order.
CSV_COLUMNS = (
    "op",
    "dtype",
    "redop",
    "in_place",
    "size_bytes",
    "world_size",
    "nccl_tests_time_us",
    "colbench_time_us",
    "time_ratio",
    "nccl_tests_busbw_gbps",
    "colbench_busbw_gbps",
    "comparable",
    "note",
)


def join(plan: Plan, nccl_tests_dir: Path, colbench_dir: Path) -> tuple[pairs.Comparison, Any]:
    """The time comparison (for the summary and figure) and the joined table."""
    # colbench on gloo tests the cross-check itself against a real log, which may be of
    # ranks sharing a GPU (an emulated fabric): its times are not compared as a fabric's.
    # An emulated cross-check ran both sides in one emulation, which older nccl-tests
    # (bus number alone in its device table) cannot show in its log.
    across = plan.cfg.launch.backend != "nccl"
    emulated = across or plan.ranks_per_gpu > 1
    by_time = pairs.compare_runs(
        nccl_tests_dir, colbench_dir, "time", across_backends=across, allow_emulated=emulated
    )
    by_busbw = pairs.compare_runs(
        nccl_tests_dir, colbench_dir, "busbw", across_backends=across, allow_emulated=emulated
    )
    kept = [int(p == "in") for p in plan.cfg.placements_for(plan.coll)]

    def placed(frame: Any) -> Any:
        return frame[frame["in_place"].isin(kept)]

    keys = list(by_time.keys)
    busbw = by_busbw.table[[*keys, "value_a", "value_b"]].rename(
        columns={"value_a": "nccl_tests_busbw_gbps", "value_b": "colbench_busbw_gbps"}
    )
    renamed = {"value_a": "nccl_tests_time_us", "value_b": "colbench_time_us"}
    renamed |= {"ratio": "time_ratio", "reason": "note"}
    # A merge on columns numbers its rows afresh: no index left over from placed().
    table = placed(by_time.table).merge(busbw, on=keys, how="left").rename(columns=renamed)
    a, b = by_time.a, by_time.b
    comparison = dataclasses.replace(
        by_time,
        a=Run(a.label, a.path, placed(a.frame)),
        b=Run(b.label, b.path, placed(b.frame)),
        table=placed(by_time.table),
    )
    return comparison, table


def format_text(plan: Plan, comparison: pairs.Comparison, table: Any, run_dir: Path) -> str:
    """The side-by-side table with what was run, what was left out and the summary."""
    cfg, coll = plan.cfg, plan.coll
    redop = f" {cfg.measure.redops[0]}" if coll.uses_redop else ""
    out = [f"# crosscheck {coll.name} {cfg.measure.dtypes[0]}{redop} at {plan.ranks} rank(s)"]
    out += [f"# {line}" for line in comparison.context]
    out.append(f"# nccl-tests: {' '.join(plan.nccl_tests_argv())}")
    out.append(f"# colbench:   colbench {' '.join(plan.colbench_argv(run_dir)[3:])}")
    if cfg.launch.backend != "nccl":
        out.append(
            f"# colbench ran on {cfg.launch.backend}, nccl-tests on NCCL: the ratios test the "
            "cross-check, they say nothing about NCCL"
        )
    measured = cfg.placements_for(coll)
    left_out = [PLACEMENT_NAMES[int(p == "in")] for p in ("out", "in") if p not in measured]
    if left_out:
        out.append(
            f"# nccl-tests' {left_out[0]} rows are left out: colbench measured no {left_out[0]} "
            f"{coll.name} (see colbench explain {coll.name})"
        )
    out.append(
        "# time in us, busbw in GB/s; ratio = colbench time / nccl-tests time "
        "(above 1: colbench is slower); x = not comparable"
    )
    out.append(text.header(_COLUMNS))
    for row in table.itertuples(index=False):
        ratio = f"{row.time_ratio:.3f}" if row.comparable else "x"
        cells = (
            PLACEMENT_NAMES[int(row.in_place)], format_size(int(row.size_bytes)),
            text.number(row.nccl_tests_time_us), text.number(row.colbench_time_us), ratio,
            text.number(row.nccl_tests_busbw_gbps), text.number(row.colbench_busbw_gbps), row.note,
        )  # fmt: skip
        out.append(text.line(cells, _COLUMNS))
    out += [f"# {line}" for line in compare.summary(comparison)]
    if plan.ranks_per_gpu > 1:
        out.append(
            f"# both sides ran one emulated world: {plan.ranks} ranks, {plan.ranks_per_gpu} per "
            "GPU, each an NCCL node of its own (nccl-tests under mpiexec); an emulated world's "
            "time per call is a whole number of the GPU's time slices, which two worlds can "
            "differ by (docs/gpu.md)"
        )
    else:
        out.append(
            f"# nccl-tests ran as one process driving {plan.ranks} GPU(s) (-g); {MULTI_NODE}"
        )
    return "\n".join(out)


def write_report(
    plan: Plan, directory: Path, nccl_tests_name: str, colbench_name: str
) -> tuple[str, bool]:
    """Write crosscheck.csv, crosscheck.txt and crosscheck.png; the text and whether either
    tool reported wrong elements."""
    from colbench.results.reporters.figures import save

    run_dir = directory / colbench_name
    comparison, table = join(plan, directory / nccl_tests_name, run_dir)
    table[list(CSV_COLUMNS)].to_csv(directory / JOINED_CSV, index=False)
    text = format_text(plan, comparison, table, run_dir)
    try:
        save(compare.figure(comparison), directory / FIGURE)
    except UsageError as exc:
        text += f"\n# no figure: {exc}"
    tables.write_text(directory / JOINED_TEXT, text + "\n")
    wrong = bool(table["wrong_a"].fillna(0).any() or table["wrong_b"].fillna(0).any())
    return text, wrong
