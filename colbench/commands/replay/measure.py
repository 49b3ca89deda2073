"""Sweeping exactly the plan through colbench's own sweep: one sweep per (op, dtype,
group size, traffic matrix), at that entry's sizes, on as many ranks as the job's group
had (a group of a larger job is measured alone: what the other groups do at the same time
is not replayed). Each sweep is a run directory of its own under the replay's, so what
was measured before a failure stays on disk."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench.bench import ops
from colbench.commands.replay.plan import Entry, Plan
from colbench.config import model, options, validate
from colbench.results import tables


@dataclass(frozen=True)
class Sweep:
    """One sweep of the plan: a suite's worth of options, and the entries it measures."""

    name: str
    values: dict[str, Any]
    entries: tuple[Entry, ...]

    def config(self, run_dir: Path) -> model.SweepConfig:
        """The sweep's config, checked as ``colbench sweep`` checks its flags."""
        given = {**self.values, "out": str(run_dir), "table": False}
        return validate.from_options(options.merge({}, given), ("colbench", "replay"))


def _matrix_file(directory: Path, name: str, entry: Entry) -> str:
    """The entry's traffic matrix in the format ``--splits file:`` reads (rows = senders)."""
    assert entry.key.matrix is not None
    path = directory / f"{name}.matrix"
    tables.write_text(path, "\n".join(" ".join(map(str, row)) for row in entry.key.matrix) + "\n")
    return f"file:{path.resolve()}"


def sweeps(plan: Plan, directory: Path, settings: Mapping[str, Any]) -> list[Sweep]:
    """The plan's measurable entries, grouped into sweeps; matrices written into
    ``directory`` (the suite files name them)."""
    groups: dict[tuple[Any, ...], list[Entry]] = defaultdict(list)
    for entry in plan.measurable:
        key = entry.key
        groups[(key.op, key.dtype, key.group_size, key.matrix)].append(entry)
    out = []
    for number, ((op, dtype, group, matrix), entries) in enumerate(sorted(
        groups.items(), key=lambda g: (g[0][0], g[0][1] or "", g[0][2] or 0)
    ), 1):  # fmt: skip
        name = f"{number:02d}-{op}-{dtype}-{group}ranks"
        sizes = sorted({e.requested_bytes or 0 for e in entries})
        values: dict[str, Any] = {
            **settings,
            "op": op,
            "sizes": ",".join(map(str, sizes)),
            "dtype": dtype,
            "nprocs": group,
            # The job's form where torch offers only one (all_reduce is in place).
            "placement": "out" if "out" in ops.BY_NAME[op].placements else "in",
        }
        if matrix is not None:
            values["splits"] = _matrix_file(directory, name, entries[0])
        out.append(Sweep(name, values, tuple(entries)))
    return out


def run(sweep: Sweep, run_dir: Path) -> int:
    """Measure one sweep into ``run_dir``; fill each entry's measured time per call (the
    median over repeats of colbench's time for its size). Returns the sweep's exit code."""
    from colbench.commands.sweep.command import run_sweep
    from colbench.results import load

    code = run_sweep(sweep.config(run_dir))
    if not (run_dir / "results.csv").exists():
        return code
    rows = load(run_dir)
    rows = rows[rows["status"] == "ok"] if "status" in rows else rows
    for entry in sweep.entries:
        times = rows[rows["requested_bytes"] == entry.requested_bytes]["time_us"].dropna()
        if len(times):
            entry.measured_us = float(times.median())
        else:
            print(
                f"colbench: replay: {entry.key.op} {entry.key.size_bytes} B was not measured",
                file=sys.stderr,
            )
    return code
