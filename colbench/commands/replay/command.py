"""``colbench replay`` as a plain function: traces in, plan or measurement out, exit code."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from colbench import output
from colbench.commands.replay import plan as planning
from colbench.commands.replay import report, traces
from colbench.errors import ExitCode, UsageError
from colbench.results import tables
from colbench.results.rundir import RunDir, stamped_name


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
        output.write(report.plan_json(plan) if opts.json else "\n".join(report.plan_text(plan)))
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
    tables.write_text(run_dir / "plan.json", report.plan_json(plan) + "\n")
    suites, sweeps_dir = run_dir / "suites", run_dir / "sweeps"
    suites.mkdir()
    sweeps_dir.mkdir()
    sources = ", ".join(Path(p).name for p in paths)
    worst = int(ExitCode.OK)
    planned = report.sweeps(plan, suites, settings)
    for sweep in planned:  # every config checked before anything runs
        sweep.config(sweeps_dir / sweep.name)
    for sweep in planned:
        tables.write_text(suites / f"{sweep.name}.yaml", report.suite_yaml(sweep, sources))
        _say(f"replay: measuring {sweep.name}")
        code = report.measure(sweep, sweeps_dir / sweep.name)
        worst = max(worst, code)
        if code >= ExitCode.RANK_FAILURE:
            _say(f"replay: {sweep.name} ended with exit {code}; the sweeps after it not run")
            break
    report.write_csv(plan, run_dir / "replay.csv")
    tables.write_text(run_dir / "plan.json", report.plan_json(plan) + "\n")  # now with measured_us
    print("\n".join(report.result_text(plan)), flush=True)
    _say(f"replay: plan.json, replay.csv, sweeps/ and suites/ (one suite per kind) in {run_dir}")
    return worst
