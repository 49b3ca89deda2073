"""Deterministic inputs and exact verification (colbench.bench.ops.data), no process group."""

from __future__ import annotations

import pytest
import torch

from colbench.bench.ops import data
from colbench.bench.ops.base import Context
from colbench.bench.ops.data import DTYPES, REDOPS, DType, redop_supported

CPU = torch.device("cpu")
WORLD_SIZES = (1, 2, 3, 8, 300)
# Two index windows: the start of a buffer and far into a large one.
WINDOWS = ((0, 1500), (3_000_001, 3_000_301))


def ctx_for(dtype: DType, redop: str, n: int, rank: int = 0, seed: int = 0) -> Context:
    return Context(rank=rank, world_size=n, root=0, dtype=dtype, redop=redop, seed=seed, device=CPU)


def valid_pairs() -> list[tuple[str, str]]:
    return [(d, r) for d in DTYPES for r in REDOPS if redop_supported(r, DTYPES[d]) is None]


def exact_reduction(kind: str, ctx: Context, lo: int, hi: int) -> torch.Tensor:
    """The reduction in int64 (sum, prod, min, max) or float64 (avg), ranks in order."""
    inputs = torch.stack([data.raw_values(kind, r, lo, hi, ctx) for r in range(ctx.world_size)])
    if kind in ("sum", "avg"):
        total = inputs.sum(0)
        return total.to(torch.float64) / ctx.world_size if kind == "avg" else total
    if kind == "prod":
        return inputs.prod(0)
    return inputs.amin(0) if kind == "min" else inputs.amax(0)


def poison_of(dtype: DType) -> torch.Tensor:
    out = torch.empty(1, dtype=dtype.torch)
    data.poison(out)
    return out


