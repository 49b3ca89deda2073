"""Fits per (op, algorithm), predictions at target world sizes, crossovers, checks against
measured runs. Every refusal is a UsageError whose message says what to measure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from colbench.bench import ops
from colbench.commands.fit.model import approx_size
from colbench.commands.predict import models
from colbench.commands.predict.data import Measured
from colbench.commands.predict.models import (
    RING,
    TREE,
    Crossing,
    Fit,
    Point,
    Terms,
    Unidentifiable,
    algorithms_for,
    fit,
    nodes_of,
    terms,
)
from colbench.config.sizes import format_size
from colbench.errors import UsageError
from colbench.results.tables import TableRow
from colbench.results.tables import column as _column

#: Fewest distinct sizes an (op, algorithm) needs: two give a line, the third a residual.
MIN_SIZES = 3
#: Which fitted algorithm's link parameters stand in for an algorithm not measured.
_STAND_INS = {TREE: (models.DOUBLE_TREE, RING), models.DOUBLE_TREE: (TREE, RING), RING: ()}


@dataclass(frozen=True)
class Predicted(TableRow):
    """One prediction, a row of predict.csv (report.py)."""

    op: str = _column("collective")
    algo: str = _column("ring, tree or double_tree")
    world_size: int = _column("target ranks", "ranks")
    nnodes: int = _column("nodes the target spans at the ranks per node", "nodes")
    size_bytes: int = _column("size as nccl-tests counts it, at the target's ranks", "B")
    requested_bytes: int = _column("size asked for (--sizes, or the runs' requests)", "B")
    time_us: float = _column("predicted time", "us")
    time_low_us: float = _column("low end of the 95% prediction interval", "us")
    time_high_us: float = _column("high end of the 95% prediction interval", "us")
    busbw_gbps: float = _column("predicted bus bandwidth", "GB/s")
    basis: str = _column("fitted on this algorithm's runs, or whose link parameters it uses")


@dataclass(frozen=True)
class Checked(TableRow):
    """A prediction next to the measured time of an --against run: a row of against.csv."""

    op: str = _column("collective")
    algo: str = _column("algorithm of the measured run")
    world_size: int = _column("ranks of the measured run", "ranks")
    size_bytes: int = _column("size as nccl-tests counts it", "B")
    requested_bytes: int = _column("size asked for on the command line (1K = 1024)", "B")
    predicted_time_us: float = _column("predicted time", "us")
    measured_time_us: float = _column("measured time (median over repeats)", "us")
    error_pct: float = _column("(predicted - measured) / measured", "%")


def _points(curves: Sequence[Measured]) -> list[Point]:
    return [
        Point(
            c.run, c.world_size, c.ranks_per_node, float(size), float(time),
            terms(c.op, c.algo, c.world_size, c.ranks_per_node, float(size)),
        )
        for c in curves
        for size, time in zip(c.size_bytes, c.time_us, strict=True)
    ]  # fmt: skip


def fit_all(measured: Sequence[Measured]) -> dict[tuple[str, str], Fit]:
    """One fit per (op, algorithm) over every run and world size measured with it."""
    groups: dict[tuple[str, str], list[Measured]] = {}
    for m in measured:
        groups.setdefault((m.op, m.algo), []).append(m)
    if not groups:
        raise UsageError(
            "nothing to fit: the runs hold no all_reduce, all_gather, reduce_scatter, "
            "broadcast or reduce rows at 2 ranks or more"
        )
    return {key: _fit_group(*key, curves) for key, curves in groups.items()}


def _fit_group(op: str, algo: str, curves: Sequence[Measured]) -> Fit:
    name = f"{op} ({algo})"
    worlds = sorted({c.world_size for c in curves})
    sizes = {float(s) for c in curves for s in c.size_bytes}
    if len(worlds) < 2:
        steps = terms(op, algo, worlds[0], curves[0].ranks_per_node, 0).steps
        raise UsageError(
            f"{name} was measured at one world size only ({worlds[0]} ranks): its latency "
            f"term grows with N ({steps:g} steps there) and one N cannot tell it from the "
            "fixed overhead; measure at a second world size too (e.g. 2 and 4 ranks)"
        )
    settings = sorted({c.setting for c in curves})
    if len(settings) > 1:
        shown = " vs ".join(map(repr, settings))
        raise UsageError(
            f"{name} runs differ in their variant beyond NCCL_ALGO ({shown}): one model "
            "describes one setting; give runs of one setting"
        )
    if len(sizes) < MIN_SIZES:
        raise UsageError(
            f"{name} was measured at {len(sizes)} size(s): a fit needs at least "
            f"{MIN_SIZES} (e.g. --sizes 4K-4M)"
        )
    try:
        fitted = fit(op, algo, _points(curves))
    except Unidentifiable as exc:
        raise UsageError(
            f"{name}: the runs cannot identify the model ({exc}); measure more world "
            "sizes and sizes (e.g. 2, 3 and 4 ranks, --sizes 4K-4M)"
        ) from None
    _check_kept_worlds(name, fitted)
    return _with_hardware_note(fitted, curves)


def _check_kept_worlds(name: str, f: Fit) -> None:
    """Refuse a fit whose outliers took every point of all but one world size: the
    points kept cannot tell alpha from the overhead, as with one world size measured,
    and the interval, from those points' scatter alone, would look tight."""
    if len(f.world_sizes) >= 2:
        return
    kept = f.world_sizes[0]
    lost: dict[int, list[models.Dropped]] = {}
    for d in f.dropped:
        lost.setdefault(d.point.world_size, []).append(d)
    shown = " and ".join(_lost_text(n, lost[n]) for n in sorted(lost) if n != kept)
    raise UsageError(
        f"{name}: the points at {shown} were all rejected as outliers, which leaves one "
        f"world size ({kept} ranks): one N cannot tell the latency term from the fixed "
        "overhead; the runs disagree (other hardware or settings?): fit runs of one "
        "machine and setting at two world sizes or more"
    )


