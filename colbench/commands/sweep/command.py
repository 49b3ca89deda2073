"""``colbench sweep`` and ``colbench run``: options in, exit code out. A sweep's variants
each run in a world of fresh ranks (interleaved or one after the other), after NCCL's
probe worlds; then the figures.

The host (:func:`colbench.host.world.join_or_place`) picks the backend and the world
size, makes the run directory, and joins an external launcher's job. What starts ranks
needs torch, whose import (1 s on CPU, 5 s with CUDA) a usage error should not wait for:
it is imported inside the functions that run once the options are checked.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from colbench.config import min_bw, options, suite, validate
from colbench.config.model import SweepConfig
from colbench.config.options import SweepOptions
from colbench.config.variants import Variant, environment, expand, ignored_by_backend
from colbench.errors import ExitCode, UsageError
from colbench.output import plural

if TYPE_CHECKING:
    from colbench.commands.sweep.probe import Choices


def options_of(suite_file: str | None, given: Mapping[str, Any]) -> SweepOptions:
    """One path for flags, a suite, or both: defaults < the file < the flags given."""
    file_values = suite.load(suite_file) if suite_file is not None else {}
    return options.merge(file_values, given)


def run(opts: SweepOptions, command_line: tuple[str, ...] = ()) -> int:
    """Check the options, measure, report; the exit code (docs/troubleshooting.md)."""
    cfg = validate.from_options(opts, command_line)
    if min_bw.MIN_BW_VARIABLE in os.environ:
        # Refused before any rank starts, not found wrong after the measuring.
        min_bw.from_environment()
    return run_sweep(cfg)


def run_sweep(cfg: SweepConfig) -> int:
    """Run a sweep to completion; returns the process exit code."""
    from colbench.commands.sweep.task import SweepTask
    from colbench.host.launchers.detect import join_or_spawn
    from colbench.host.world import Spawning, join_or_place

    variants = variants_of(cfg)
    launch_env, _ = join_or_spawn(cfg.launch.nprocs)
    if launch_env is not None and cfg.measure.contend is not None:
        raise UsageError(
            f"--contend measures with and without the load in two worlds of fresh ranks, "
            f"which colbench can start only itself, not under {launch_env.launcher}"
        )
    several = len(cfg.measure.engines) > 1
    if launch_env is not None and (cfg.launch.env_axes or cfg.launch.interpreters or several):
        raise UsageError(
            f"--env variants need fresh ranks per variant (--python and --engine ones too), which "
            f"colbench can start only itself; under {launch_env.launcher} export the "
            "variable (or pick the interpreter) before launching instead"
        )
    # Interleaved variants' worlds are all alive at once.
    task = SweepTask(cfg, worlds=len(variants) if cfg.launch.interleave else 1, whole_run=True)
    world = join_or_place(task)
    if not isinstance(world, Spawning):
        return world  # run as a rank of a launcher's job
    return _run_variants(cfg, world.backend, world.world_size, world.run_dir)


def variants_of(cfg: SweepConfig) -> tuple[Variant, ...]:
    """The sweep's variants: --env axes x --python interpreters x without/with --contend."""
    contend = cfg.measure.contend
    return expand(
        cfg.launch.env_axes,
        cfg.launch.interpreters,
        None if contend is None else contend.label,
        cfg.measure.engines,
    )


