"""The contract every collective fulfils (learned from nccl-tests' ``struct testColl``).

The driver never branches on a collective's name: it asks the op for its layout,
bus-bandwidth factor, buffers, data, one call, and a wrong-element count. Every op is
timed by one function, :meth:`colbench.bench.loop.RankBench.bench_time`; each
``colbench/bench/ops/<name>.py`` subclasses :class:`Collective` once.

Op modules import torch inside the methods that use it, so the registry's names, layouts
and ``explain`` texts load without it (``colbench --help`` and usage errors do not pay
for its import); :meth:`Collective.bind` resolves it once, outside the timed call.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from colbench.bench.ops.data import DType, torch_redop

if TYPE_CHECKING:
    import torch
    import torch.distributed as dist


#: The engine (--engine) of the contract's own torch calls (:meth:`Collective.bind`).
TORCH = "torch"


class DirectComm(Protocol):
    """What an op asks of an NCCL communicator it calls directly (--engine direct;
    colbench.direct.nccl4py's ``DirectComm`` is one): declared here so the ops need nothing
    from colbench.direct, which imports them."""

    @property
    def native_exchange(self) -> bool: ...
    def dtype(self, name: str) -> int: ...
    def redop(self, name: str) -> int: ...
    def call(self, function: str, *args: Any) -> Callable[[], object]: ...
    def grouped(self, calls: Sequence[Callable[[], object]]) -> Callable[[], object]: ...
    def send(self, ptr: int, count: int, dtype: int, peer: int) -> Callable[[], object]: ...
    def recv(self, ptr: int, count: int, dtype: int, peer: int) -> Callable[[], object]: ...


class OpSettings(Protocol):
    """What of a sweep's settings an op is configured by (colbench.config.model's
    ``MeasureConfig`` is one): declared here so the ops, which the config's registry
    imports, need nothing from the config back."""

    @property
    def splits(self) -> str: ...
    @property
    def seed(self) -> int: ...


@dataclass(frozen=True)
class Layout:
    """How a requested message size maps onto buffers, in nccl-tests' terms."""

    #: Elements nccl-tests reports in its ``count`` column.
    count: int
    #: Bytes nccl-tests reports in its ``size`` column; the numerator of algbw.
    size_bytes: int
    #: Elements in one rank's input and output buffer (largest over ranks).
    send_numel: int
    recv_numel: int
    #: Uneven exchanges (all_to_allv): what size_bytes, the busiest rank's, hides. Bytes
    #: the mean rank sends (= receives), and the largest rank's bytes sent and received
    #: over that mean; None where every rank moves the same.
    mean_bytes: float | None = None
    send_imbalance: float | None = None
    recv_imbalance: float | None = None


@dataclass(frozen=True)
class Context:
    """Everything one rank needs to run and verify one (op, dtype, redop) combination."""

    rank: int
    """This process's rank within the group the collective runs on."""
    world_size: int
    """Ranks in that group: the ``n`` of the bandwidth formulas."""
    root: int
    """Root as a rank within the group (rooted ops only)."""
    dtype: DType
    redop: str
    """Reduction name (``sum``...) or ``none`` for ops that do not reduce."""
    seed: int
    device: torch.device
    group: Any = None
    """torch ProcessGroup, or None for the default (world) group."""
    global_ranks: tuple[int, ...] = ()
    """Global rank of each group rank; torch's point-to-point and root arguments are global."""

    def global_rank(self, group_rank: int) -> int:
        return self.global_ranks[group_rank] if self.global_ranks else group_rank

    @functools.cached_property
    def reduce_op(self) -> dist.ReduceOp:
        # Cached: run() reads it inside the timed loop, where every lookup is overhead.
        return torch_redop(self.redop)


@dataclass
class Buffers:
    """Views for one size. ``send`` and ``recv`` may alias (in-place)."""

    send: torch.Tensor
    recv: torch.Tensor
    in_place: bool
    layout: Layout
    #: Per-rank chunk views for list-based APIs (gather, scatter).
    chunks: list[torch.Tensor] = field(default_factory=list)


