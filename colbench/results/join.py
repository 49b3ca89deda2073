"""The one join of two runs: rows pooled per key of the schema, keys paired.

Every key (results.KEY_COLUMNS: op, dtype, size, world size, backend, variant...) has
R samples per run (``sweep --repeat R``, or rows of several pooled runs); a pair holds
both runs' samples of one key, every status included, so each reader decides what a
sample without a measurement means. A reader that deliberately compares across a key
column (compare's Ring run against its Tree run) leaves it out of the join by name.

The torch tax, what torch.distributed adds to NCCL's own time per call, is a join too.

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

import os
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench import text
from colbench.config.sizes import format_size
from colbench.errors import UsageError
from colbench.results.rows import KEY_COLUMNS, STATUS_INVALID, STATUS_OK, csv_path, load, plain
from colbench.text import Column

#: One row of a run as plain Python values (None for an empty cell).
Sample = dict[str, Any]


def key_columns(*frames: Any, across: Iterable[str] = ()) -> tuple[str, ...]:
    """The schema's key columns that every frame records, less those a reader compares
    across on purpose. A column a run leaves empty throughout cannot tell its rows apart:
    nccl-tests imports know no process subgroups (group_size, groups are empty)."""
    across = set(across)
    unknown = across - set(KEY_COLUMNS)
    if unknown:
        raise ValueError(f"not key columns: {sorted(unknown)}")
    return tuple(
        c
        for c in KEY_COLUMNS
        if c not in across and all(c in f.columns and f[c].notna().any() for f in frames)
    )


def pool(frame: Any, keys: Sequence[str]) -> dict[tuple[Any, ...], list[Sample]]:
    """Key -> the run's samples of it, keys in the order the run first wrote them. An
    invalid row (colbench.results.validity) is no sample: its key may itself be impossible
    (a negative size), and would join as a row of its own."""
    out: dict[tuple[Any, ...], list[Sample]] = {}
    for record in frame.to_dict("records"):
        if record.get("status") == STATUS_INVALID:
            continue
        row = {k: plain(v) for k, v in record.items()}
        out.setdefault(tuple(row[c] for c in keys), []).append(row)
    return out


@dataclass
class Pair:
    """Both runs' samples of one key; a side is empty where its run lacks the key."""

    key: tuple[Any, ...]
    a: list[Sample]
    b: list[Sample]


def join(frame_a: Any, frame_b: Any, keys: Sequence[str]) -> list[Pair]:
    """Every key of either run, A's in A's order first, then those only B has."""
    pooled_a, pooled_b = pool(frame_a, keys), pool(frame_b, keys)
    pairs = [Pair(key, samples, pooled_b.get(key, [])) for key, samples in pooled_a.items()]
    pairs += [Pair(key, [], samples) for key, samples in pooled_b.items() if key not in pooled_a]
    return pairs


def is_ok(sample: Mapping[str, Any]) -> bool:
    return sample.get("status", STATUS_OK) == STATUS_OK


def ok_values(samples: Sequence[Mapping[str, Any]], metric: str) -> list[float]:
    """The metric's values of the samples that hold a measurement."""
    return [float(s[metric]) for s in samples if is_ok(s) and s.get(metric) is not None]