def _run_variants(cfg: SweepConfig, backend: str, world_size: int, run_dir: Path) -> int:
    """Run every variant in freshly spawned ranks; all rows go to one results.csv.

    On NCCL each variant's probe world runs first and records NCCL's choice per call
    (colbench.commands.sweep.probe), which that variant's rows carry.
    """
    from colbench.commands.sweep.interleave import memory_note, run_interleaved
    from colbench.commands.sweep.probe import probe_variants
    from colbench.commands.sweep.task import SweepTask
    from colbench.host.spawn import spawn_and_wait

    variants = variants_of(cfg)
    # Only NCCL has a choice to probe (colbench.commands.sweep.probe).
    probed = (
        probe_variants(cfg, backend, world_size, run_dir, variants) if backend == "nccl" else {}
    )
    failed = next((p for p in probed.values() if p.exit_code != ExitCode.OK), None)
    if failed is not None:
        print(f"colbench: {failed.note}; nothing measured", file=sys.stderr)
        return failed.exit_code
    for name, found in probed.items():
        print(f"colbench: note: {name + ': ' if name else ''}{found.note}", file=sys.stderr)
    choices = {name: found.choices for name, found in probed.items()}
    # A knob NCCL's probe log says it did not honour: that variant's rows say unsupported.
    refusals = {name: found.refused for name, found in probed.items() if found.refused}
    if len(variants) == 1 and not variants[0].env and variants[0].python is None:
        # One engine is no axis: the task takes it from the config.
        one = SweepTask(cfg, choices.get("", {}), refused=refusals.get(""))
        code = spawn_and_wait(one, backend, world_size, run_dir)
    else:
        for key in ignored_by_backend(cfg.launch.env_axes, backend):
            print(
                f"colbench: warning: {key} has no effect on {backend}; its variants run anyway "
                "and should measure the same",
                file=sys.stderr,
            )
        note = (
            memory_note(cfg, backend, world_size, len(variants))
            if cfg.launch.interleave and len(variants) > 1
            else "--no-interleave"
        )
        if note is None:
            code = run_interleaved(cfg, backend, world_size, run_dir, variants, choices, refusals)
        else:
            if note != "--no-interleave":
                print(f"colbench: note: {note}", file=sys.stderr)
            code = _sweep_variants(cfg, backend, world_size, run_dir, variants, choices, refusals)
    if code in (ExitCode.OK, ExitCode.DATA_ERROR):
        from colbench.commands.references.place import record_after_run

        record_after_run(run_dir)
        if cfg.output.plot:
            _write_plots(run_dir)
    if cfg.measure.contend is not None and cfg.output.table and code == ExitCode.OK:
        _print_contend_summary(run_dir, variants, cfg.measure.contend.unit)
    if len(cfg.measure.engines) > 1 and cfg.output.table and code == ExitCode.OK:
        _print_torch_tax(run_dir)
    return code


def _sweep_variants(
    cfg: SweepConfig,
    backend: str,
    world_size: int,
    run_dir: Path,
    variants: tuple[Variant, ...],
    choices: Mapping[str, Choices],
    refusals: Mapping[str, str] | None = None,
) -> int:
    from colbench.commands.sweep.task import SweepTask
    from colbench.host.spawn import spawn_and_wait

    records: list[dict[str, Any]] = []
    worst = ExitCode.OK
    for index, variant in enumerate(variants, 1):
        print(f"colbench: variant {index}/{len(variants)}: {variant.name}", file=sys.stderr)
        # Spawned ranks inherit the parent's environment at start, before any process group.
        with environment(dict(variant.env)):
            task = SweepTask(
                cfg,
                choices.get(variant.name, {}),
                # --contend's load runs in its ``contend=LOAD`` world.
                load=cfg.measure.contend if variant.loaded else None,
                engine=variant.engine,
                refused=(refusals or {}).get(variant.name),
            )
            code = spawn_and_wait(task, backend, world_size, run_dir, variant)
        _record_variant(run_dir, variant, records)
        if code not in (ExitCode.OK, ExitCode.DATA_ERROR):
            return code
        worst = max(worst, ExitCode(code))
    total = sum(int(r["rows"] or 0) for r in records)
    if len(variants) > 1:
        # One variant's own line already said it.
        print(
            f"colbench: {plural(total, 'row')} of {len(variants)} variants in "
            f"{run_dir}/results.csv",
            file=sys.stderr,
        )
    return int(worst)


def _record_variant(run_dir: Path, variant: Variant, records: list[dict[str, Any]]) -> None:
    """Fold the variant just run into meta.json's ``variants`` and its totals."""
    from colbench.results.rundir import RunDir

    try:
        meta = RunDir(run_dir).read_meta()
    except (OSError, ValueError):  # missing or broken: start afresh
        meta = {"run_id": run_dir.name}
    meta.pop("variant", None)
    records.append(
        {
            "variant": variant.name,
            "env": dict(variant.env),
            "env_seen_by_rank": meta.pop("env_seen_by_rank", None),
            "status": meta.get("status"),
            "rows": meta.get("rows", 0),
            "wrong_total": meta.get("wrong_total", 0),
            "rows_oom": meta.get("rows_oom", 0),
            "duration_s": meta.get("duration_s"),
        }
    )
    meta.update(
        variants=records,
        **{
            key: sum(int(r[key] or 0) for r in records)
            for key in ("rows", "wrong_total", "rows_oom")
        },
    )
    RunDir(run_dir).write_meta(meta)


