"""Runs -> measured lines tagged with the algorithm that produced them and the ranks per node.

Which algorithm a run measured (gloo: ring; NCCL: its NCCL_ALGO, else one --algo, else
refused) is docs/predict.md's "Which algorithm a run measured".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from colbench.commands.predict.models import DOUBLE_TREE, RING, algorithms_for
from colbench.config.variants import variant_env
from colbench.errors import UsageError
from colbench.nccl.algo import asked
from colbench.results.rundir import RunDir
from colbench.results.series import Line, Run, lines

#: NCCL's algorithm -> the model of that algorithm.
_NCCL_ALGOS = {"Ring": RING, "Tree": DOUBLE_TREE}


@dataclass(frozen=True)
class Measured:
    """One measured curve: median time per size of one (run, op) at one world size."""

    run: str
    path: Path
    op: str
    algo: str
    world_size: int
    nnodes: int
    ranks_per_node: int
    setting: str
    """The run's variant without NCCL_ALGO: what else it set (NCCL_PROTO=LL...)."""
    size_bytes: np.ndarray
    time_us: np.ndarray
    requested_bytes: np.ndarray
    dtype: str = ""
    #: "none" for ops that reduce nothing.
    redop: str = "none"
    #: The devices the curve's rows name, comma-joined; "" when the rows name none (an
    #: imported log without its device lines).
    device: str = ""

    @property
    def kind(self) -> str:
        return self.dtype if self.redop == "none" else f"{self.dtype} {self.redop}"


def algo_of(line: Line, meta_env: dict[str, str], assumed: str | None) -> str:
    """The algorithm that measured ``line``; UsageError when it cannot be known."""
    if line.backend != "nccl":
        return RING
    value = variant_env(line.variant).get("NCCL_ALGO", meta_env.get("NCCL_ALGO"))
    allowed = asked(value, line.op)
    if allowed is None:
        if assumed is not None:
            return assumed
        raise UsageError(
            f"run {line.run} is an NCCL run without NCCL_ALGO for {line.op}: NCCL chose "
            "its algorithm per size, which no single model describes; measure with "
            "--env NCCL_ALGO=Ring,Tree, or say which it used with one --algo"
        )
    algo = _NCCL_ALGOS.get(next(iter(allowed))) if len(allowed) == 1 else None
    if algo is None or algo not in algorithms_for(line.op):
        raise UsageError(
            f"run {line.run} ran {line.op} under NCCL_ALGO={value}: predict models one "
            "algorithm per run (Ring or Tree); measure with --env NCCL_ALGO=Ring,Tree"
        )
    return algo


def _devices(run: Run, line: Line) -> str:
    frame = run.frame
    if "device" not in frame.columns:
        return ""
    rows = frame[(frame["op"] == line.op) & (frame["world_size"] == line.world_size)]
    return ",".join(sorted({str(d) for d in rows["device"].dropna()} - {""}))


def _measured(run: Run, line: Line, assumed: str | None) -> Measured:
    nnodes = line.nnodes if line.nnodes and line.nnodes > 0 else 1
    per_node = -(-line.world_size // nnodes)
    env = (RunDir.of(run.path).meta_or_none() or {}).get("env")
    meta_env = {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}
    return Measured(
        run=run.label,
        path=run.path,
        op=line.op,
        algo=algo_of(line, meta_env, assumed),
        world_size=line.world_size,
        nnodes=nnodes,
        ranks_per_node=per_node,
        setting=",".join(
            f"{k}={v}" for k, v in variant_env(line.variant).items() if k != "NCCL_ALGO"
        ),
        size_bytes=line.size_bytes,
        time_us=line.time_us,
        requested_bytes=line.requested_bytes,
        dtype=line.dtype,
        redop=line.redop,
        device=_devices(run, line),
    )


def measured_of(
    runs: Sequence[Run], assumed: str | None, wanted_ops: Sequence[str]
) -> list[Measured]:
    """Every modelled curve of the runs (ops without a model, world sizes below 2 and
    ops not in ``wanted_ops``, when given, left out)."""
    found: list[Measured] = []
    for run in runs:
        for line in lines(run):
            if not algorithms_for(line.op) or line.world_size < 2:
                continue
            if wanted_ops and line.op not in wanted_ops:
                continue
            found.append(_measured(run, line, assumed))
    return found


def select_kind(
    fitted: Sequence[Measured], against: Sequence[Measured], dtype: str | None, redop: str | None
) -> tuple[list[Measured], list[Measured]]:
    """Keep one dtype (and reduction op) per op, fitted and checked alike. A reduction's cost per
    byte, and for a smaller element the time of the same bytes, depends on both: one fit over
    float32 sum and bfloat16 max would be a model of neither. Runs that hold several are refused
    unless --dtype / --redop pick one."""

    def wanted(m: Measured) -> bool:
        return (dtype is None or m.dtype == dtype) and (redop is None or m.redop in ("none", redop))

    kept = [m for m in fitted if wanted(m)]
    checked = [m for m in against if wanted(m)]
    for op in dict.fromkeys(m.op for m in fitted):
        if not any(m.op == op for m in kept):
            held = ", ".join(sorted({m.kind for m in fitted if m.op == op}))
            picked = " ".join(x for x in (dtype, redop) if x)
            raise UsageError(
                f"the fitted runs hold no {op} of {picked} (they hold {held}): check "
                f"--dtype / --redop, or leave {op} out with --op"
            )
    for op in dict.fromkeys(m.op for m in kept):
        kinds = sorted({m.kind for m in kept if m.op == op})
        if len(kinds) > 1:
            raise UsageError(
                f"the fitted runs hold {op} of several kinds ({', '.join(kinds)}): "
                "pick one with --dtype and --redop"
            )
        # A kind that passed --dtype/--redop but was not fitted: no pick can fit it.
        alien = sorted({m.kind for m in checked if m.op == op} - set(kinds))
        if alien:
            raise UsageError(
                f"--against holds {op} of {', '.join(alien)} but the fit is of {kinds[0]}: "
                f"check against runs of {kinds[0]}"
            )
    if against and not checked:
        held = ", ".join(sorted({m.kind for m in against}))
        raise UsageError(
            f"--dtype / --redop leave none of the --against runs' rows (they hold {held}): "
            "check against runs of the fitted kind"
        )
    return kept, checked


def check_disjoint(fitted: Sequence[Measured], against: Sequence[Measured]) -> None:
    """Refuse a check against what was fitted: that is no prediction."""
    fitted_paths = {m.path.resolve() for m in fitted}
    for m in against:
        if m.path.resolve() in fitted_paths:
            raise UsageError(f"run {m.run} is both fitted and checked against: give it once")
    fitted_keys = {(m.op, m.algo, m.world_size) for m in fitted}
    for m in against:
        if (m.op, m.algo, m.world_size) in fitted_keys:
            raise UsageError(
                f"{m.op} ({m.algo}) at {m.world_size} ranks is in the fitted runs and in "
                f"--against run {m.run}: check against world sizes that were not fitted"
            )
