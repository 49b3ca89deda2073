"""Runs for the gate's tests, written the way a sweep writes them.

Rows go through the real row builder (bench.make_row) and TableWriter and are read back
with results.load, so the gate sees exactly what a sweep would leave; only the timings
are chosen, to put the judgement in a known situation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from colbench.bench import ops
from colbench.bench.plan import RunInfo, Work
from colbench.bench.rowmaker import make_row, unmeasured_row
from colbench.commands.gate import engine as gate
from colbench.commands.gate.checks import parse_checks
from colbench.config.model import SweepConfig
from colbench.results.rows import RESULTS, STATUS_OOM
from colbench.results.tables import TableWriter

KiB = 1024


def write_run(
    run_dir: Path,
    times_us: dict[tuple[str, int, str], Sequence[float]],
    *,
    world_size: int = 2,
    backend: str = "gloo",
    dtype: str = "float32",
    variant: str = "",
    device: str = "cpu",
    average: str = "avg",
    wrong: dict[tuple[str, int, str], int] | None = None,
    oom: Sequence[tuple[str, int, str]] = (),
    status: str = "complete",
    meta: dict[str, object] | None = None,
) -> Path:
    """A run directory: {(op, requested bytes, "in"/"out"): per-repeat batch times}."""
    run_dir.mkdir(parents=True)
    writer = TableWriter(run_dir / "results.csv", RESULTS)
    info = RunInfo(run_dir.name, backend, device, world_size, 1, variant)
    for (op_name, requested, placement), samples in times_us.items():
        coll = ops.get(op_name)
        cfg = SweepConfig.of(ops=(op_name,), sizes_bytes=(requested,), average=average)
        elem = 4 if dtype == "float32" else 2
        layout = coll.layout(requested, elem, world_size)
        redop = "sum" if coll.uses_redop else "none"
        work = Work(coll, dtype, redop, (requested,), (layout,), (placement,))
        for repeat, t in enumerate(samples):
            key = (op_name, requested, placement)
            if key in oom:
                row = unmeasured_row(
                    info, cfg, work, requested, layout, placement == "in", STATUS_OOM, repeat
                )
            else:
                times = dict.fromkeys(
                    ("time_us", "time_min_us", "time_p50_us", "time_p99_us", "time_max_us"), t
                )
                bad = (wrong or {}).get(key, 0) if repeat == 0 else 0
                row = make_row(
                    info, cfg, work, requested, layout, placement == "in", times, bad, repeat=repeat
                )
            writer.write(row)
    writer.close()
    record = {"run_id": run_dir.name, "status": status, **(meta or {})}
    (run_dir / "meta.json").write_text(json.dumps(record))
    return run_dir


STEADY = [100.0, 101.0, 99.0, 100.5, 99.5]
BIG = ("all_reduce", 64 * KiB, "in")
SMALL = ("all_reduce", 1 * KiB, "in")
GATHER = ("all_gather", 64 * KiB, "out")


def scaled(samples: Sequence[float], factor: float) -> list[float]:
    return [t * factor for t in samples]


def run_gate(tmp_path: Path, base: Path, cur: Path, *checks: str, **kw: object) -> gate.GateResult:
    return gate.run_gate(base, cur, gate.GateRules(tuple(parse_checks(checks)), **kw))  # type: ignore[arg-type]
