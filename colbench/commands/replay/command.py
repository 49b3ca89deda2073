"""``colbench replay`` as a plain function: traces in, plan or measurement out, exit code;
and what it measures, says and leaves (docs/replay.md, "Measuring it" and "What it
leaves"): one sweep per kind of call, each a run directory of its own under the replay's,
so what was measured before a failure stays on disk; the plan as text or JSON; the
prediction per step (the job's calls per step x colbench's time per call here) against
the job's own durations; replay.csv and the suites for CI.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from colbench import output, text
from colbench.bench import ops
from colbench.commands.replay import plan as planning
from colbench.commands.replay import traces
from colbench.commands.replay.plan import Entry, Matrix, Plan
from colbench.commands.replay.schema import shown
from colbench.config import model, options, validate
from colbench.config.sizes import format_size
from colbench.errors import ExitCode, UsageError
from colbench.results import tables
from colbench.results.rundir import RunDir, stamped_name
from colbench.text import Column


@dataclass(frozen=True)
class ReplayOptions:
    """What the command line asks beyond the traces (see docs/replay.md)."""

    dry_run: bool = False
    json: bool = False
    out: str | None = None
    results_dir: str = "results"
    backend: str | None = None
    iters: int | None = None
    warmup: int | None = None
    repeat: int | None = None
    timeout: float | None = None


def _say(line: str) -> None:
    print(f"colbench: {line}", file=sys.stderr, flush=True)


def run(paths: Sequence[str], opts: ReplayOptions) -> int:
    """Read, plan, and (unless a dry run) measure and report; the exit code."""
    if opts.json and not opts.dry_run:
        raise UsageError("--json prints the plan: give it with --dry-run")
    plan = planning.build(traces.read(list(paths)))
    if opts.dry_run:
        output.write(plan_json(plan) if opts.json else "\n".join(plan_text(plan)))
        return ExitCode.OK
    if not plan.measurable:
        raise UsageError(
            "nothing in the traces that colbench can measure: "
            + "; ".join(f"{e.key.op}: {e.key.reason}" for e in plan.entries)
        )
    return _measure(plan, paths, opts)


def _measure(plan: planning.Plan, paths: Sequence[str], opts: ReplayOptions) -> int:
    # What the user set of sweep's own options; the rest are the plan's or sweep's defaults.
    given = {k: getattr(opts, k) for k in ("backend", "iters", "warmup", "repeat", "timeout")}
    settings = {k: v for k, v in given.items() if v is not None}
    run_dir = RunDir.create(opts.out, Path(opts.results_dir) / stamped_name("replay")).path
    tables.write_text(run_dir / "plan.json", plan_json(plan) + "\n")
    suites, sweeps_dir = run_dir / "suites", run_dir / "sweeps"
    suites.mkdir()
    sweeps_dir.mkdir()
    sources = ", ".join(Path(p).name for p in paths)
    worst = int(ExitCode.OK)
    planned = sweeps(plan, suites, settings)
    for sweep in planned:  # every config checked before anything runs
        sweep.config(sweeps_dir / sweep.name)
    if planned:
        _warn_backend(plan, planned[0].config(sweeps_dir / planned[0].name))
    for sweep in planned:
        tables.write_text(suites / f"{sweep.name}.yaml", suite_yaml(sweep, sources))
        _say(f"replay: measuring {sweep.name}")
        code = measure(sweep, sweeps_dir / sweep.name)
        worst = max(worst, code)
        if code >= ExitCode.RANK_FAILURE:
            _say(f"replay: {sweep.name} ended with exit {code}; the sweeps after it not run")
            break
    write_csv(plan, run_dir / "replay.csv")
    tables.write_text(run_dir / "plan.json", plan_json(plan) + "\n")  # now with measured_us
    output.write("\n".join(result_text(plan)))
    _say(f"replay: plan.json, replay.csv, sweeps/ and suites/ (one suite per kind) in {run_dir}")
    return worst


def _warn_backend(plan: Plan, config: model.SweepConfig) -> None:
    """One line when the job ran NCCL (on GPUs) and this replay runs gloo: the times are
    of another transport, and the job's column is not what they predict."""
    if "nccl" not in plan.backends:
        return
    from colbench.host.world import choose_backend

    if choose_backend(config.launch) == "gloo":
        _say(
            "replay: warning: the traces are of an NCCL job (GPUs) and this replay runs "
            "gloo (CPU): its times are not the job's transport's"
        )


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


