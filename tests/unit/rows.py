"""Synthetic result rows with the exact colbench schema, for plot/compare/fit tests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from colbench.bench import ops
from colbench.bench.rowmaker import host_bound
from colbench.results.rows import KEY_COLUMNS, RESULTS, SCHEMA_VERSION
from colbench.results.tables import TableWriter


def row(
    op: str,
    size_bytes: int,
    time_us: float,
    *,
    world_size: int = 4,
    variant: str = "",
    dtype: str = "float32",
    in_place: int = 0,
    backend: str = "nccl",
    wrong: int | None = 0,
    run_id: str = "synthetic",
    enqueue_us: float | None = None,
    ranks_per_gpu: int = 1,
    engine: str = "torch",
) -> dict[str, Any]:
    coll = ops.get(op)
    algbw = size_bytes / time_us / 1e3
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "variant": variant,
        "backend": backend,
        "device": "test-device",
        "world_size": world_size,
        "nnodes": 1,
        "group_size": world_size,
        "groups": 1,
        "op": coll.name,
        "dtype": dtype,
        "redop": "sum" if coll.uses_redop else "none",
        "root": 0 if coll.rooted else -1,
        "in_place": in_place,
        "requested_bytes": size_bytes,
        "size_bytes": size_bytes,
        "count": size_bytes // 4,
        "warmup": 1,
        "iters": 5,
        "average": "avg",
        "time_us": time_us,
        "time_min_us": time_us,
        "time_p50_us": time_us,
        "time_p99_us": time_us,
        "time_max_us": time_us,
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * coll.busbw_factor(world_size),
        "aggbw_gbps": algbw * coll.busbw_factor(world_size),
        "wrong": wrong,
        "status": "ok",
        "repeat": 0,
        "enqueue_us": enqueue_us,
        "host_bound": host_bound(enqueue_us, time_us),
        "fabric": "emulated" if ranks_per_gpu > 1 else "real",
        "ranks_per_gpu": ranks_per_gpu,
        "split": "",
        "splits": coll.splits_label,
        "engine": engine,
    }


def alpha_beta(alpha_us: float, beta_gbps: float) -> Callable[[int], float]:
    return lambda size: alpha_us + size / (beta_gbps * 1e3)


SIZES = [1 << e for e in range(10, 27, 2)]  # 1K .. 64M


def write_run(directory: Path, rows: Iterable[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True)
    writer = TableWriter(directory / "results.csv", RESULTS)
    # Samples of one key are repeats, as a sweep's --repeat writes them: a key repeated
    # with the same repeat index is an invalid row.
    samples: Counter[tuple[Any, ...]] = Counter()
    try:
        for r in rows:
            key = tuple(r.get(c) for c in KEY_COLUMNS)
            writer.write({**r, "run_id": directory.name, "repeat": samples[key]})
            samples[key] += 1
    finally:
        writer.close()
    return directory