def _print_contend_summary(run_dir: Path, variants: tuple[Variant, ...], unit: str) -> None:
    """Each row alone and under load, after the tables: for every (A without the load, B
    with it) pair of variants, the medians over the run's repeats of the row's time and the
    load's rate (``unit``) alone and beside it ([contend.md](../docs/contend.md)). Whether a
    difference is real is the paired gate's to say, and the summary ends by naming it."""
    from colbench import text
    from colbench.commands.gate.paired import ROW_KEYS
    from colbench.results.rows import load

    frame, run = load(run_dir), str(run_dir)
    unloaded = {(v.env, v.interpreter): v.name for v in variants if not v.loaded}
    pairs = [(unloaded[(v.env, v.interpreter)], v.name) for v in variants if v.loaded]
    columns = (
        text.Column("op", 14), text.Column("dtype", 9), text.Column("size_bytes", 12),
        text.Column("place", 5), text.Column("alone_us", 10), text.Column("loaded_us", 10),
        text.Column("change", 8), text.Column("load_alone", 11), text.Column("load_beside", 11),
    )  # fmt: skip
    for name_a, name_b in pairs:
        a, b = _medians(frame, name_a, ROW_KEYS), _medians(frame, name_b, ROW_KEYS)
        if not a or not b:
            continue
        repeats = int(frame["repeat"].max()) + 1
        print(
            f"# under load: {name_b} (B) against {name_a} (A), medians of {repeats} "
            f"repeat(s); the load's rate in {unit}"
        )
        print(text.header(columns, lead=""))
        for key, (time_a, _, _) in a.items():
            if key not in b:
                continue
            time_b, alone, beside = b[key]
            change = f"{time_b / time_a - 1:+.1%}" if time_a > 0 else "n/a"
            row = dict(zip(ROW_KEYS, key, strict=True))
            place = "in" if row["in_place"] else "out"
            cells = (
                row["op"], row["dtype"], row["size_bytes"], place, f"{time_a:.1f}",
                f"{time_b:.1f}", change, text.number(alone), text.number(beside),
            )  # fmt: skip
            print(text.line(cells, columns, lead=""))
        print(
            f"# is it real? colbench gate {run} --variant-a {name_a} --variant-b {name_b} "
            "--check time_us:+10%"
        )
    sys.stdout.flush()


def _medians(
    frame: Any, variant: str, row_keys: tuple[str, ...]
) -> dict[tuple[Any, ...], tuple[float, Any, Any]]:
    """Per row key: the median time_us and the load's median rates (alone, beside)."""
    from colbench.results.rows import STATUS_OK

    rows = frame[(frame["variant"] == variant) & (frame["status"] == STATUS_OK)]
    found: dict[tuple[Any, ...], tuple[float, Any, Any]] = {}
    for key, group in rows.groupby(list(row_keys), sort=False, dropna=False):
        kind = "busbw_gbps" if group["load_alone_busbw_gbps"].notna().any() else "tflops"
        alone, beside = (_median(group[f"load_{when}_{kind}"]) for when in ("alone", "beside"))
        found[tuple(key)] = (float(group["time_us"].median()), alone, beside)
    return found


def _median(values: Any) -> float | None:
    import statistics

    known = [float(v) for v in values.dropna()]
    return statistics.median(known) if known else None


def _print_torch_tax(run_dir: Path) -> None:
    """Both engines' rows, pair by pair, after the tables (colbench.results.join)."""
    from colbench.results.join import torch_tax_lines
    from colbench.results.rows import load

    for line in torch_tax_lines(load(run_dir), str(run_dir)):
        print(line)
    sys.stdout.flush()


def _write_plots(run_dir: Path) -> None:
    from colbench.commands.plot import lines as plots

    try:
        paths = plots.write_run_plots(run_dir)
    except UsageError as exc:
        print(f"colbench: note: no plots: {exc}", file=sys.stderr)
        return
    print(f"colbench: plots: {', '.join(str(p) for p in paths)}", file=sys.stderr)