def _lost_text(world_size: int, dropped: Sequence[models.Dropped]) -> str:
    """16 ranks (azure: 9 points, residual +86.4% to +86.8%)."""
    runs = ", ".join(sorted({d.point.run for d in dropped}))
    low, high = (100 * f(d.residual for d in dropped) for f in (min, max))
    residual = f"{low:+.1f}%" if f"{low:+.1f}" == f"{high:+.1f}" else f"{low:+.1f}% to {high:+.1f}%"
    return f"{world_size} ranks ({runs}: {len(dropped)} points, residual {residual})"


def _with_hardware_note(f: Fit, curves: Sequence[Measured]) -> Fit:
    """Say so when the fit mixes devices: one set of link parameters then averages
    machines, and its interval does not cover the difference between them."""
    devices: dict[str, set[str]] = {}
    for c in curves:
        if c.device:
            devices.setdefault(c.device, set()).add(c.run)
    if len(devices) < 2:
        return f
    shown = "; ".join(f"{d} in {', '.join(sorted(runs))}" for d, runs in sorted(devices.items()))
    note = (
        f"fitted on runs of different hardware ({shown}): the parameters average the "
        "machines, and predictions describe neither"
    )
    return replace(f, notes=(*f.notes, note))


def source(fits: dict[tuple[str, str], Fit], op: str, algo: str) -> tuple[Fit, str] | None:
    """The fit that predicts ``algo`` for ``op``, and the basis to show for it; None when
    ``op`` has no ``algo`` model or no fit can serve it."""
    if algo not in algorithms_for(op):
        return None
    if (op, algo) in fits:
        return fits[op, algo], f"fitted on {algo} runs"
    for other in _STAND_INS[algo]:
        if (op, other) in fits:
            return fits[op, other], f"{other} runs' link parameters"
    return None


