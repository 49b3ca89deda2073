"""Variants measured interleaved: every variant's world alive at once, taking turns.

The parent starts one world of ranks per variant, serves the turn store
(:mod:`colbench.host.turns`) and waits for all of them; each world keeps its meta.json and
rank logs in ``variants/<index>/``, its rows going turn by turn into the run's one
results.csv. A world that fails stops the others at their next turn, cleanly.
"""

from __future__ import annotations

import csv
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from colbench.bench import memory
from colbench.bench.ops.data import DTYPES
from colbench.bench.plan import plan
from colbench.commands.sweep.task import Choices, SweepTask
from colbench.config.model import SweepConfig
from colbench.config.variants import Variant, environment
from colbench.errors import ExitCode, UsageError
from colbench.host import pace, protocol, spawn, supervise, turns
from colbench.host.launchers import gpus
from colbench.host.supervise import end_meta, forget_job, kept_line, record_nccl_log
from colbench.output import plural
from colbench.results.rundir import RunDir


def memory_note(cfg: SweepConfig, backend: str, world_size: int, worlds: int) -> str | None:
    """Why the worlds cannot all be alive at once (None: they can).

    Each live world holds its own buffers: on GPUs ``worlds`` ranks share every device
    (``worlds * K`` with --ranks-per-gpu K), on the CPU ``worlds * world_size`` ranks
    share the host. A GPU that allows one process (Exclusive-Process mode) cannot hold
    two worlds' ranks at all. GPUs are asked through NVML, never CUDA: a context in the
    parent would hold memory on every GPU for the whole run (colbench.host.launchers.gpus).
    """
    known = gpus.visible_gpus() if backend == "nccl" else None
    exclusive = next((g for g in known or () if not g.shareable), None)
    if exclusive is not None:
        return (
            f"GPU {exclusive.index} is in {exclusive.compute_mode} compute mode (one process "
            "per GPU): the variants' worlds cannot be alive at once; running them one after "
            "the other instead (--no-interleave)"
        )
    if cfg.measure.memory_check == "off" or (backend == "nccl" and not known):
        return None
    work = plan(cfg, cfg.measure.ranks_per_group(world_size), backend)
    need = max(
        (
            memory.buffer_bytes(
                item.coll, layout, DTYPES[item.dtype].elem_bytes, item.placements,
                cfg.measure.rotate,
            )
            for item in work
            for layout in item.layouts
        ),
        default=0,
    )  # fmt: skip
    limit = cfg.measure.memory_limit_bytes
    if known:
        free = min(g.memory_free_bytes or 0 for g in known)
        budget = memory.rank_budget_bytes(1, limit, free // (worlds * cfg.launch.ranks_per_gpu))
    else:
        budget = memory.rank_budget_bytes(world_size * worlds, limit, None)
    if need <= budget:
        return None
    return (
        f"{worlds} variants alive at once need {need / 2**20:.0f} MiB per rank each for the "
        f"largest size, more than the {budget / 2**20:.0f} MiB each could have; running them "
        "one after the other instead (--no-interleave)"
    )


def run_interleaved(
    cfg: SweepConfig,
    backend: str,
    world_size: int,
    run_dir: Path,
    variants: tuple[Variant, ...],
    choices: Mapping[str, Choices] | None = None,
    refusals: Mapping[str, str] | None = None,
) -> int:
    """Start every variant's world, let them take turns, report; the exit code.
    ``refusals``: per variant, why its probe says NCCL did not do what it asks."""
    for index, variant in enumerate(variants, 1):
        print(f"colbench: variant {index}/{len(variants)}: {variant.name}", file=sys.stderr)
    print(
        f"colbench: {len(variants)} variants interleaved: their ranks take turns per size and "
        "repeat",
        file=sys.stderr,
    )
    # The header first: two worlds' rank 0 opening a new file at once would both write one.
    RunDir(run_dir).writer().close()
    listener = spawn.listen_loopback()
    port = int(listener.getsockname()[1])
    worlds: list[spawn.World] = []
    with supervise.StopSignals() as stop:
        try:
            # Every world's ranks before any store: a store serves from a thread, and a
            # rank forked while a thread holds a lock would wait on it for ever.
            for index, variant in enumerate(variants):
                spec = turns.TurnSpec(spawn.LOCAL_HOST, port, index, len(variants), variant.name)
                chosen = (choices or {}).get(variant.name, {})
                refused = (refusals or {}).get(variant.name)
                worlds.append(
                    _start(cfg, backend, world_size, run_dir, variant, spec, chosen, refused)
                )
            for index, world in enumerate(worlds):
                world.serve(show_joins=index == 0)
            store = turns.serve(spawn.LOCAL_HOST, listener.fileno(), port)
            spawn.hand_over(listener)
        except BaseException:
            for world in worlds:
                supervise.stop_processes(world.processes)
            raise
        turns.start(store)
        codes = _wait_all(worlds, stop, store, _turns_per_world(cfg, world_size, backend))
        if stop.received is not None:
            return _interrupted(run_dir, worlds, stop)
    listener.close()
    _print_tables(worlds)
    code = _report(run_dir, variants, worlds, codes)
    if code in (ExitCode.OK, ExitCode.DATA_ERROR):
        first = worlds[0]
        forecast = pace.read_forecast(first.store)
        pace.check_overrun(run_dir, forecast, time.time() - first.job.started_at)
    return code


def _interrupted(run_dir: Path, worlds: list[spawn.World], stop: supervise.StopSignals) -> int:
    """Stop every world's ranks; the run keeps what it measured and says so."""
    for world in worlds:
        supervise.stop_processes(world.processes)
    name = protocol.signal_name(stop.received or signal.SIGINT)
    # The run's plan is its worlds' together: stopped after their last rows, it is whole.
    counts = [(RunDir(w.run_dir).meta_or_none() or {}).get("rows_planned") for w in worlds]
    whole = [c for c in counts if isinstance(c, int)]
    fields: dict[str, object] = {"error": f"interrupted by {name}", "interleaved": True}
    if len(whole) == len(counts):
        fields["rows_planned"] = sum(whole)
    end_meta(run_dir, "interrupted", fields)
    rows = plural(RunDir(run_dir).rows_kept(), "row")
    print(f"colbench: interrupted by {name}; {rows} kept in {run_dir}", file=sys.stderr)
    return stop.exit_code


def _print_tables(worlds: list[spawn.World]) -> None:
    """Each world's console table, whole, one after the other (they were measured
    turn by turn, and two tables printed as they grew would interleave line by line)."""
    from colbench.commands.sweep.lead import TABLE_FILE

    for world in worlds:
        table = world.run_dir / TABLE_FILE
        if table.is_file():
            sys.stdout.write(table.read_text(encoding="utf-8"))
            table.unlink()
    sys.stdout.flush()


def _turns_per_world(cfg: SweepConfig, world_size: int, backend: str) -> int:
    """An upper bound on any world's turns (the plan before memory fitting)."""
    work = plan(cfg, cfg.measure.ranks_per_group(world_size), backend)
    return sum(len(item.layouts) for item in work) * cfg.measure.repeat


def _start(
    cfg: SweepConfig,
    backend: str,
    world_size: int,
    run_dir: Path,
    variant: Variant,
    spec: turns.TurnSpec,
    nccl_choices: Choices,
    refused: str | None = None,
) -> spawn.World:
    sub = run_dir / "variants" / str(spec.world)
    sub.mkdir(parents=True)
    # Started one after the other, so each inherits only its own variant's variables.
    with environment(dict(variant.env)):
        return spawn.fork_world(
            SweepTask(cfg, nccl_choices, load=cfg.measure.contend if variant.loaded else None,
                      engine=variant.engine, refused=refused),
            backend, world_size,
            sub, variant,
            turns=spec, results_dir=str(run_dir.resolve()), run_id=run_dir.name,
        )  # fmt: skip


def _wait_all(
    worlds: list[spawn.World], stop: supervise.StopSignals, store: Any, turn_count: int
) -> list[dict[int, int | None] | None]:
    """Wait for every world; the first to fail wakes the others with ``stop``."""
    codes: list[dict[int, int | None] | None] = [None] * len(worlds)
    lock = threading.Lock()

    def watch(index: int) -> None:
        world = worlds[index]
        # World 0's rank 0 keeps the run's forecast (colbench.commands.sweep.task), as its bar.
        tick = world.progress_lines() if index == 0 else None
        codes[index] = supervise.wait_for_ranks(world.processes, stop, world.watch, tick)
        if codes[index] is not None:
            with lock:
                turns.stop_all(store, len(worlds), turn_count)

    threads = [threading.Thread(target=watch, args=(i,), daemon=True) for i in range(len(worlds))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return codes


def _report(
    run_dir: Path,
    variants: tuple[Variant, ...],
    worlds: list[spawn.World],
    codes: list[dict[int, int | None] | None],
) -> int:
    """meta.json of the run (one record per variant), the verdict, the exit code."""
    failures = [
        spawn.diagnose_world(world, code) if code is not None else None
        for world, code in zip(worlds, codes, strict=True)
    ]
    records = []
    with open(RunDir(run_dir).table_path(), newline="", encoding="utf-8") as f:
        kept = Counter(row["variant"] for row in csv.DictReader(f))
    for variant, world, failure in zip(variants, worlds, failures, strict=True):
        forget_job(world.run_dir)
        RunDir(world.run_dir).tidy_logs()
        if failure is not None:
            end_meta(world.run_dir, "failed", failure.meta())
        else:
            record_nccl_log(world.run_dir)
        rows = kept.get(variant.name, 0)
        records.append(_record(variant, world.run_dir, failure, any(failures), rows))
    meta = _base_meta(run_dir, worlds[0].run_dir)
    meta.update(
        status="failed" if any(failures) else "complete",
        interleaved=True,
        turns=len(turns.read_log(run_dir)),
        variants=records,
        **{
            key: sum(int(r[key] or 0) for r in records)
            for key in ("rows", "wrong_total", "rows_oom", "rows_planned")
        },
    )
    RunDir(run_dir).write_meta(meta)
    first = next((f for f in failures if f is not None), None)
    if first is not None:
        if first.exit_code == ExitCode.USAGE:
            raise UsageError(first.message)
        print(f"colbench: {first.message}", file=sys.stderr)
        print(
            f"colbench: {kept_line(run_dir)}; rank logs: variants/*/rank*.log there",
            file=sys.stderr,
        )
        return first.exit_code
    total = meta["rows"]
    print(
        f"colbench: {plural(total, 'row')} of {len(variants)} variants in {run_dir}/results.csv",
        file=sys.stderr,
    )
    if meta["wrong_total"]:
        print(
            f"colbench: {meta['wrong_total']} wrong element(s): results are not trustworthy",
            file=sys.stderr,
        )
        return int(ExitCode.DATA_ERROR)
    return int(ExitCode.DATA_ERROR) if meta["rows_oom"] else int(ExitCode.OK)


def _record(
    variant: Variant, world_dir: Path, failure: protocol.Failure | None, stopped: bool, rows: int
) -> dict[str, Any]:
    """A world's record in the run's meta.json; ``rows``: its rows in results.csv (a failed
    world never wrote its counts)."""
    meta = RunDir(world_dir).meta_or_none() or {}
    # Stopped: ended cleanly at its next turn after another world failed.
    status = "stopped" if failure is None and stopped else meta.get("status")
    return {
        "variant": variant.name,
        "env": dict(variant.env),
        "python": variant.python,
        "env_seen_by_rank": meta.get("env_seen_by_rank"),
        "python_executable": meta.get("python_executable"),
        "status": status,
        "rows": rows,
        "rows_planned": meta.get("rows_planned", 0),
        "wrong_total": meta.get("wrong_total", 0),
        "rows_oom": meta.get("rows_oom", 0),
        "duration_s": meta.get("duration_s"),
        "dir": str(world_dir.relative_to(world_dir.parent.parent)),
    }


def _base_meta(run_dir: Path, first_world: Path) -> dict[str, Any]:
    """The run's meta.json from the first world's (config, hosts, versions), without what
    belongs to that world alone."""
    meta = RunDir(first_world).meta_or_none() or {"run_id": run_dir.name}
    for key in ("variant", "env_seen_by_rank", "python_executable", "error", "duration_s"):
        meta.pop(key, None)
    meta["run_id"] = run_dir.name
    return meta
