"""Run directories whose times a known cost model generated, written through the project's
own writer (results.csv as a sweep writes it), for the predict tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from colbench.bench import ops as collectives
from colbench.bench.ops.data import DTYPES
from colbench.commands.predict import models
from colbench.commands.predict.models import Parameters
from tests.unit.rows import row, write_run

#: 4K .. 8M: the sizes of the fabric runs.
SIZES = [4096 << k for k in range(12)]
#: overhead 300 us, 120 us per step, a 20 MB/s link (0.05 us per byte), reductions at
#: 2 GB/s: about the shaped fabric's numbers.
TRUE = Parameters(300.0, 120.0, 0.05, 5e-4)

Distort = Callable[[str, int, int, float], float]


def model_run(
    directory: Path, world_size: int, *, ops: Sequence[str] = ("all_reduce", "all_gather"),
    params: Parameters = TRUE, algo: str = models.RING, sizes: Sequence[int] = SIZES,
    nnodes: int | None = None, backend: str = "gloo", variant: str = "",
    distort: Distort | None = None, as_laid_out: bool = False, dtype: str = "float32",
    redop: str = "sum", imported: bool = False,
) -> Path:  # fmt: skip
    """A run at ``world_size`` ranks on ``nnodes`` nodes (default: one rank per node)
    whose times are the model's, optionally ``distort(op, N, size, time)``-ed.
    ``as_laid_out``: rows report the size the op's layout measures (all_gather of 4K on 6
    ranks: 4032 B), with the size asked for in ``requested_bytes``, as a sweep writes them;
    ``imported``: requested_bytes is the measured size, as an imported nccl-tests log
    without a -b/-e/-f header has it."""
    nodes = world_size if nnodes is None else nnodes
    per_node = -(-world_size // nodes)
    rows = []
    for op in ops:
        for requested in sizes:
            # A dtype colbench cannot sweep (an imported float8) lays out as 1 byte.
            elem_bytes = DTYPES[dtype].elem_bytes if dtype in DTYPES else 1
            size = collectives.get(op).layout(requested, elem_bytes, world_size).size_bytes
            size = size if as_laid_out else requested
            time = params.time_us(models.terms(op, algo, world_size, per_node, size))
            if distort is not None:
                time = distort(op, world_size, size, time)
            r = row(
                op, size, time, world_size=world_size, backend=backend, variant=variant,
                dtype=dtype,
            )  # fmt: skip
            if r["redop"] != "none":
                r["redop"] = redop
            rows.append({**r, "nnodes": nodes, "requested_bytes": size if imported else requested})
    return write_run(directory, rows)