def check_nodes(f: Fit, world_size: int, ranks_per_node: int, fix: str = "") -> None:
    """Refuse to carry single-node measurements to a target that spans nodes; ``fix``:
    the other way out, for the message (default: the target on one node)."""
    nodes = nodes_of(world_size, ranks_per_node)
    measured_nodes = max(nodes_of(p.world_size, p.ranks_per_node) for p in f.kept)
    if nodes > 1 and measured_nodes == 1:
        raise UsageError(
            f"{f.op} ({f.algo}) was measured on one node only, but {world_size} ranks at "
            f"{ranks_per_node} per node span {nodes} nodes: the links between nodes were "
            "never measured; measure across at least two nodes, or "
            + (fix or f"put the target on one node (--ranks-per-node {world_size})")
        )


def predict_one(
    fits: dict[tuple[str, str], Fit], op: str, algo: str, world_size: int,
    ranks_per_node: int, size_bytes: int, requested_bytes: int | None = None, fix: str = "",
) -> Predicted | None:  # fmt: skip
    """The prediction of one design point (``requested_bytes``: what was asked for, when
    the op's layout made ``size_bytes`` of it); None when no fit can serve ``algo``."""
    found = source(fits, op, algo)
    if found is None:
        return None
    f, basis = found
    check_nodes(f, world_size, ranks_per_node, fix)
    p = f.predict(terms(op, algo, world_size, ranks_per_node, size_bytes))
    busbw = size_bytes / p.time_us / 1e3 * ops.get(op).busbw_factor(world_size)
    return Predicted(
        op, algo, world_size, nodes_of(world_size, ranks_per_node), size_bytes,
        size_bytes if requested_bytes is None else requested_bytes,
        p.time_us, p.low_us, p.high_us, busbw, basis,
    )  # fmt: skip


def wanted_algos(op: str, given: Sequence[str]) -> list[str]:
    return [a for a in algorithms_for(op) if not given or a in given]


def laid_out_bytes(op: str, requested_bytes: int, elem_bytes: int | None, world_size: int) -> int:
    """The size a sweep at ``world_size`` reports when asked for ``requested_bytes``
    (all_gather of 4K on 6 ranks: 4032 B; 0 when no whole chunk per rank is left); the
    request itself when the element size is unknown."""
    if elem_bytes is None:
        return requested_bytes
    return ops.get(op).layout(requested_bytes, elem_bytes, world_size).size_bytes


def predict_grid(
    fits: dict[tuple[str, str], Fit], op_sizes: dict[str, list[int]], targets: Iterable[int],
    ranks_per_node: int | None, algos: Sequence[str], elem_bytes: dict[str, int | None],
) -> list[Predicted]:  # fmt: skip
    """Predictions at every target, op, algorithm and size asked for, each at the size a
    sweep at that target would measure (once: requests that measure the same size, such
    as 4096 and 4080 B of all_gather at 6 ranks, keep the largest); ``ranks_per_node``
    None puts each target on one node."""
    targets = sorted(targets)
    if targets:
        # The largest target first: a refusal then names the --ranks-per-node that
        # serves every target. Only fits that serve a wanted algorithm: --algo ring must
        # not be refused for a tree fit it will not use.
        used = [source(fits, op, a) for op in op_sizes for a in wanted_algos(op, algos)]
        for f, _ in filter(None, used):
            check_nodes(f, targets[-1], ranks_per_node or targets[-1])
    out = []
    for world_size in targets:
        per_node = ranks_per_node or world_size
        for op, sizes in op_sizes.items():
            laid = {laid_out_bytes(op, r, elem_bytes.get(op), world_size): r for r in sorted(sizes)}
            for algo in wanted_algos(op, algos):
                for size, requested in sorted(laid.items()):
                    if size <= 0:
                        continue
                    p = predict_one(fits, op, algo, world_size, per_node, size, requested)
                    if p is not None:
                        out.append(p)
    return out


@dataclass(frozen=True)
class CrossRow:
    op: str
    world_size: int
    tree_algo: str
    crossing: Crossing
    #: False when, a factor of 4 below and above the crossover, the two predictions'
    #: 95% intervals overlap: noise could put the crossover anywhere (or nowhere).
    clear: bool = True


