"""Cost models of collectives, written so that time is LINEAR in the link parameters:

    time_us = overhead_us + steps * alpha_us + link_bytes * beta_us_per_byte
              + reduced_bytes * gamma_us_per_byte

``steps``: hops on the critical path; ``link_bytes``: bytes leaving the busiest rank's
link in one direction (between nodes only, with several ranks per node);
``reduced_bytes``: bytes the busiest rank combines with its own. Being linear, one
weighted least squares over every measured (N, size) point fits all four, and a model
fitted on one algorithm predicts another from the same link parameters. Each model's
terms (ring, tree, double_tree), and why, are docs/predict.md's "The models".

The fit, per (op, algorithm) over every measured (N, size) point, minimises relative
residuals (measured - model) / measured, as ``colbench fit`` does: sizes span many orders
of magnitude, and an absolute fit would let the largest size decide everything. Points
that do not fit are found by the one robust fit (:mod:`colbench.stats.noise`) and
dropped when beyond the bisquare's cut-off and above ``OUTLIER_FLOOR``; the final
parameters are the plain relative least squares over the points kept, so their covariance
has its textbook form, which gives each prediction its 95% interval (the formula and its
terms: docs/predict.md, "Uncertainty").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import astuple, dataclass

import numpy as np

from colbench.bench import ops
from colbench.bench.ops.base import RingCost
from colbench.nccl.names import NEWEST_KNOWN
from colbench.nccl.rules import function_algorithms
from colbench.stats import noise

RING = "ring"
TREE = "tree"
DOUBLE_TREE = "double_tree"
ALGORITHMS = (RING, TREE, DOUBLE_TREE)
#: Crossing.faster_below when both lines are the same: neither is faster anywhere.
SAME = "same"


#: Names of the fitted parameters, in the order of the design matrix's columns.
PARAMETERS = ("overhead_us", "alpha_us", "beta_us_per_byte", "gamma_us_per_byte")


@dataclass(frozen=True)
class Terms:
    """The cost terms of one design point; multiply by the parameters to get time."""

    steps: float
    link_bytes: float
    reduced_bytes: float

    def vector(self) -> np.ndarray:
        """The design-matrix row: (1, steps, link_bytes, reduced_bytes)."""
        return np.array([1.0, self.steps, self.link_bytes, self.reduced_bytes])


def _ring_cost(op: str) -> RingCost:
    """The ring cost of an op that has a ring model (:func:`algorithms_for` says which)."""
    cost = ops.BY_NAME[op].ring_cost
    assert cost is not None, f"no ring model for {op}"
    return cost


def algorithms_for(op: str) -> tuple[str, ...]:
    """The algorithms that have a model for ``op``; empty when none does. The op contract
    says which: its ring cost, and whether NCCL implements it as a tree."""
    collective = ops.BY_NAME.get(op)
    if collective is None or collective.ring_cost is None:
        return ()
    with_tree = collective.nccl_function and "Tree" in function_algorithms(
        collective.nccl_function, NEWEST_KNOWN
    )
    return ALGORITHMS if with_tree else (RING,)


def nodes_of(world_size: int, ranks_per_node: int) -> int:
    """Nodes that N ranks fill at G ranks per node (the last may be partly filled)."""
    return math.ceil(world_size / ranks_per_node)


def terms(op: str, algo: str, world_size: int, ranks_per_node: int, size_bytes: float) -> Terms:
    """The cost terms of ``op`` by ``algo`` on ``world_size`` ranks at ``size_bytes``."""
    if world_size < 2:
        raise ValueError("a collective model needs at least 2 ranks")
    if algo not in algorithms_for(op):
        raise ValueError(f"no {algo} model for {op}")
    if algo == RING:
        return Terms(*_ring_cost(op).terms(world_size, float(size_bytes)))
    group = min(ranks_per_node, world_size)
    return _tree(algo, world_size, group, float(size_bytes))


def _tree(algo: str, n: int, group: int, size: float) -> Terms:
    nodes = nodes_of(n, group)
    # floor(log2 M): the depth of a balanced binary tree over M nodes (NCCL's log2i).
    depth = nodes.bit_length() - 1
    steps = 2 * ((group - 1) + depth)
    local_child = 1 if group > 1 else 0
    if nodes == 1:
        # A chain: an inner rank sends up and down; the two chains of a double tree
        # each carry half, so the busiest rank's load is the same.
        return Terms(steps, size * min(n - 1, 2), size)
    remote_children = min(nodes - 1, 2)
    if algo == TREE:
        return Terms(steps, size * min(nodes - 1, 3), size * (remote_children + local_child))
    half = size / 2
    return Terms(steps, half * min(nodes, 4), half * (remote_children + 2 * local_child))


@dataclass(frozen=True)
class Parameters:
    """Fitted link parameters; time_us = terms . (overhead, alpha, beta, gamma)."""

    overhead_us: float
    alpha_us: float
    beta_us_per_byte: float
    gamma_us_per_byte: float

    def vector(self) -> np.ndarray:
        return np.array(astuple(self))

    def time_us(self, t: Terms) -> float:
        return float(t.vector() @ self.vector())


def rate_gbps(us_per_byte: float) -> float:
    """A per-byte time as a rate in GB/s (1e9 B/s); inf for zero."""
    return math.inf if us_per_byte <= 0 else 1.0 / (us_per_byte * 1e3)


@dataclass(frozen=True)
class Crossing:
    """Where the tree and ring lines of one op and N cross."""

    size_bytes: float | None
    """The crossover size; None when the lines never cross at a positive size."""
    faster_below: str
    """The algorithm faster below the crossover (everywhere, when there is none), or
    SAME when the two lines coincide (a fit whose terms all cancel, e.g. beta and alpha
    held at 0)."""


def crossover(
    ring_at: tuple[Terms, Terms], tree_at: tuple[Terms, Terms], ring: Parameters, tree: Parameters
) -> Crossing:
    """Solve ring time = tree time for the size. Both times are straight lines in the size,
    a + b*S: ``ring_at`` and ``tree_at`` are each model's terms at size 0 and at size 1 byte,
    which give a and b. The lines cross at S* = (a_ring - a_tree) / (b_tree - b_ring) when
    that is positive; the algorithm with the lower a is faster below S*. Otherwise one is
    faster at every size."""
    a_ring = ring.time_us(ring_at[0])
    b_ring = ring.time_us(ring_at[1]) - a_ring
    a_tree = tree.time_us(tree_at[0])
    b_tree = tree.time_us(tree_at[1]) - a_tree
    same_latency = math.isclose(a_tree, a_ring, rel_tol=1e-9, abs_tol=1e-9)
    same_per_byte = math.isclose(b_tree, b_ring, rel_tol=1e-9, abs_tol=1e-12)
    if same_latency and same_per_byte:
        return Crossing(None, SAME)
    low_latency = TREE if a_tree < a_ring else RING
    if not same_per_byte:
        size = (a_ring - a_tree) / (b_tree - b_ring)
        if size > 0:
            return Crossing(size, low_latency)
    # No positive crossing: the one with the lower latency (or, on a tie, the lower cost
    # per byte) is faster at every size.
    if same_latency:
        return Crossing(None, TREE if b_tree < b_ring else RING)
    return Crossing(None, low_latency)


_TREE_DESCRIPTIONS = {
    TREE: "binary tree, pipelined, chain in a node: 2((G-1)+log2 M) steps, "
    "min(M-1,3)*S sent (2S on one node)",
    DOUBLE_TREE: "double binary tree (NCCL Tree): 2((G-1)+log2 M) steps, "
    "S/2*min(M,4) sent (2S on one node)",
}


def describe(op: str, algo: str) -> str:
    """One line naming the model of ``op`` by ``algo`` (N ranks, G per node, M nodes)."""
    return _TREE_DESCRIPTIONS[algo] if algo != RING else _ring_cost(op).description


#: A point is never dropped for being within this relative distance of the model.
OUTLIER_FLOOR = 0.05
_LEVEL = 0.95


class Unidentifiable(ValueError):
    """The points cannot tell a parameter apart from the others; the message says why."""


@dataclass(frozen=True)
class Point:
    """One measured time: a median over the run's repeats at one (N, size)."""

    run: str
    world_size: int
    ranks_per_node: int
    size_bytes: float
    time_us: float
    terms: Terms


