"""Runs a sweep: picks the backend, makes the run directory, starts or joins ranks.

The parent's orchestration; :mod:`colbench.run.spawn` starts the ranks and
:mod:`colbench.run.launched` joins an external launcher's job instead.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from colbench.config.model import SweepConfig
from colbench.config.variants import Variant, environment, expand, ignored_by_backend
from colbench.errors import ExitCode, UsageError
from colbench.launch import detect
from colbench.run.interleave import memory_note, run_interleaved
from colbench.run.launched import run_launched
from colbench.run.prepare import (
    checked_notes,
    choose_backend,
    make_run_dir,
    nccl_notes,
    one_gpu_note,
    spawn_notes,
    spawned_world_size,
)
from colbench.run.probe import Choices, probe_variants
from colbench.run.spawn import spawn_and_wait
from colbench.store.rundir import RunDir


def run_sweep(cfg: SweepConfig) -> int:
    """Run a sweep to completion; returns the process exit code."""
    launch_env = detect()
    spawning = launch_env is None
    backend = choose_backend(cfg.launch, spawning)
    if launch_env is not None:
        if cfg.launch.env_axes or cfg.launch.interpreters:
            raise UsageError(
                f"--env variants need fresh ranks per variant (--python ones too), which "
                f"colbench can start only itself; under {launch_env.launcher} export the "
                "variable (or pick the interpreter) before launching instead"
            )
        return run_launched(cfg, launch_env, backend)

    world_size = spawned_world_size(cfg.launch, backend)
    notes = checked_notes(cfg, world_size, backend) + nccl_notes(cfg.launch, backend)
    chosen = one_gpu_note(cfg.launch.backend, backend, world_size)
    # Interleaved variants' worlds are all alive at once.
    variants = expand(cfg.launch.env_axes, cfg.launch.interpreters)
    notes += spawn_notes(world_size, len(variants) if cfg.launch.interleave else 1)
    notes = notes + ([chosen] if chosen else [])
    run_dir = make_run_dir(cfg, backend)
    for note in notes:
        print(f"colbench: note: {note}", file=sys.stderr)
    return _run_variants(cfg, backend, world_size, run_dir)


def _run_variants(cfg: SweepConfig, backend: str, world_size: int, run_dir: Path) -> int:
    """Run every variant in freshly spawned ranks; all rows go to one results.csv.

    On NCCL each variant's probe world runs first and records NCCL's choice per call
    (colbench.run.probe), which that variant's rows carry.
    """
    variants = expand(cfg.launch.env_axes, cfg.launch.interpreters)
    probed = probe_variants(cfg, backend, world_size, run_dir, variants)
    failed = next((p for p in probed.values() if p.exit_code != ExitCode.OK), None)
    if failed is not None:
        print(f"colbench: {failed.note}; nothing measured", file=sys.stderr)
        return failed.exit_code
    for name, found in probed.items():
        print(f"colbench: note: {name + ': ' if name else ''}{found.note}", file=sys.stderr)
    choices = {name: found.choices for name, found in probed.items()}
    if len(variants) == 1 and not variants[0].env and variants[0].python is None:
        code = spawn_and_wait(cfg, backend, world_size, run_dir, nccl_choices=choices.get(""))
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
            code = run_interleaved(cfg, backend, world_size, run_dir, variants, choices)
        else:
            if note != "--no-interleave":
                print(f"colbench: note: {note}", file=sys.stderr)
            code = _sweep_variants(cfg, backend, world_size, run_dir, variants, choices)
    if cfg.output.plot and code in (ExitCode.OK, ExitCode.DATA_ERROR):
        _write_plots(run_dir)
    return code


def _sweep_variants(
    cfg: SweepConfig,
    backend: str,
    world_size: int,
    run_dir: Path,
    variants: tuple[Variant, ...],
    choices: Mapping[str, Choices],
) -> int:
    records: list[dict[str, Any]] = []
    worst = ExitCode.OK
    for index, variant in enumerate(variants, 1):
        print(f"colbench: variant {index}/{len(variants)}: {variant.name}", file=sys.stderr)
        # Spawned ranks inherit the parent's environment at start, before any process group.
        with environment(dict(variant.env)):
            code = spawn_and_wait(
                cfg, backend, world_size, run_dir, variant, nccl_choices=choices.get(variant.name)
            )
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
        if code not in (ExitCode.OK, ExitCode.DATA_ERROR):
            return code
        worst = max(worst, ExitCode(code))
    total = sum(int(r["rows"] or 0) for r in records)
    print(
        f"colbench: {total} rows of {len(variants)} variants in {run_dir}/results.csv",
        file=sys.stderr,
    )
    return int(worst)


def _write_plots(run_dir: Path) -> None:
    from colbench.analysis import plots

    try:
        paths = plots.write_run_plots(run_dir)
    except UsageError as exc:
        print(f"colbench: note: no plots: {exc}", file=sys.stderr)
        return
    print(f"colbench: plots: {', '.join(str(p) for p in paths)}", file=sys.stderr)