def crossovers(
    fits: dict[tuple[str, str], Fit], ops_wanted: Iterable[str], targets: Iterable[int],
    ranks_per_node: int | None, algos: Sequence[str],
) -> list[CrossRow]:  # fmt: skip
    """Where each tree algorithm and the ring swap places, per op and target N."""
    rows = []
    for op in ops_wanted:
        ring = source(fits, op, RING)
        tree_algos = [a for a in wanted_algos(op, algos) if a != RING]
        if ring is None or RING not in wanted_algos(op, algos):
            continue
        for world_size in targets:
            per_node = ranks_per_node or world_size
            for algo in tree_algos:
                tree = source(fits, op, algo)
                if tree is None:
                    continue
                crossing = models.crossover(
                    _ends(op, RING, world_size, per_node),
                    _ends(op, algo, world_size, per_node),
                    ring[0].params,
                    tree[0].params,
                )
                clear = _beyond_noise(crossing, (ring[0], tree[0]), op, algo, world_size, per_node)
                rows.append(CrossRow(op, world_size, algo, crossing, clear))
    return rows


#: How far from a crossover the two predictions are compared.
_CROSSING_FACTOR = 4.0


def _beyond_noise(
    crossing: Crossing, fitted: tuple[Fit, Fit], op: str, algo: str, world_size: int,
    per_node: int,
) -> bool:  # fmt: skip
    """Whether the ring and the tree separate beyond their 95% intervals on either side
    of the crossover (a crossover noise alone could not have made)."""
    if crossing.size_bytes is None:
        return True
    ring_fit, tree_fit = fitted
    for size in (crossing.size_bytes / _CROSSING_FACTOR, crossing.size_bytes * _CROSSING_FACTOR):
        ring = ring_fit.predict(terms(op, RING, world_size, per_node, max(1.0, size)))
        tree = tree_fit.predict(terms(op, algo, world_size, per_node, max(1.0, size)))
        if ring.high_us < tree.low_us or tree.high_us < ring.low_us:
            return True
    return False


def _ends(op: str, algo: str, world_size: int, ranks_per_node: int) -> tuple[Terms, Terms]:
    """The terms at 0 and 1 byte: the intercept and slope of the time line in the size."""
    return (
        terms(op, algo, world_size, ranks_per_node, 0),
        terms(op, algo, world_size, ranks_per_node, 1),
    )


def check_against(fits: dict[tuple[str, str], Fit], against: Sequence[Measured]) -> list[Checked]:
    """Predict every (op, N, size) of the --against runs and pair it with the measurement."""
    out = []
    for m in against:
        for size, time, requested in zip(m.size_bytes, m.time_us, m.requested_bytes, strict=True):
            p = predict_one(
                fits, m.op, m.algo, m.world_size, m.ranks_per_node, int(size),
                fix="check against a run on one node",
            )  # fmt: skip
            if p is None:
                raise UsageError(
                    f"--against run {m.run} has {m.op} ({m.algo}) rows, but the fitted runs "
                    f"hold no {m.op}: fit on runs of the same op"
                )
            error_pct = (p.time_us - float(time)) / float(time) * 100
            row = (m.op, m.algo, m.world_size, int(size), int(requested), p.time_us, float(time))
            out.append(Checked(*row, error_pct))
    return out


def largest_errors(
    checked: Sequence[Checked], min_size: int, elem_bytes: dict[str, int | None]
) -> dict[str, Checked]:
    """Per op, the row with the largest |error| from ``min_size`` up: at sizes of at
    least what a request of ``min_size`` measures at the row's ranks (4K takes all_gather's
    4032 B on 6 ranks), whatever the row's own requested_bytes says (an imported
    nccl-tests log may not know it)."""
    worst: dict[str, Checked] = {}
    for c in checked:
        if c.size_bytes < laid_out_bytes(c.op, min_size, elem_bytes.get(c.op), c.world_size):
            continue
        if c.op not in worst or abs(c.error_pct) > abs(worst[c.op].error_pct):
            worst[c.op] = c
    return worst


def size_text(size_bytes: float) -> str:
    """A size as the docs and output write it: 64K, 8M, or 1.46M when not exact."""
    whole = int(size_bytes)
    if whole == size_bytes and format_size(whole)[-1:] in "KMGT":
        return format_size(whole)
    return approx_size(size_bytes)