@dataclass(frozen=True)
class Dropped:
    point: Point
    residual: float
    """(measured - model) / measured, against the fit without this point's weight."""


@dataclass(frozen=True)
class Prediction:
    time_us: float
    low_us: float
    high_us: float


@dataclass(frozen=True)
class Fit:
    """Fitted parameters of one (op, algorithm) and how well they fit."""

    op: str
    algo: str
    params: Parameters
    free: tuple[int, ...]
    """Indices (into PARAMETERS) of the parameters fitted; the others are held at 0."""
    covariance: np.ndarray
    """Covariance of the free parameters (us^2, us^2/B...)."""
    residual_rms: float
    residual_max: float
    dof: int
    kept: tuple[Point, ...]
    dropped: tuple[Dropped, ...]
    notes: tuple[str, ...]

    @property
    def world_sizes(self) -> tuple[int, ...]:
        return tuple(sorted({p.world_size for p in self.kept}))

    def predict(self, t: Terms) -> Prediction:
        """The time at ``t`` with its 95% prediction interval (see the module doc)."""
        x = t.vector()[list(self.free)]
        time = float(t.vector() @ self.params.vector())
        spread = float(x @ self.covariance @ x) + (self.residual_rms * time) ** 2
        half = t_quantile(self.dof) * math.sqrt(max(spread, 0.0))
        return Prediction(time, max(time - half, 0.0), time + half)


