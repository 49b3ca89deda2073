"""The torch tax: what torch.distributed adds to NCCL's own time per call.

A sweep with ``--engine torch,nccl`` measures every row twice, once through torch and
once through NCCL called directly (colbench.direct), interleaved. Each pair of rows
(same variant but the engine, op, dtype, reduction, placement, size) gives torch's added
time per call: torch's time less NCCL's. Where that is at least NCCL's own time, torch's
host cost dominates the row, as it does at small sizes on fast fabrics; the summary says
the size from which NCCL's own time is the larger share.

The figures are medians over the run's repeats: a description. Whether a difference is
real is the paired gate's to say (``colbench gate RUN --variant-a engine=torch
--variant-b engine=nccl``, named at the end of the summary).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from colbench import text
from colbench.config.sizes import format_size
from colbench.results.rows import STATUS_OK
from colbench.text import Column

TORCH, DIRECT = "torch", "nccl"
_ENGINE_PART = re.compile(r"(^|,)engine=[^,]*")
#: What one row pair is keyed on beside the variant (without its engine part).
_PAIR_KEYS = (
    "op", "dtype", "redop", "root", "in_place", "size_bytes", "world_size", "group_size",
    "split", "splits",
)  # fmt: skip


def without_engine(variant: str) -> str:
    """A variant's name less its ``engine=`` part: the name both engines' rows share."""
    return _ENGINE_PART.sub("", str(variant)).strip(",")


@dataclass(frozen=True)
class Tax:
    """One row pair: the medians of both engines' time per call."""

    variant: str
    op: str
    dtype: str
    redop: str
    in_place: int
    size_bytes: int
    torch_us: float
    nccl_us: float

    @property
    def tax_us(self) -> float:
        """torch's added time per call."""
        return self.torch_us - self.nccl_us

    @property
    def dominates(self) -> bool:
        """torch's added time is at least NCCL's own: the row measures mostly torch."""
        return self.tax_us >= self.nccl_us

    @property
    def line(self) -> tuple[str, str, str, str, int]:
        return (self.variant, self.op, self.dtype, self.redop, self.in_place)


def taxes(frame: Any) -> list[Tax]:
    """Every row pair of a run that has both engines' measurements, in the run's order."""
    if "engine" not in frame.columns or frame.empty:
        return []
    ok = frame[(frame["status"] == STATUS_OK) & frame["time_us"].notna()]
    ok = ok[ok["wrong"].fillna(0) == 0]
    times: dict[tuple[Any, ...], dict[str, list[float]]] = {}
    for record in ok.to_dict("records"):
        key = (without_engine(record["variant"]), *(record[k] for k in _PAIR_KEYS))
        times.setdefault(key, {}).setdefault(str(record["engine"]), []).append(
            float(record["time_us"])
        )
    out = []
    for key, by_engine in times.items():
        if TORCH in by_engine and DIRECT in by_engine:
            variant, op, dtype, redop, _, in_place, size = key[:7]
            out.append(
                Tax(
                    variant, str(op), str(dtype), str(redop), int(in_place), int(size),
                    statistics.median(by_engine[TORCH]), statistics.median(by_engine[DIRECT]),
                )
            )  # fmt: skip
    return out


def nccl_dominates_from(line: Sequence[Tax]) -> int | None:
    """The smallest size from which torch's added time stays below NCCL's own (every
    larger size too); None where torch dominates up to the largest size measured."""
    ordered = sorted(line, key=lambda t: t.size_bytes)
    from_size = None
    for tax in reversed(ordered):
        if tax.dominates:
            break
        from_size = tax.size_bytes
    return from_size


_COLUMNS = (
    Column("op", 14), Column("dtype", 9), Column("place", 5), Column("size_bytes", 12),
    Column("torch_us", 10), Column("nccl_us", 10), Column("tax_us", 10), Column("x", 6),
)  # fmt: skip


def summary_lines(frame: Any, run: str = "RUN") -> list[str]:
    """The torch tax of every line (variant, op, dtype, redop, placement) of a run that
    measured both engines: per size, torch's and NCCL's time per call and the difference,
    then the size below which torch's cost dominates. Empty when no row pair exists."""
    every = taxes(frame)
    if not every:
        return []
    out = ["# torch tax: torch's time per call less NCCL's own (--engine nccl), medians, us"]
    out.append(text.header(_COLUMNS, lead=""))
    lines: dict[tuple[str, str, str, str, int], list[Tax]] = {}
    for tax in every:
        lines.setdefault(tax.line, []).append(tax)
    for (variant, op, dtype, redop, in_place), line in lines.items():
        name = " ".join(p for p in (variant, op, dtype, redop if redop != "none" else "") if p)
        place = "in" if in_place else "out"
        for tax in sorted(line, key=lambda t: t.size_bytes):
            ratio = f"{tax.torch_us / tax.nccl_us:.2f}" if tax.nccl_us > 0 else "n/a"
            cells = (op, dtype, place, tax.size_bytes, f"{tax.torch_us:.2f}",
                     f"{tax.nccl_us:.2f}", f"{tax.tax_us:+.2f}", ratio)  # fmt: skip
            out.append(text.line(cells, _COLUMNS, lead=""))
        out.append(f"# {name} {place}: {_verdict(line)}")
    variants = sorted({t.variant for t in every})
    base = ",".join(p for p in (variants[0], f"engine={TORCH}") if p)
    other = ",".join(p for p in (variants[0], f"engine={DIRECT}") if p)
    out.append(f"# is it real? colbench gate {run} --variant-a {base} --variant-b {other}")
    return out


def _verdict(line: Sequence[Tax]) -> str:
    median_tax = statistics.median(t.tax_us for t in line)
    said = f"torch adds {median_tax:+.2f} us per call (median over {len(line)} size(s))"
    from_size = nccl_dominates_from(line)
    if from_size is None:
        return said + "; torch's cost dominates at every size measured"
    if from_size == min(t.size_bytes for t in line):
        return said + "; NCCL's own time dominates at every size measured"
    return said + f"; torch's cost dominates below {format_size(from_size)}"