@dataclass
class Storage:
    """Flat tensors allocated once for the largest size; smaller sizes use views."""

    send: torch.Tensor
    recv: torch.Tensor


#: Makes one flat tensor: (numel, torch dtype, device) -> tensor.
Allocator = Callable[[int, Any, Any], Any]


def _torch_empty(numel: int, dtype: Any, device: Any) -> Any:
    import torch

    return torch.empty(numel, dtype=dtype, device=device)


def ptr(tensor: torch.Tensor) -> int:
    """A tensor's device address, for NCCL's calls."""
    return int(tensor.data_ptr())


def whole_buffer(requested_bytes: int, elem_bytes: int) -> Layout:
    """Ops whose reported size is the whole buffer (all_reduce, broadcast, reduce, sendrecv)."""
    count = requested_bytes // elem_bytes
    return Layout(count, count * elem_bytes, count, count)


def per_rank_chunk(requested_bytes: int, elem_bytes: int, world_size: int) -> int:
    """Elements each rank contributes, nccl-tests style: split by rank, 16-byte aligned."""
    chunk_bytes = (requested_bytes // elem_bytes // world_size) * elem_bytes
    return (chunk_bytes - chunk_bytes % 16) // elem_bytes


@dataclass(frozen=True)
class RingCost:
    """How a ring (or pipelined chain) implementation of a collective loads one rank, in
    the terms of colbench.commands.predict's cost models: rounds of N-1 steps, bytes sent and bytes
    reduced by the busiest rank, as multiples of the reported size S."""

    passes: int
    """Rounds of N-1 ring steps (all_reduce: a reduce-scatter, then an all-gather)."""
    shares: bool
    """True: each round sends the (N-1)/N of S a rank lacks; False: a pipelined chain
    forwards all of S."""
    reduces: bool
    """Whether the bytes received are combined with the rank's own."""
    description: str
    """One line for predict's output and docs."""

    def terms(self, world_size: int, size_bytes: float) -> tuple[float, float, float]:
        """(steps, bytes sent, bytes reduced) of the busiest rank."""
        moved = (world_size - 1) / world_size * size_bytes if self.shares else size_bytes
        return self.passes * (world_size - 1), self.passes * moved, moved if self.reduces else 0.0


class Collective:
    """One collective. Subclasses set the class attributes and implement the methods."""

    name: ClassVar[str]
    #: One line for ``colbench explain``.
    summary: ClassVar[str]
    #: How size, count and algbw are defined, for ``colbench explain``; by default those of
    #: an op whose reported size is the whole buffer (all_reduce, broadcast, reduce, sendrecv).
    size_rule: ClassVar[str] = "size_bytes = the whole buffer (count * element size)"
    count_rule: ClassVar[str] = "count = elements in the buffer"
    busbw_rule: ClassVar[str]
    #: The torch.distributed call that is timed.
    torch_call: ClassVar[str]
    uses_redop: ClassVar[bool] = False
    rooted: ClassVar[bool] = False
    #: Size-less ops (barrier) run once per sweep with size 0.
    sized: ClassVar[bool] = True
    #: Placements torch offers for this op: "out" (separate buffers) and/or "in".
    placements: ClassVar[tuple[str, ...]] = ("out", "in")
    #: What a reader of this op's rows should know, shown under its section of the table
    #: and by ``colbench explain`` (a missing placement: why its columns say n/a).
    notes: ClassVar[str] = ""
    #: More for ``colbench explain``, (label, text) per line: what an op's own options
    #: mean (all_to_allv's patterns) and the columns only it fills.
    details: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: The NCCL function this collective calls (AllReduce, AllGather...): NCCL's rules for
    #: it decide which algorithms may run (colbench.nccl.algo) and its TUNING lines say
    #: which one did. Empty: NCCL builds it from point-to-point calls, which ``NCCL_ALGO``
    #: does not govern.
    nccl_function: ClassVar[str] = ""
    #: The (dtype, redop) of that NCCL call when the op makes a call of its own instead of
    #: the row's (barrier: one float32 summed); None: the row's.
    nccl_call_type: ClassVar[tuple[str, str] | None] = None
    #: The ring cost model of this collective (``colbench predict``); None: no model.
    ring_cost: ClassVar[RingCost | None] = None
    #: Whether the call can be captured in a CUDA graph (``--cuda-graph``).
    graph_capturable: ClassVar[bool] = True
    #: Whether the call returns only once every rank is done (barrier: torch waits on the
    #: device inside it). Such a call is timed with the host clock on every device: CUDA
    #: events around it would time a stream synchronisation and the next launch.
    blocks_host: ClassVar[bool] = False
    #: The nccl-tests program that measures this collective (``colbench crosscheck``);
    #: empty when nccl-tests has none.
    nccl_tests_binary: ClassVar[str] = ""
    #: Names traces give this call (torch's profiler, flight recorder, PARAM) beside the
    #: op's own, folded as ``colbench replay`` compares them: lower case, no backend
    #: prefix, no underscores (``_allgather_base`` -> ``allgatherbase``).
    traced_names: ClassVar[tuple[str, ...]] = ()
    #: Every rank sends its own bytes to every other: off a node they share its link
    #: (colbench.hardware.node), and a trace's split sizes tell its even form from
    #: its uneven one (colbench.commands.replay).
    exchange: ClassVar[bool] = False
    #: An exchange whose per-peer sizes come from a traffic matrix (--splits), not from
    #: the size alone.
    uneven_splits: ClassVar[bool] = False

    def configured(self, measure: OpSettings) -> Collective:
        """This op as the sweep's options shape it (all_to_allv: its --splits); most
        ops have nothing to configure and are their own registry entry."""
        return self

    #: One line for the row's ``splits`` column: the pattern of an uneven exchange.
    splits_label: str = ""

    def layout(self, requested_bytes: int, elem_bytes: int, world_size: int) -> Layout:
        return whole_buffer(requested_bytes, elem_bytes)

    def busbw_factor(self, world_size: int) -> float:
        raise NotImplementedError

    def unsupported(self, world_size: int, backend: str) -> str | None:
        """Why this op cannot run at this world size on this backend, or None."""
        return None

    def allocate(
        self, layout: Layout, ctx: Context, in_place: bool, empty: Allocator = _torch_empty
    ) -> Storage:
        """``empty(numel, dtype, device)`` makes each flat tensor (the direct engine's
        comes from ncclMemAlloc); torch.empty without it."""
        dtype, device = ctx.dtype.torch, ctx.device
        if in_place:
            flat = empty(max(layout.send_numel, layout.recv_numel), dtype, device)
            return Storage(flat, flat)
        return Storage(
            empty(layout.send_numel, dtype, device), empty(layout.recv_numel, dtype, device)
        )

    def views(self, storage: Storage, layout: Layout, ctx: Context, in_place: bool) -> Buffers:
        """Buffers for ``layout`` carved out of storage sized for a larger layout."""
        return Buffers(
            storage.send[: layout.send_numel], storage.recv[: layout.recv_numel], in_place, layout
        )

    def fill(self, bufs: Buffers, ctx: Context) -> None:
        """Deterministic inputs for this rank; outputs poisoned so missed writes show."""
        raise NotImplementedError

    def bind(self, bufs: Buffers, ctx: Context) -> Callable[[], object]:
        """Exactly one blocking call of the collective, the only thing inside a timed
        region, with every argument resolved once, outside it. Ops that are one torch call
        return it through :func:`bound_call`, so the timed loop calls straight into torch,
        as a hand-written loop would."""
        raise NotImplementedError

    def direct(self, bufs: Buffers, ctx: Context, comm: DirectComm) -> Callable[[], object]:
        """The timed call through NCCL itself (``--engine nccl``, colbench.direct): the same
        buffers and semantics as :meth:`bind`, as nccl-tests makes the call, with pointers,
        counts and NCCL's type numbers resolved here, once per size."""
        raise NotImplementedError(f"{self.name} has no direct NCCL call")

    def direct_unsupported(self) -> str | None:
        """Why :meth:`direct` cannot measure this op, or None."""
        return None

    def count_wrong(self, bufs: Buffers, ctx: Context) -> int:
        """Wrong elements in this rank's output after one :meth:`run` on fresh :meth:`fill`."""
        raise NotImplementedError

    def algbw_gbps(self, size_bytes: float, time_us: float) -> float:
        """nccl-tests' algorithm bandwidth: size / time, in GB/s (1e9 bytes/s)."""
        return size_bytes / time_us / 1e3 if time_us > 0 else 0.0


def bound_call(fn: Callable[..., object], *args: Any, **kwargs: Any) -> Callable[[], object]:
    """``fn`` with its arguments fixed, passed positionally, trailing defaults left out.

    A ``functools.partial`` with keywords builds a dict on every call, and torch's
    collectives take them again through their logging wrapper: at a 4-byte gloo all_reduce
    that was 2% of the call (benchmarks/harness_overhead.py). ``all_reduce(t, op=SUM,
    group=None)`` becomes ``all_reduce(t)``, the hand-written loop's call. Keyword-only
    arguments stay keywords.
    """
    signature = inspect.signature(fn)
    bound = signature.bind(*args, **kwargs)
    positional: list[Any] = []
    defaults: list[Any] = []
    keywords: dict[str, Any] = {}
    for param in signature.parameters.values():
        given = param.name in bound.arguments
        if param.kind is inspect.Parameter.KEYWORD_ONLY:
            if given:
                keywords[param.name] = bound.arguments[param.name]
        elif param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            positional.append(bound.arguments[param.name] if given else param.default)
            defaults.append(param.default)
        elif given:  # *args or **kwargs: a wrapper's own signature; keep the call as given
            return functools.partial(fn, *args, **kwargs)
    while positional and positional[-1] is defaults[len(positional) - 1]:
        positional.pop()
    return functools.partial(fn, *positional, **keywords)


class ChunkedCollective(Collective):
    """A collective that moves n chunks of b elements between one whole buffer of n*b
    and one chunk per rank (all_gather, gather, reduce_scatter, scatter).

    The reported size is the whole buffer, nccl-tests' convention. In place, the rank's
    chunk is its own slot of the whole buffer, as nccl-tests lays it out; for a rooted
    op only the root has both buffers, so only the root's chunk is a slot.
    """

    #: True: the whole buffer is the output (all_gather, gather); False: the input
    #: (reduce_scatter, scatter).
    gathers: ClassVar[bool]

    def layout(self, requested_bytes: int, elem_bytes: int, world_size: int) -> Layout:
        b = per_rank_chunk(requested_bytes, elem_bytes, world_size)
        whole, one = b * world_size, b
        send, recv = (one, whole) if self.gathers else (whole, one)
        return Layout(b, whole * elem_bytes, send, recv)

    def views(self, storage: Storage, layout: Layout, ctx: Context, in_place: bool) -> Buffers:
        b = layout.count
        if self.gathers:
            whole, single_storage = storage.recv[: layout.recv_numel], storage.send
        else:
            whole, single_storage = storage.send[: layout.send_numel], storage.recv
        own_slot = in_place and (not self.rooted or ctx.rank == ctx.root)
        single = whole[ctx.rank * b : (ctx.rank + 1) * b] if own_slot else single_storage[:b]
        send, recv = (single, whole) if self.gathers else (whole, single)
        # torch's rooted calls (gather, scatter) take a list of per-rank chunk tensors.
        chunks = list(whole.split(b)) if self.rooted and b else []
        return Buffers(send, recv, in_place, layout, chunks)