def _matrix_file(directory: Path, name: str, matrix: Matrix) -> str:
    """A traffic matrix in the format ``--splits file:`` reads (rows = senders)."""
    path = directory / f"{name}.matrix"
    tables.write_text(path, "\n".join(" ".join(map(str, row)) for row in matrix) + "\n")
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
            values["splits"] = _matrix_file(directory, name, matrix)
        out.append(Sweep(name, values, tuple(entries)))
    return out


def measure(sweep: Sweep, run_dir: Path) -> int:
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
            what = f"{entry.key.op} {entry.key.size_bytes} B"
            print(f"colbench: replay: {what} was not measured", file=sys.stderr)
    return code


#: Contributors the text names after the table.
TOP = 3
_CALL = Column("call", 44, "<")
_RESULT = (
    _CALL, Column("per step", 9), Column("us/call", 9), Column("pred us/step", 13),
    Column("share", 6), Column("job us/step", 12), Column("job/pred", 9),
)  # fmt: skip
_CSV_COLUMNS = (
    "op", "size_bytes", "dtype", "group_size", "calls", "calls_per_step", "measured_us",
    "predicted_us_per_step", "share", "recorded_us", "recorded_us_per_step", "reason",
)  # fmt: skip


def plan_json(plan: Plan) -> str:
    return json.dumps([e.as_json() for e in plan.entries], indent=2)


def _label(entry: Entry) -> str:
    key = entry.key
    size = "-" if key.size_bytes is None else format_size(key.size_bytes)
    # op is the trace's own name where colbench cannot measure the call: whatever it holds
    # (a newline, a terminal escape, what an ASCII stdout cannot print), one printable line.
    return f"{shown(key.op)} {size} {shown(key.dtype or '?')} x{key.group_size or '?'} ranks"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def plan_text(plan: Plan) -> list[str]:
    """The dry run's table: what would be measured, and what cannot be."""
    columns = (_CALL, Column("calls", 7), Column("per step", 9), Column("recorded us", 12))
    lines = [_heading(plan), text.line([c.title for c in columns], columns)]
    for e in plan.entries:
        if not e.key.reason:
            cells = (_label(e), e.calls, f"{e.calls / e.steps:.3g}", _us(e.recorded_us))
            lines.append(text.line(cells, columns))
    return lines + _unmeasurable(plan)


def _heading(plan: Plan) -> str:
    ranks = ", ".join(map(str, plan.ranks)) or "?"
    kinds, steps = output.plural(len(plan.measurable), "kind"), output.plural(plan.steps, "step")
    source = f"{' and '.join(plan.formats)} of rank {ranks}"
    return f"replay: {kinds} of call to measure, from {source}; {steps}"


def _unmeasurable(plan: Plan) -> list[str]:
    left = [e for e in plan.entries if e.key.reason]
    if not left:
        return []
    lines = [f"not measured ({output.plural(sum(e.calls for e in left), 'call')}):"]
    return lines + [
        f"  {_label(e)}: {output.plural(e.calls, 'call')}: {e.key.reason}" for e in left
    ]


def predicted(entry: Entry) -> float | None:
    us = entry.measured_us
    return None if us is None else us * entry.calls / entry.steps


def recorded(entry: Entry) -> float | None:
    us = entry.recorded_us
    return None if us is None else us * entry.calls / entry.steps


