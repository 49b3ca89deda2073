"""all_to_allv's buffers, call and exact verification, with the exchange done by hand.

As tests/unit/test_simulated_collectives.py does for every op: each rank's buffers are
made and filled as bench.py makes them, the exchange is done the way torch's
all_to_all_single does it with the split sizes the bound call passes, and every rank
verifies. Uneven patterns here; the uniform default is covered there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist

from colbench.bench import groups
from colbench.bench.ops.all_to_allv import AllToAllv
from colbench.bench.ops.base import Context
from colbench.bench.ops.data import DTYPES, NO_REDOP
from colbench.bench.plan import plan
from colbench.config.model import SweepConfig
from tests.unit.test_simulated_collectives import Ranks, sim_all_to_all_single

CPU = torch.device("cpu")
LARGEST, REQUESTED = 64 * 1024, 8 * 1024


def pattern_op(spec: str, tmp_path: Path) -> AllToAllv:
    if spec == "file":
        (tmp_path / "m.txt").write_text("0 4096 16 32\n4096 0 0 0\n100 200 300 400\n7 7 7 7000\n")
        spec = f"file:{tmp_path / 'm.txt'}"
    cfg = SweepConfig.of(ops=("all_to_allv",), sizes_bytes=(1024,), splits=spec, seed=5)
    (op,) = cfg.collectives()
    assert isinstance(op, AllToAllv)
    return op


def setup(op: AllToAllv, dtype: str, n: int) -> Ranks:
    ranks = []
    for rank in range(n):
        ctx = Context(rank, n, 0, DTYPES[dtype], NO_REDOP, seed=7, device=CPU)
        e = ctx.dtype.elem_bytes
        storage = op.allocate(op.layout(LARGEST, e, n), ctx, False)
        bufs = op.views(storage, op.layout(REQUESTED, e, n), ctx, False)
        op.fill(bufs, ctx)
        ranks.append((ctx, bufs))
    return ranks


PATTERNS = ["zipf:1.2", "topk:64,8,12,2", "spread:1", "file"]


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("spec", PATTERNS)
def test_uneven_exchanges_verify_exactly(spec: str, n: int, dtype: str, tmp_path: Path) -> None:
    op = pattern_op(spec, tmp_path)
    assert op.unsupported(n, "gloo") is None
    ranks = setup(op, dtype, n)
    # Nothing exchanged yet: the poisoned outputs are wrong wherever data was due.
    assert sum(op.count_wrong(b, c) for c, b in ranks) == sum(b.recv.numel() for _, b in ranks)
    sim_all_to_all_single(op, ranks)
    for ctx, bufs in ranks:
        assert op.count_wrong(bufs, ctx) == 0, ctx.rank
        if bufs.recv.numel():
            i = bufs.recv.numel() // 2
            bufs.recv[i] += 1
            assert op.count_wrong(bufs, ctx) == 1
            bufs.recv[i] -= 1


def test_segments_from_the_wrong_sender_are_caught(tmp_path: Path) -> None:
    op = pattern_op("file", tmp_path)
    ranks = setup(op, "float32", 4)
    sim_all_to_all_single(op, ranks)
    ctx, bufs = ranks[0]
    # Rank 0's segment from rank 1, one element off (a backend mixing up offsets).
    seg = op.segments(bufs.layout, 0)
    start, length = seg.recv[0], seg.recv[1]
    assert length > 1
    bufs.recv[start : start + length] = bufs.recv[start : start + length].roll(1)
    assert op.count_wrong(bufs, ctx) > length // 2


def test_the_bound_call_passes_the_matrix_as_split_sizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call NCCL and gloo receive alike: torch's all_to_all_single with the rank's row
    of the matrix as input splits and its column as output splits, in elements, on the
    measured group. A recorder stands in for torch.distributed's collective."""
    calls: list[dict[str, Any]] = []

    def record(output: Any, input: Any, **kwargs: Any) -> None:
        calls.append({"output": output, "input": input, **kwargs})

    monkeypatch.setattr(dist, "all_to_all_single", record)
    op = pattern_op("file", tmp_path)
    group = object()
    n, e = 4, 4
    layout = op.layout(REQUESTED, e, n)
    cells = op.splits.cells(REQUESTED, n) // e
    for rank in range(n):
        ctx = Context(rank, n, 0, DTYPES["float32"], NO_REDOP, 0, CPU, group=group)
        storage = op.allocate(layout, ctx, False)
        bufs = op.views(storage, layout, ctx, False)
        op.bind(bufs, ctx)()
        call = calls[-1]
        assert call["input_split_sizes"] == cells[rank].tolist()
        assert call["output_split_sizes"] == cells[:, rank].tolist()
        assert call["group"] is group
        assert call["input"].numel() == cells[rank].sum() and call["output"] is bufs.recv
    assert len(calls) == n


def test_plan_digest_tells_two_traffic_matrices_apart(tmp_path: Path) -> None:
    from colbench.bench.plan import plan_digest

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "m.txt").write_text("1 2\n3 4\n")
    (tmp_path / "b" / "m.txt").write_text("1 2\n3 5\n")
    digests = set()
    for where in ("a", "b"):
        cfg = SweepConfig.of(
            ops=("all_to_allv",), sizes_bytes=(1024,), splits=f"file:{tmp_path / where / 'm.txt'}"
        )
        # What a rank of another node would see: the same flags, another file's contents.
        digests.add(plan_digest(cfg.replace(splits="file:m.txt"), plan(cfg, 2, "gloo")))
    assert len(digests) == 2


def test_splits_without_all_to_allv_say_they_do_nothing() -> None:
    from colbench.config.validate import validate_for_world

    idle = SweepConfig.of(ops=("all_reduce",), sizes_bytes=(1024,), splits="zipf:1")
    assert "--splits zipf:1 has no effect: no op measured takes it" in validate_for_world(
        idle, 2, "gloo"
    )
    used = idle.replace(ops=("all_reduce", "all_to_allv"))
    assert not any("--splits" in note for note in validate_for_world(used, 2, "gloo"))


def test_mod_split_makes_strided_groups() -> None:
    assert groups.strided(8, 4) == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert groups.members(None, 2, 4) == [(0, 2), (1, 3)]
    assert groups.members(2, None, 4) == [(0, 1), (2, 3)]
    assert groups.members(None, None, 4) is None
    with pytest.raises(ValueError):
        groups.strided(6, 4)
    asked: list[list[int]] = []

    def new_group(ranks: list[int], timeout: object) -> str:
        asked.append(ranks)
        return f"group{ranks}"

    # Every rank creates every group, in order; rank 3's is (1, 3), where it is rank 1.
    mine = groups.split_world(groups.members(None, 2, 4) or [], 3, 30.0, new_group)
    assert asked == [[0, 2], [1, 3]]
    assert (mine.ranks, mine.rank, mine.count, mine.group) == ((1, 3), 1, 2, "group[1, 3]")


@pytest.mark.parametrize(
    ("group_size", "group_mod", "world", "label"),
    [(None, None, 4, ""), (2, None, 4, "div:2"), (4, None, 4, ""), (None, 2, 4, "mod:2"),
     (None, 1, 4, ""), (None, 4, 4, "mod:4")],
)  # fmt: skip
def test_the_split_column(
    group_size: int | None, group_mod: int | None, world: int, label: str
) -> None:
    assert groups.split_label(group_size, group_mod, world) == label