def t_quantile(dof: int, level: float = _LEVEL) -> float:
    """Two-sided Student-t quantile of the prediction intervals."""
    return noise.t_two_sided(level, dof)


def _identifiable(design: np.ndarray, time: np.ndarray) -> tuple[list[int], list[int]]:
    """Columns that add information over the earlier ones, and those that do not."""
    relative = design / time[:, None]
    scale = np.linalg.norm(relative, axis=0)
    free: list[int] = []
    dependent: list[int] = []
    for column in range(design.shape[1]):
        if scale[column] == 0:
            continue
        trial = [*free, column]
        block = relative[:, trial] / scale[trial]
        if np.linalg.matrix_rank(block, tol=1e-8) == len(trial):
            free.append(column)
        else:
            dependent.append(column)
    return free, dependent


def _outliers(relative: np.ndarray, free: Sequence[int]) -> np.ndarray:
    """A mask of the points the robust fit gives no weight and that miss by more than
    OUTLIER_FLOOR."""
    params, weights = noise.reweighted(relative, free)
    residuals = 1.0 - relative @ params
    return (weights == 0) & (np.abs(residuals) > OUTLIER_FLOOR)


def fit(op: str, algo: str, points: Sequence[Point]) -> Fit:
    """Fit (overhead, alpha, beta, gamma) of ``op`` by ``algo``; raises Unidentifiable."""
    design = np.array([p.terms.vector() for p in points])
    time = np.array([p.time_us for p in points])
    free, dependent = _identifiable(design, time)
    notes = []
    if 1 in dependent:
        raise Unidentifiable("latency")
    if 2 in dependent:
        raise Unidentifiable("sizes")
    if 3 in dependent:
        notes.append(
            "gamma (reduction) cannot be told from beta on these points (reduced bytes "
            "are proportional to sent bytes): folded into beta"
        )
    relative = design / time[:, None]
    out = _outliers(relative, free)
    keep = ~out
    params = noise.solve(relative[keep], np.ones(int(keep.sum())), free)
    held = [c for c in free if params[c] == 0]
    if held:
        notes.append(
            "held at 0 (a negative value fitted better): " + ", ".join(PARAMETERS[c] for c in held)
        )
    active = tuple(c for c in free if c not in held)
    residuals = 1.0 - relative @ params
    kept_res = residuals[keep]
    dof = int(keep.sum()) - len(active)
    if dof < 1:
        raise Unidentifiable("points")
    variance, covariance = noise.covariance(relative[keep][:, list(active)], kept_res, dof)
    return Fit(
        op=op,
        algo=algo,
        params=Parameters(*(float(v) for v in params)),
        free=active,
        covariance=covariance,
        residual_rms=math.sqrt(variance),
        residual_max=float(np.max(np.abs(kept_res))),
        dof=dof,
        kept=tuple(p for p, k in zip(points, keep, strict=True) if k),
        dropped=tuple(
            Dropped(p, float(r)) for p, r, o in zip(points, residuals, out, strict=True) if o
        ),
        notes=tuple(notes),
    )
