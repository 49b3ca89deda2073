"""--env axes: parsing, the cartesian product, merging, and the environment they set."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from colbench.cli import main
from colbench.config.variants import (
    environment,
    expand,
    ignored_by_backend,
    merge_axes,
    parse_axes,
    parse_axis,
    parse_interpreters,
)
from colbench.errors import UsageError


def test_axis_parses_values_in_order() -> None:
    assert parse_axis("NCCL_ALGO=Ring,Tree") == ("NCCL_ALGO", ("Ring", "Tree"))
    assert parse_axis(" X = 1 ") == ("X", ("1",))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("NCCL_ALGO", "use KEY=VALUE"),
        ("=Ring", "use KEY=VALUE"),
        ("1BAD=x", "not an environment variable name"),
        ("A=x,,y", "empty value"),
        ("A=x,x", "listed twice"),
    ],
)
def test_bad_axes_name_the_problem(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_axis(spec)


def test_a_variable_may_be_given_once() -> None:
    with pytest.raises(UsageError, match="given twice"):
        parse_axes(["A=1", "A=2"])


def test_product_is_cartesian_first_axis_slowest() -> None:
    variants = expand(parse_axes(["NCCL_ALGO=Ring,Tree", "NCCL_PROTO=LL,Simple"]))
    assert [v.name for v in variants] == [
        "NCCL_ALGO=Ring,NCCL_PROTO=LL",
        "NCCL_ALGO=Ring,NCCL_PROTO=Simple",
        "NCCL_ALGO=Tree,NCCL_PROTO=LL",
        "NCCL_ALGO=Tree,NCCL_PROTO=Simple",
    ]
    assert variants[3].env == (("NCCL_ALGO", "Tree"), ("NCCL_PROTO", "Simple"))
    assert [v.name for v in expand(())] == [""]


def test_merge_replaces_only_the_overridden_variable() -> None:
    base = parse_axes(["NCCL_ALGO=Ring,Tree", "NCCL_PROTO=LL,Simple"])
    merged = merge_axes(base, parse_axes(["NCCL_PROTO=Simple", "X=1"]))
    assert merged == (("NCCL_ALGO", ("Ring", "Tree")), ("NCCL_PROTO", ("Simple",)), ("X", ("1",)))


def test_nccl_variables_are_ignored_by_gloo_only() -> None:
    axes = parse_axes(["NCCL_ALGO=Ring", "COLBENCH_PROBE=a"])
    assert ignored_by_backend(axes, "gloo") == ["NCCL_ALGO"]
    assert ignored_by_backend(axes, "nccl") == []


def test_environment_is_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLBENCH_KEEP", "old")
    monkeypatch.delenv("COLBENCH_NEW", raising=False)
    with environment({"COLBENCH_KEEP": "new", "COLBENCH_NEW": "x"}):
        assert os.environ["COLBENCH_KEEP"] == "new" and os.environ["COLBENCH_NEW"] == "x"
    assert os.environ["COLBENCH_KEEP"] == "old" and "COLBENCH_NEW" not in os.environ


def test_variants_need_colbench_to_start_the_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As if torchrun had started this process: colbench cannot restart it per variant.
    for key, value in {
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29999",
    }.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        main(["sweep", "--sizes", "1K", "--backend", "gloo", "--env", "X=1,2", "--out", str(out)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert "--env variants need fresh ranks per variant" in err and "export the variable" in err
    assert not out.exists()


def test_python_variants_parse_and_multiply_the_env_axes() -> None:
    python = sys.executable
    pythons = parse_interpreters(f"main={python}, pr={python}")
    assert pythons == (("main", python), ("pr", python))
    names = [v.name for v in expand((("X", ("1", "2")),), pythons)]
    assert names == ["X=1,python=main", "X=1,python=pr", "X=2,python=main", "X=2,python=pr"]
    assert expand((), pythons)[1].python == python


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("main", "use NAME=PATH"),
        ("a b=/usr/bin/env", "must be a word"),
        (f"a={sys.executable},a={sys.executable}", "given twice"),
        ("a=/no/such/python", "not an executable file"),
    ],
)
def test_bad_python_variants_are_one_line_errors(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_interpreters(spec)


def test_a_python_without_colbench_is_refused_before_any_rank(tmp_path: Path) -> None:
    # The same interpreter without its site-packages: no colbench there.
    bare = tmp_path / "python"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    bare.chmod(0o755)
    with pytest.raises(UsageError, match=f"{bare} has no colbench that runs ranks"):
        parse_interpreters(f"main={sys.executable},pr={bare}")
    # A program that is no Python at all, and exits 0.
    true = tmp_path / "true"
    true.write_text("#!/bin/sh\nexit 0\n")
    true.chmod(0o755)
    with pytest.raises(UsageError, match=f"{true} has no colbench that runs ranks"):
        parse_interpreters(f"main={sys.executable},pr={true}")