def result_text(plan: Plan) -> list[str]:
    """The prediction per step against the job's own times, largest first."""
    rows = sorted(plan.measurable, key=lambda e: -(predicted(e) or 0.0))
    total = sum(predicted(e) or 0.0 for e in rows)
    lines = [_heading(plan), text.line([c.title for c in _RESULT], _RESULT)]
    for e in rows:
        p, r = predicted(e), recorded(e)
        share = f"{100 * p / total:.0f}%" if p is not None and total else "-"
        ratio = f"{r / p:.2f}" if p and r is not None else "-"
        cells = (
            _label(e), f"{e.calls / e.steps:.3g}", _us(e.measured_us), _us(p), share, _us(r),
            ratio,
        )  # fmt: skip
        lines.append(text.line(cells, _RESULT))
    lines += _totals(rows, total)
    lines.append("per op, us/step predicted (job's): " + _per_op(rows))
    top = [f"{_label(e)} {100 * (predicted(e) or 0) / total:.0f}%" for e in rows[:TOP] if total]
    if top:
        lines.append("top contributors: " + "; ".join(top))
    return lines + _unmeasurable(plan)


def _totals(rows: list[Entry], total: float) -> list[str]:
    """The total row; the job's time beside it only over the same kinds: where the job
    timed some kinds only, a second row sums those, predicted and recorded alike."""
    both = [
        (p, r) for p, r in map(lambda e: (predicted(e), recorded(e)), rows) if p and r is not None
    ]
    if not both:
        return [text.line(("total", "", "", _us(total)), _RESULT)]
    pred, job = sum(p for p, _ in both), sum(r for _, r in both)
    ratio = f"{job / pred:.2f}"
    if len(both) == len(rows):
        return [text.line(("total", "", "", _us(total), "", _us(job), ratio), _RESULT)]
    timed = f"total of the {output.plural(len(both), 'kind')} the job timed"
    return [
        text.line(("total", "", "", _us(total)), _RESULT),
        text.line((timed, "", "", _us(pred), "", _us(job), ratio), _RESULT),
    ]


def _per_op(rows: list[Entry]) -> str:
    """Each op's kinds summed: predicted and recorded time per step, largest first."""
    by_op: dict[str, list[Entry]] = {}
    for e in rows:
        by_op.setdefault(e.key.op, []).append(e)

    def total(entries: list[Entry], of: Any) -> float | None:
        values = [of(e) for e in entries]
        return None if any(v is None for v in values) else sum(values)

    ranked = sorted(by_op.items(), key=lambda item: -(total(item[1], predicted) or 0.0))
    return "; ".join(
        f"{op} {_us(total(entries, predicted))} ({_us(total(entries, recorded))})"
        for op, entries in ranked
    )


def write_csv(plan: Plan, path: Path) -> None:
    total = sum(predicted(e) or 0.0 for e in plan.measurable)
    with tables.checked(path), path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(_CSV_COLUMNS)
        for e in plan.entries:
            p, r = predicted(e), recorded(e)
            key = e.key
            writer.writerow(
                (
                    key.op, key.size_bytes, key.dtype, key.group_size, e.calls,
                    e.calls / e.steps, e.measured_us, p,
                    p / total if p is not None and total else None,
                    e.recorded_us, r, key.reason,
                )
            )  # fmt: skip


def suite_yaml(sweep: Sweep, sources: str) -> str:
    """One sweep of the plan as a suite (``colbench run FILE``; configs/*.yaml's keys)."""
    # The traces' names go into a UTF-8 file: one not UTF-8 on disk (a surrogate here)
    # or holding a newline would fail the write or end the header's comment line.
    sources = shown(sources)
    values: dict[str, Any] = {
        "description": f"{sweep.values['op']} as the job called it ({sources})",
        **{k: v for k, v in sweep.values.items() if k not in ("out", "table", "progress")},
    }
    if str(values.get("splits", "")).startswith("file:"):
        # The matrix lies beside the suite, and a suite's file: paths are read from there.
        values["splits"] = "file:" + Path(values["splits"].removeprefix("file:")).name
    calls = ", ".join(f"{format_size(e.key.size_bytes or 0)} x{e.calls}" for e in sweep.entries)
    header = (
        f"# Replayed from {sources} by colbench replay: the job's calls of this kind\n"
        f"# (size x calls): {calls}.\n"
        f"#   colbench run THIS_FILE --out results/ci-replay && colbench gate BASELINE "
        "results/ci-replay\n"
    )
    return header + yaml.safe_dump(values, sort_keys=False)
