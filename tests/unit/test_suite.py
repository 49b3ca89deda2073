"""YAML suites: the same options as sweep, errors naming file, line and key."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from colbench import cli
from colbench.cli import main
from colbench.config import suite
from colbench.errors import UsageError

REPO = Path(__file__).resolve().parents[2]


def test_suite_becomes_sweep_keywords() -> None:
    text = """\
description: ring vs tree
op: [all_reduce, all_gather]
sizes: 1K-1M
dtype: float32
iters: 7
check: false
results-dir: out
variants:
  NCCL_ALGO: [Ring, Tree]
  NCCL_PROTO: Simple
plot: true
"""
    assert suite.parse(text, "s.yaml") == {
        "op": "all_reduce,all_gather",
        "sizes": "1K-1M",
        "dtype": "float32",
        "iters": 7,
        "check": 0,
        "results_dir": "out",
        "env": ["NCCL_ALGO=Ring,Tree", "NCCL_PROTO=Simple"],
        "plot": True,
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "op: all_reduce\nszes: 1K-1M\n",
            "s.yaml line 2: unknown key 'szes' (did you mean 'sizes'?)",
        ),
        ("op: all_reduce\niters: ten\n", "s.yaml line 2: iters must be an integer, got 'ten'"),
        ("op: all_reduce\niters: true\n", "s.yaml line 2: iters must be an integer"),
        ("op: all_reduce\nsizes:\n  - 1K\n  - 1X\n", "s.yaml line 3: sizes: bad size '1X'"),
        ("op: all_reducer\n", "s.yaml line 1: op: unknown op 'all_reducer'"),
        (
            "op: all_reduce\nbackend: mpi\n",
            "s.yaml line 2: backend must be one of auto, gloo, nccl",
        ),
        (
            "variants:\n  NCCL_ALGO: {a: 1}\n",
            "s.yaml line 2: variants: NCCL_ALGO must map to a value",
        ),
        ("variants:\n  1ALGO: [a]\n", "s.yaml line 2: variants: bad --env '1ALGO=a'"),
        ("op: all_reduce\nop: all_gather\n", "s.yaml line 2: op is already set on line 1"),
        ("op: [all_reduce\n", "s.yaml line 2: not valid YAML"),
        ("- op\n", "s.yaml line 1: a suite is a mapping"),
        ("", "s.yaml: the suite is empty"),
        ("env: [A=1]\nvariants: {B: [1]}\n", "s.yaml line 2: give variants or env, not both"),
    ],
)
def test_errors_name_line_and_key(text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        suite.parse(text, "s.yaml")
    assert str(info.value).startswith(message), str(info.value)


def test_every_key_is_a_sweep_option() -> None:
    sweep_params = set(inspect.signature(cli.sweep).parameters)
    assert {target for target, _ in suite.SCHEMA.values()} <= sweep_params


@pytest.mark.parametrize("name", ["smoke-cpu", "ring-vs-tree", "full-gpu"])
def test_shipped_configs_are_valid(name: str) -> None:
    options = suite.load(REPO / "configs" / f"{name}.yaml")
    assert options["op"] and ("sizes" in options or "minbytes" in options)


def test_ring_vs_tree_has_four_variants() -> None:
    from colbench.config.variants import expand, parse_axes

    options = suite.load(REPO / "configs" / "ring-vs-tree.yaml")
    assert len(expand(parse_axes(options["env"]))) == 4


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    return int(info.value.code or 0), capsys.readouterr().err


def test_cli_flags_override_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Both values are invalid, and sweep validates iters before warmup: which error comes
    # out shows whose iters was used, without starting any rank.
    path = tmp_path / "bad.yaml"
    path.write_text("op: all_reduce\nsizes: 1K\niters: 0\nwarmup: -1\nbackend: gloo\n")
    code, err = _run(["run", str(path)], capsys)
    assert code == 2 and err == "colbench: error: --iters must be at least 1, got 0\n"
    code, err = _run(["run", str(path), "--iters", "3"], capsys)
    assert code == 2 and err == "colbench: error: --warmup must be 0 or more, got -1\n"


def test_cli_run_reports_bad_files_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text("op: all_reduce\nitres: 3\n")
    code, err = _run(["run", str(path)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert f"{path} line 2: unknown key 'itres' (did you mean 'iters'?)" in err
    code, err = _run(["run", str(tmp_path / "missing.yaml")], capsys)
    assert code == 2 and "cannot read suite" in err
    code, err = _run(["run", str(path.with_name("x.yaml")), "--bogus"], capsys)
    assert code == 2


def test_a_suites_traffic_matrix_is_read_beside_it_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "traffic.txt").write_text("0 64\n32 0\n")
    file = tmp_path / "a2av.yaml"
    file.write_text("op: all_to_allv\nsizes: 1K\nsplits: file:traffic.txt\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert suite.load(file)["splits"] == f"file:{tmp_path / 'traffic.txt'}"
    # An absolute path stays as it is.
    file.write_text(f"op: all_to_allv\nsizes: 1K\nsplits: file:{tmp_path / 'traffic.txt'}\n")
    assert suite.load(file)["splits"] == f"file:{tmp_path / 'traffic.txt'}"