def wrong_counts(samples: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(largest wrong count of any sample, samples that were not verified)."""
    wrong = [s.get("wrong") for s in samples if is_ok(s)]
    return max([0, *(int(w) for w in wrong if w is not None)]), wrong.count(None)


def side_status(samples: Sequence[Mapping[str, Any]]) -> str:
    """ok when any sample holds a measurement, else the status of the first sample."""
    statuses = [str(s.get("status", STATUS_OK)) for s in samples]
    return STATUS_OK if STATUS_OK in statuses else statuses[0]


def differences(a: Mapping[str, Any], b: Mapping[str, Any], columns: Iterable[str]) -> str:
    """``column A-value vs B-value`` for each column in which two samples differ."""
    return "; ".join(f"{c} {a[c]} vs {b[c]}" for c in columns if a.get(c) != b.get(c))


class RunFrames:
    """Each run's rows as :func:`colbench.results.rows.load` gives them, read once for one
    command call however many of its steps ask (the fabric check, the judging, the copy
    check); keyed by the path as given, so every message names the file as the user did.
    A step must not change a frame in place. Not across a write of the run: a command
    that rewrites a run (``gate --update-baseline``) reads only before it writes."""

    def __init__(self) -> None:
        self._frames: dict[Path, Any] = {}

    def __call__(self, path: str | os.PathLike[str]) -> Any:
        key = csv_path(path)
        if key not in self._frames:
            self._frames[key] = load(path)
        return self._frames[key]


def load_pooled(paths: Sequence[str | os.PathLike[str]], frames_of: RunFrames | None = None) -> Any:
    """One or more runs' rows as one frame: their samples pool per row key.

    Pooling runs made at different times puts the machine's run-to-run variation into
    the samples, which one run's repeats alone cannot show.
    """
    import pandas as pd

    if not paths:
        raise UsageError("no run to read")
    frames = [(frames_of or load)(p) for p in paths]
    _refuse_samples_twice(paths, frames)
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _refuse_samples_twice(paths: Sequence[str | os.PathLike[str]], frames: Sequence[Any]) -> None:
    """One run given twice (the same path, or a copy) would count each sample twice and
    make any change look real: a sample is its run, its row key and its repeat."""
    sample = ["run_id", *KEY_COLUMNS, "repeat"]
    seen: dict[tuple[str, ...], str | os.PathLike[str]] = {}
    for path, frame in zip(paths, frames, strict=True):
        mine = set(frame[sample].astype(str).itertuples(index=False, name=None))
        for key in mine & seen.keys():
            raise UsageError(
                f"{path} holds samples of run {key[0]} that {seen[key]} holds too (given "
                "twice, or a copy): they would count twice"
            )
        seen.update(dict.fromkeys(mine, path))


def fabric_warnings(frames: Mapping[str, Any], allow_emulated: bool) -> list[str]:
    """Refuse to judge rows of an emulated fabric against rows of a real one.

    Ranks that share a GPU (``sweep --ranks-per-gpu``) time-slice it and talk over
    loopback sockets: their times say nothing about a fabric, and a comparison with a
    real run would read the emulation's cost as a regression or an improvement. With
    ``allow_emulated`` the comparison goes on, with a warning (returned) to print.
    ``frames``: each run's rows by the name the user gave it.
    """
    kinds: dict[str, set[str]] = {}
    for name, frame in frames.items():
        if "fabric" in frame.columns:
            for kind in set(frame["fabric"].astype(str)):
                kinds.setdefault(kind, set()).add(name)
    if len(kinds) < 2 or "emulated" not in kinds:
        return []
    emulated = ", ".join(sorted(kinds["emulated"]))
    real = ", ".join(sorted(n for k, names in kinds.items() if k != "emulated" for n in names))
    what = (
        f"{emulated} holds rows of an emulated fabric (ranks sharing a GPU, --ranks-per-gpu) "
        f"and {real} rows of a real one"
    )
    if not allow_emulated:
        raise UsageError(
            f"{what}: emulated times measure the emulation, not a fabric; --allow-emulated "
            "compares them anyway"
        )
    return [f"{what}: compared anyway (--allow-emulated); the difference is the emulation's"]


def fabric_warnings_of(
    paths: Sequence[str | os.PathLike[str]],
    allow_emulated: bool,
    frames_of: RunFrames | None = None,
) -> list[str]:
    """:func:`fabric_warnings` for runs named by path (those that exist)."""
    frames = {str(p): (frames_of or load)(p) for p in paths if csv_path(p).is_file()}
    return fabric_warnings(frames, allow_emulated)


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


def torch_tax_lines(frame: Any, run: str = "RUN") -> list[str]:
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
