"""Building and validating a SweepConfig (colbench.config.model), no process group."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from colbench.config import model, options
from colbench.config import validate as config
from colbench.config.model import SweepConfig
from colbench.config.validate import validate, validate_for_world
from colbench.errors import UsageError

K, M = 1024, 1024**2


def build(**overrides: Any) -> SweepConfig:
    kwargs: dict[str, Any] = {
        "op": "all_reduce",
        "sizes": (K, 4 * K),
        "dtype": "float32",
        "redop": "sum",
    }
    kwargs.update(overrides)
    return config.build(**kwargs)


def test_build_normalises_names() -> None:
    cfg = build(op="allreduce,all-gather", dtype="float,bf16", redop="SUM,max")
    assert cfg.measure.ops == ("all_reduce", "all_gather")
    assert cfg.measure.dtypes == ("float32", "bfloat16")
    assert cfg.measure.redops == ("sum", "max")
    assert cfg.measure.sizes_bytes == (K, 4 * K)


def test_build_all_expands() -> None:
    cfg = build(op="all", dtype="all", redop="all")
    assert "barrier" in cfg.measure.ops and len(cfg.measure.ops) == 11
    assert len(cfg.measure.dtypes) == 8
    assert cfg.measure.redops == ("sum", "prod", "min", "max", "avg")


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"op": "all_scream"}, "unknown op"),
        ({"op": ","}, "empty --op"),
        ({"dtype": "float128"}, "unknown dtype"),
        ({"dtype": ""}, "empty --dtype"),
        ({"redop": "median"}, "unknown reduction"),
        ({"redop": "avg", "dtype": "int32"}, "avg needs a floating-point dtype"),
        ({"redop": "avg", "dtype": "int8,uint8"}, "avg needs a floating-point dtype"),
        ({"sizes": ()}, "no sizes"),
        ({"iters": 0}, "--iters"),
        ({"warmup": -1}, "--warmup"),
        ({"nprocs": 0}, "--nprocs"),
        ({"root": -2}, "--root"),
        ({"timeout_s": 0.0}, "--timeout"),
        ({"placements": ("out",)}, "none of the chosen ops"),
    ],
)
def test_build_errors(overrides: dict[str, Any], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        build(**overrides)


def test_avg_with_a_float_among_int_dtypes_is_fine() -> None:
    cfg = build(redop="avg", dtype="int32,float32")
    assert cfg.measure.dtypes == ("int32", "float32")


def test_avg_on_ints_does_not_block_ops_that_do_not_reduce() -> None:
    cfg = build(op="all_reduce,all_gather", redop="avg", dtype="int32")
    assert cfg.measure.ops == ("all_reduce", "all_gather")


def test_ops_that_do_not_reduce_ignore_the_redop() -> None:
    cfg = build(op="all_gather", redop="avg", dtype="int32")
    assert cfg.measure.ops == ("all_gather",)


def test_validate_checks_a_directly_built_config() -> None:
    with pytest.raises(UsageError, match="--iters"):
        validate(SweepConfig.of(sizes_bytes=(K,), iters=0))
    validate(SweepConfig.of(sizes_bytes=(K,)))


def test_resolve_sizes_default_range() -> None:
    sizes = config.resolve_sizes(None, None, None, None, None)
    assert sizes[0] == K and sizes[-1] == 16 * M
    assert len(sizes) == 15


def test_resolve_sizes_spec() -> None:
    assert config.resolve_sizes("1K,4K", None, None, None, None) == (K, 4 * K)
    assert config.resolve_sizes("1K-64K", None, None, 4.0, None) == (K, 4 * K, 16 * K, 64 * K)
    assert config.resolve_sizes("1K-4K", None, None, None, "1K") == (K, 2 * K, 3 * K, 4 * K)


@pytest.mark.parametrize(("minbytes", "maxbytes"), [("1K", None), (None, "1K"), ("1K", "4K")])
def test_resolve_sizes_refuses_sizes_with_b_or_e(
    minbytes: str | None, maxbytes: str | None
) -> None:
    with pytest.raises(UsageError, match="not both"):
        config.resolve_sizes("1K-1M", minbytes, maxbytes, None, None)


def test_resolve_sizes_b_or_e_alone_takes_nccl_tests_other_end() -> None:
    # nccl-tests' -b and -e both default to 32M, and -i to 1M.
    alone = config.resolve_sizes(None, "4K", None, None, None)
    assert alone == tuple(range(4 * K, 32 * M + 1, M)) and len(alone) == 32
    assert config.resolve_sizes(None, "4K", None, 2, None)[-1] == 32 * M
    assert config.resolve_sizes(None, None, "64M", None, None) == tuple(range(32 * M, 65 * M, M))
    assert config.resolve_sizes(None, "32M", None, None, None) == (32 * M,)
    with pytest.raises(UsageError, match="nccl-tests' default -b is 32M"):
        config.resolve_sizes(None, None, "4K", None, None)
    with pytest.raises(UsageError, match="nccl-tests' default -e is 32M"):
        config.resolve_sizes(None, "64M", None, None, None)


def test_resolve_sizes_b_e_f_i_like_nccl_tests() -> None:
    # nccl-tests' -f defaults to 1 (off): -b/-e alone step by -i, whose default is 1M.
    assert config.resolve_sizes(None, "8", "128", None, None) == (8,)
    assert config.resolve_sizes(None, "1K", "4K", None, None) == (K,)
    assert config.resolve_sizes(None, "1M", "3M", None, None) == (M, 2 * M, 3 * M)
    assert config.resolve_sizes(None, "8", "128", 2, None) == (8, 16, 32, 64, 128)
    assert config.resolve_sizes(None, "1K", "1M", 32, None) == (K, 32 * K, M)
    assert config.resolve_sizes(None, "100", "400", None, "100") == (100, 200, 300, 400)
    # Both -f and -i: nccl-tests steps by the factor when it is above 1.
    assert config.resolve_sizes(None, "1K", "4K", 2, "1K") == (K, 2 * K, 4 * K)
    # -f 1 is nccl-tests' "step by -i", whichever way the range is given.
    assert config.resolve_sizes(None, "100", "300", 1, "100") == (100, 200, 300)
    assert config.resolve_sizes("1M-2M", None, None, 1, None) == (M, 2 * M)
    # colbench's own --sizes MIN-MAX keeps doubling.
    assert config.resolve_sizes("1K-4K", None, None, None, None) == (K, 2 * K, 4 * K)


@pytest.mark.parametrize(
    ("minbytes", "maxbytes", "factor", "step", "fragment"),
    [
        ("1M", "1K", None, None, "larger than maximum"),
        ("1K", "1M", 0, None, "1 or more"),
        ("1K", "1M", None, "zero", "bad size"),
        ("lots", None, None, None, "bad size"),
    ],
)
def test_resolve_sizes_errors(
    minbytes: str, maxbytes: str | None, factor: float | None, step: str | None, fragment: str
) -> None:
    with pytest.raises(UsageError, match=fragment):
        config.resolve_sizes(None, minbytes, maxbytes, factor, step)


@pytest.mark.parametrize(
    ("text", "average"),
    [
        ("avg", "avg"),
        ("min", "min"),
        ("max", "max"),
        ("rank0", "rank0"),
        ("MAX", "max"),
        (" avg ", "avg"),
        ("0", "rank0"),
        ("1", "avg"),
        ("2", "min"),
        ("3", "max"),
    ],
)
def test_parse_average(text: str, average: str) -> None:
    assert model.parse_average(text) == average


@pytest.mark.parametrize("text", ["bogus", "4", "-1", "", "mean"])
def test_parse_average_errors(text: str) -> None:
    with pytest.raises(UsageError, match="--average"):
        model.parse_average(text)


@pytest.mark.parametrize(
    ("text", "placements"),
    [
        ("out", ("out",)),
        ("in", ("in",)),
        ("out,in", ("out", "in")),
        ("in,out", ("out", "in")),
        ("both", ("out", "in")),
        ("in-place", ("in",)),
        ("out-of-place", ("out",)),
        ("OUT, in", ("out", "in")),
    ],
)
def test_parse_placements(text: str, placements: tuple[str, ...]) -> None:
    assert model.parse_placements(text) == placements


@pytest.mark.parametrize("text", ["sideways", "", ",", "out,sideways"])
def test_parse_placements_errors(text: str) -> None:
    with pytest.raises(UsageError, match="--placement"):
        model.parse_placements(text)


def test_root_must_be_a_rank_of_the_world() -> None:
    cfg = build(op="broadcast,all_reduce", root=2)
    with pytest.raises(UsageError, match="--root 2"):
        validate_for_world(cfg, 2, "gloo")
    assert validate_for_world(cfg, 3, "gloo") is not None


def test_root_is_ignored_when_no_op_is_rooted() -> None:
    cfg = build(op="all_reduce", root=5)
    validate_for_world(cfg, 2, "gloo")


def test_sendrecv_alone_at_world_one_on_gloo_is_nothing_to_run() -> None:
    cfg = build(op="sendrecv")
    with pytest.raises(UsageError, match="nothing to run at world size 1"):
        validate_for_world(cfg, 1, "gloo")
    # NCCL can send to itself.
    assert not any("skipping" in n for n in validate_for_world(cfg, 1, "nccl"))


def test_sendrecv_at_world_one_on_gloo_is_skipped_with_a_note() -> None:
    notes = validate_for_world(build(op="sendrecv,all_gather"), 1, "gloo")
    assert any(n.startswith("skipping sendrecv") for n in notes)
    assert not any("all_gather" in n for n in notes)


def test_notes_say_all_reduce_out_of_place_is_na() -> None:
    # all_reduce has no out-of-place form: with out,in asked for it runs in place and the
    # table shows n/a; nothing may call that a skip, and a note, if any, says n/a.
    notes = validate_for_world(build(op="all_reduce"), 2, "gloo")
    assert not any("skipping" in n for n in notes)
    assert all("n/a" in n for n in notes if "all_reduce" in n)
    # Asked for in-place only, there is nothing to say.
    assert validate_for_world(build(op="all_reduce", placements=("in",)), 2, "gloo") == []


def test_notes_for_an_op_without_the_requested_placement() -> None:
    notes = validate_for_world(build(op="all_to_all,all_gather", placements=("in",)), 2, "gloo")
    assert notes == ["skipping all_to_all: torch has no in-place form of it"]


def test_notes_for_skipped_redop_combinations() -> None:
    notes = validate_for_world(
        build(op="all_reduce", dtype="float32,int8", redop="avg", placements=("in",)), 2, "gloo"
    )
    assert notes == ["skipping all_reduce int8 avg: avg needs a floating-point dtype, not int8"]


def test_to_dict_is_plain_data() -> None:
    d = build().to_dict()
    assert d["ops"] == ("all_reduce",)
    assert d["sizes_bytes"] == (K, 4 * K)


def test_sweep_config_is_three_parts_by_concern() -> None:
    cfg = SweepConfig.of(iters=3, backend="gloo", out_dir="x")
    assert (cfg.measure.iters, cfg.launch.backend, cfg.output.out_dir) == (3, "gloo", "x")
    again = cfg.replace(iters=4, table=False)
    assert (again.measure.iters, again.output.table, again.launch.backend) == (4, False, "gloo")
    with pytest.raises(TypeError, match="no field 'iterations'"):
        cfg.replace(iterations=4)


def test_every_option_reaches_the_config() -> None:
    """Each option of the table changes the SweepConfig it is checked into."""

    changed = {
        "op": "all_gather",
        "sizes": "4K",
        "minbytes": None,
        "maxbytes": None,
        "factor": None,
        "step": None,
        "dtype": "float16",
        "redop": "max",
        "root": 1,
        "placement": "in",
        "iters": 3,
        "repeat": 2,
        "warmup": 1,
        "check": 0,
        "average": "min",
        "backend": "gloo",
        "nprocs": 3,
        "ranks_per_gpu": 2,
        "timeout": 9.0,
        "init_timeout": 8.0,
        "group_size": 1,
        "split": "mod:2",
        "seed": 7,
        "splits": "zipf:1.5",
        "out": "o",
        "results_dir": "r",
        "progress": True,
        "memory_check": "off",
        "memory_limit": "1M",
        "time_budget": 0.5,
        "rotate": 2,
        "cuda_graph": 0,
        "parallel_init": 1,
        "debug": True,
        "table": False,
        "env": ["A=1"],
        "python": f"a={sys.executable}",
        "interleave": False,
        "plot": True,
        "per_rank": True,
        "nccl_probe": False,
        "ceiling_gbps": 12.5,
        "contend": "gemm:64",
        "output_file": "report.json",
        "per_iter_timing": 1,
        "engine": "torch,nccl",
        "init_only": True,
        "register": "symmetric",
        "cta_policy": "1",
    }
    assert set(changed) == {o.name for o in options.table()}, "a new option needs a line here"
    base = config.from_options(options.SweepOptions()).to_dict()
    emulated = config.from_options(options.merge({}, {"ranks_per_gpu": 2, "backend": "nccl"}))
    assert emulated.launch.ranks_per_gpu == 2
    for name, value in changed.items():
        if value is None or name in (
            "cuda_graph",
            "ranks_per_gpu",
            "per_iter_timing",
            "parallel_init",
            "register",
        ):
            # size flags: resolve_sizes; -G and --ranks-per-gpu need NCCL; -I needs -J;
            # nccl-tests' parallel init changes nothing here, by design; -R needs
            # --engine nccl (below).
            continue
        other = config.from_options(options.merge({}, {name: value})).to_dict()
        assert other != base, f"--{name} does not reach the config"
    direct = config.from_options(options.merge({}, {"engine": "nccl"})).to_dict()
    registered = options.merge({}, {"engine": "nccl", "register": "symmetric"})
    assert config.from_options(registered).to_dict() != direct, "--register does not reach it"