def test_avg_is_offered_for_float_dtypes_only() -> None:
    pairs = valid_pairs()
    assert {d for d, r in pairs if r == "avg"} == {d for d, t in DTYPES.items() if t.is_float}
    assert {r for _, r in pairs} == set(REDOPS)


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize(("dtype_name", "redop"), valid_pairs())
def test_expected_reduction_is_exact(dtype_name: str, redop: str, n: int) -> None:
    dtype = DTYPES[dtype_name]
    for seed in (0, 5) if n < 100 else (5,):
        ctx = ctx_for(dtype, redop, n, seed=seed)
        for lo, hi in WINDOWS if n < 100 else WINDOWS[1:]:
            for rank in (0, n // 2, n - 1):
                raw = data.raw_values(redop, rank, lo, hi, ctx)
                assert raw.dtype == torch.int64
                assert int(raw.min()) >= 0
                # Every input is exact in the dtype.
                cast = data.values(redop, rank, lo, hi, ctx)
                assert cast.dtype == dtype.torch
                assert torch.equal(cast.to(torch.int64), raw)
            want = exact_reduction(redop, ctx, lo, hi)
            got = data.reduced_values(lo, hi, ctx)
            assert got.dtype == dtype.torch
            if redop == "avg":
                # The sum is exact in the dtype; only the final division rounds, once.
                total = (want * n).round()
                assert torch.equal(total.to(dtype.torch).to(torch.float64), total)
                assert torch.equal(got, want.to(dtype.torch))
                eps = torch.finfo(dtype.torch).eps
                assert ((got.to(torch.float64) - want).abs() <= eps * want.abs()).all()
            else:
                assert torch.equal(got.to(torch.int64), want), (dtype_name, redop, n, seed)
                assert int(want.max()) <= dtype.exact_limit


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_copy_values_are_exact_and_differ_between_ranks(dtype_name: str, n: int) -> None:
    ctx = ctx_for(DTYPES[dtype_name], "none", n)
    for rank in {0, n - 1}:
        raw = data.raw_values("copy", rank, 0, 1000, ctx)
        assert int(raw.min()) >= 0
        assert torch.equal(data.values("copy", rank, 0, 1000, ctx).to(torch.int64), raw)
    if n > 1:
        # A block from the wrong rank is caught at (nearly) every element.
        a = data.values("copy", 0, 0, 1000, ctx)
        b = data.values("copy", 1, 0, 1000, ctx)
        assert int((a != b).sum()) >= 950


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_poison_is_never_generated(dtype_name: str, n: int) -> None:
    dtype = DTYPES[dtype_name]
    bad = poison_of(dtype)
    view = data.int_view(dtype.elem_bytes)
    kinds = ["copy", *(r for r in REDOPS if redop_supported(r, dtype) is None)]
    for kind in kinds:
        ctx = ctx_for(dtype, kind, n, seed=3)
        for rank in {0, n - 1}:
            vals = data.values(kind, rank, 0, 2000, ctx)
            assert not (vals.view(view) == bad.view(view)).any(), (kind, rank)
        if kind != "copy":
            red = data.reduced_values(0, 2000, ctx)
            assert not (red.view(view) == bad.view(view)).any(), kind


@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_worst_case_sum_is_exact_at_every_world_size(dtype_name: str) -> None:
    # Every rank's sum/avg input ranges over the same values, so n times the largest one
    # bounds the sum; it must stay within the dtype's exact integers for any n.
    dtype = DTYPES[dtype_name]
    for n in range(1, 1025):
        ctx = ctx_for(dtype, "sum", n)
        largest = int(data.raw_values("sum", n - 1, 0, 64, ctx).max())
        assert largest * n <= dtype.exact_limit or largest <= 1, n


@pytest.mark.parametrize("n", [*range(1, 64), 85, 127, 128, 255, 256, 300])
def test_uint8_sums_never_reach_the_poison_value(n: int) -> None:
    # uint8 poisons with 255, the one non-negative poison: a sum must never hit it.
    ctx = ctx_for(DTYPES["uint8"], "sum", n)
    assert int(data.reduced_values(0, 512, ctx).max()) < 255


def _flip_low_bit(t: torch.Tensor, positions: list[int]) -> None:
    view = t.view(data.int_view(t.element_size()))
    for i in positions:
        view[i] ^= 1


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize(("dtype_name", "redop"), valid_pairs())
def test_count_wrong_counts_exactly(dtype_name: str, redop: str, n: int) -> None:
    dtype = DTYPES[dtype_name]
    ctx = ctx_for(dtype, redop, n, rank=n - 1, seed=1)
    offset = 777

    # The expectation is computed once (it is checked above); slices of it are handed out.
    want = data.reduced_values(offset, offset + 1000, ctx)

    def expect(lo: int, hi: int) -> torch.Tensor:
        return want[lo - offset : hi - offset]

    actual = want.clone()
    assert data.count_wrong(actual, expect, ctx, offset=offset) == 0
    positions = [0, 1, 499, 998, 999]
    if redop == "avg":
        # A one-ulp difference is rounding, not an error...
        rounded = actual.clone()
        _flip_low_bit(rounded, positions)
        assert data.count_wrong(rounded, expect, ctx, offset=offset) == 0
        # ...but a wrong value is.
        corrupt = actual.clone()
        corrupt[positions] += 1
    else:
        corrupt = actual.clone()
        _flip_low_bit(corrupt, positions)
    assert data.count_wrong(corrupt, expect, ctx, offset=offset) == len(positions)
    # Three more elements never written (still poisoned); 0 and 1 were already wrong.
    data.poison(corrupt[:3])
    assert data.count_wrong(corrupt, expect, ctx, offset=offset) == len(positions) + 1


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize(("dtype_name", "redop"), valid_pairs())
def test_data_shifted_by_one_element_is_caught(dtype_name: str, redop: str, n: int) -> None:
    ctx = ctx_for(DTYPES[dtype_name], redop, n)

    def expect(lo: int, hi: int) -> torch.Tensor:
        return data.reduced_values(lo, hi, ctx)

    assert data.count_wrong(expect(1001, 2001), expect, ctx, offset=1000) > 0


@pytest.mark.parametrize(
    ("redop", "n", "shift"),
    [
        ("sum", 2, 1024),  # reduce_scatter: rank 0 handed rank 1's chunk of 1024 elements
        ("sum", 3, 64),
        ("avg", 3, 8),
        ("prod", 3, 4),
        ("sum", 8, 1),  # n = 8: the expected sum is 28 at every element
        ("sum", 16, 3),
    ],
)
def test_data_from_another_chunk_is_caught(redop: str, n: int, shift: int) -> None:
    ctx = ctx_for(DTYPES["float32"], redop, n)

    def expect(lo: int, hi: int) -> torch.Tensor:
        return data.reduced_values(lo, hi, ctx)

    assert data.count_wrong(expect(shift, shift + 1000), expect, ctx) > 0


def test_avg_tolerance_accepts_a_division_done_in_the_dtype() -> None:
    # A backend that sums then divides in bfloat16 rounds differently from float64.
    for n in (3, 7, 8, 300):
        ctx = ctx_for(DTYPES["bfloat16"], "avg", n)
        total = exact_reduction("sum", ctx, 0, 4000).to(torch.bfloat16)
        backend = total / n
        expect = lambda lo, hi, c=ctx: data.reduced_values(lo, hi, c)  # noqa: E731
        assert data.count_wrong(backend, expect, ctx) == 0


def test_work_is_chunked_at_chunk_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data, "CHUNK_ELEMS", 7)
    ctx = ctx_for(DTYPES["float32"], "none", 3, rank=1, seed=2)

    def make(lo: int, hi: int) -> torch.Tensor:
        return data.values("copy", 1, lo, hi, ctx)

    out = torch.empty(50, dtype=torch.float32)
    data.fill(out, make, offset=100)
    assert torch.equal(out, make(100, 150))
    assert data.count_wrong(out, make, ctx, offset=100) == 0
    out[[0, 6, 7, 13, 14, 49]] = -5.0
    assert data.count_wrong(out, make, ctx, offset=100) == 6


def test_count_wrong_blocks_checks_each_rank_block() -> None:
    ctx = ctx_for(DTYPES["int32"], "none", 4)
    block, offset = 10, 20
    blocks = [data.values("copy", src, offset, offset + block, ctx) for src in range(4)]
    out = torch.cat(blocks)
    assert data.count_wrong_blocks(out, block, ctx, offset) == 0
    # Two ranks' blocks swapped: both blocks wrong at every element.
    swapped = torch.cat([blocks[1], blocks[0], blocks[2], blocks[3]])
    assert data.count_wrong_blocks(swapped, block, ctx, offset) == 2 * block
    out[35] += 1
    assert data.count_wrong_blocks(out, block, ctx, offset) == 1


def test_poison_values() -> None:
    assert int(poison_of(DTYPES["uint8"])) == 255
    for name in ("int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"):
        assert float(poison_of(DTYPES[name])) == -1.0


def test_seed_changes_the_data() -> None:
    dtype = DTYPES["float32"]
    a = data.values("copy", 0, 0, 100, ctx_for(dtype, "none", 2, seed=0))
    b = data.values("copy", 0, 0, 100, ctx_for(dtype, "none", 2, seed=1))
    assert not torch.equal(a, b)
    again = data.values("copy", 0, 0, 100, ctx_for(dtype, "none", 2, seed=0))
    assert torch.equal(a, again)
