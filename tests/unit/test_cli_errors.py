"""The command line's errors, help and explain, without ever starting a sweep."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import typer.main

from colbench.cli import app
from colbench.host import world
from tests.conftest import run_main

LAUNCHER_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "TORCHELASTIC_RUN_ID",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_STEP_ID",
    "SLURM_STEPID",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
)


@pytest.fixture(autouse=True)
def no_sweep(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every test here must fail validation: reaching the run directory is a test failure."""
    for var in LAUNCHER_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a CLI error test got as far as creating a run directory")

    monkeypatch.setattr(world, "make_run_dir", refuse)


BAD = [
    ("unknown op", ["sweep", "--op", "all_scream"], "unknown op"),
    ("bad size", ["sweep", "--sizes", "1Q"], "bad size"),
    ("non-whole size", ["sweep", "--sizes", "1.3"], "whole number"),
    ("min > max", ["sweep", "--sizes", "1M-1K"], "larger than maximum"),
    ("min > max nccl-tests", ["sweep", "-b", "1M", "-e", "1K"], "larger than maximum"),
    ("unknown dtype", ["sweep", "--dtype", "float128"], "unknown dtype"),
    ("unknown redop", ["sweep", "--redop", "median"], "unknown reduction"),
    # nccl-tests' names colbench does not measure are refused with the reason, not unknown.
    ("nccl-tests uint32", ["sweep", "-d", "uint32"], "nccl-tests' type, not measured here"),
    ("nccl-tests fp8", ["sweep", "-d", "f8e4m3"], "nccl-tests' 8-bit float, not measured"),
    ("nccl-tests mulsum", ["sweep", "-o", "mulsum"], "no public reduction op"),
    ("avg on int8", ["sweep", "--redop", "avg", "--dtype", "int8"], "avg"),
    ("nprocs 0", ["sweep", "--nprocs", "0"], "--nprocs"),
    ("check 200", ["sweep", "--check", "200"], "--check"),
    ("average bogus", ["sweep", "--average", "bogus"], "--average"),
    ("placement sideways", ["sweep", "--placement", "sideways"], "--placement"),
    ("unknown flag", ["sweep", "--bogus"], "--bogus"),
    ("-b with --sizes", ["sweep", "-b", "1K", "--sizes", "1K-4K"], "not both"),
    ("factor 0", ["sweep", "--factor", "0"], "1 or more"),
    ("factor with list", ["sweep", "--sizes", "1K,4K", "--factor", "4"], "range"),
    ("iters 0", ["sweep", "--iters", "0"], "--iters"),
    ("warmup -1", ["sweep", "--warmup", "-1"], "--warmup"),
    ("root -2", ["sweep", "--root", "-2"], "--root"),
    ("iters not a number", ["sweep", "--iters", "many"], "--iters"),
    ("unknown backend", ["sweep", "--backend", "mpi"], "--backend"),
    ("unknown command", ["benchmark"], "benchmark"),
    ("explain unknown op", ["explain", "all_scream"], "unknown op"),
    ("barrier in a CUDA graph", ["sweep", "--op", "barrier", "-G", "5"], "cannot capture barrier"),
    (
        "root outside the world",
        ["sweep", "--op", "broadcast", "--backend", "gloo", "--nprocs", "2", "--root", "5"],
        "--root 5",
    ),
    (
        "sendrecv alone in a world of one",
        ["sweep", "--op", "sendrecv", "--backend", "gloo", "--nprocs", "1"],
        "nothing to run",
    ),
    # Issue 25: all_to_allv's --splits and the world's --split.
    (
        "splits unknown",
        ["sweep", "--op", "all_to_allv", "--splits", "pareto:2"],
        "bad --splits 'pareto:2'",
    ),
    (
        "zipf without exponent",
        ["sweep", "--op", "all_to_allv", "--splits", "zipf"],
        "bad --splits 'zipf'",
    ),
    ("zipf not a number", ["sweep", "--splits", "zipf:x"], "expected 1 number(s)"),
    ("topk short", ["sweep", "--splits", "topk:1,2,3"], "expected 4 number(s)"),
    ("topk k beyond experts", ["sweep", "--splits", "topk:16,8,4,5"], "K=5 exceeds the 4 experts"),
    ("topk fractional", ["sweep", "--splits", "topk:16.5,8,4,2"], "whole numbers"),
    ("spread beyond 1", ["sweep", "--splits", "spread:1.5"], "spread takes 0 to 1"),
    ("matrix missing", ["sweep", "--splits", "file:nowhere.txt"], "cannot read traffic matrix"),
    ("matrix a directory", ["sweep", "--splits", "file:."], "is a directory"),
    ("split unknown", ["sweep", "--split", "rail:8"], "bad --split 'rail:8'"),
    ("split mod 0", ["sweep", "--split", "mod:0"], "bad --split 'mod:0'"),
    ("split and group size", ["sweep", "--split", "mod:2", "--group-size", "2"], "not both"),
    (
        "mod split beside the world",
        ["sweep", "--backend", "gloo", "--nprocs", "3", "--split", "mod:2"],
        "--split mod:2 needs a world size that is a multiple of 2, got 3",
    ),
    (
        "experts that do not split over the ranks",
        [
            "sweep",
            "--op",
            "all_to_allv",
            "--splits",
            "topk:16,8,6,2",
            "--backend",
            "gloo",
            "--nprocs",
            "4",
        ],
        "6 experts do not split evenly over 4 ranks",
    ),
    # Issue 25 part 3: --contend LOAD.
    ("contend gemm not a number", ["sweep", "--contend", "gemm:abc"], "bad --contend 'gemm:abc'"),
    ("contend gemm 0", ["sweep", "--contend", "gemm:0"], "whole number from 1 to 65536"),
    ("contend gemm on ints", ["sweep", "--contend", "gemm:64:int32"], "floating-point"),
    ("contend unknown op", ["sweep", "--contend", "all_scream:1M"], "neither gemm nor"),
    ("contend barrier", ["sweep", "--contend", "barrier:1K"], "barrier moves no data"),
    ("contend bad size", ["sweep", "--contend", "all_to_all:1Q"], "bad size '1Q'"),
    ("contend no amount", ["sweep", "--contend", "gemm"], "use gemm:N[:DTYPE]"),
    ("contend two dtypes", ["sweep", "--contend", "gemm:8:float32,bfloat16"], "one dtype"),
    ("contend bad dtype", ["sweep", "--contend", "gemm:8:float128"], "unknown dtype"),
    (
        "contend chunk below 16 bytes",
        ["sweep", "--contend", "all_to_all:32", "--backend", "gloo", "--nprocs", "4"],
        "--contend all_to_all:32:float32: at 4 ranks the size leaves less than one 16-byte",
    ),
    (
        "contend with crosscheck",
        ["crosscheck", "--contend", "gemm:64", "--backend", "gloo"],
        "crosscheck cannot use --contend",
    ),
    # Issue 22: accepted silently before; each error quotes what was typed.
    ("empty item in a size list", ["sweep", "--sizes", "1K,,2K"], "bad size list '1K,,2K'"),
    ("negative size", ["sweep", "--sizes", "-1"], "bad size range '-1'"),
    ("size range without a maximum", ["sweep", "--sizes", "1K-"], "bad size range '1K-'"),
    ("negative seed", ["sweep", "--seed", "-1"], "--seed must be 0 or more, got -1"),
    ("seed beyond 32 bits", ["sweep", "--seed", "99999999999"], "--seed takes at most"),
    ("iters beyond 32 bits", ["sweep", "--iters", "99999999999999"], "--iters takes at most"),
    ("ranks beyond 32 bits", ["sweep", "--nprocs", "99999999999999"], "--nprocs takes at most"),
    ("infinite timeout", ["sweep", "--timeout", "inf"], "--timeout must be positive, got inf"),
    ("timeout not a number", ["sweep", "--timeout", "nan"], "--timeout must be positive, got nan"),
    ("time budget nan", ["sweep", "--time-budget", "nan"], "--time-budget must be positive"),
    ("table and no table", ["sweep", "--table", "--no-table"], "--table and --no-table"),
    ("plot and no plot", ["sweep", "--no-plot", "--plot"], "--plot and --no-plot"),
    ("negative peak", ["plot", "results/none", "--peak", "-5"], "--peak must be a bandwidth"),
    ("peak nan", ["plot", "results/none", "--peak", "nan"], "--peak must be a bandwidth"),
    ("fit and no fit", ["plot", "results/none", "--fit", "--no-fit"], "--fit and --no-fit"),
    (
        "predict beyond any job",
        ["predict", "results/none", "--ranks", "99999999999"],
        "bad --ranks '99999999999': 99999999999 ranks is beyond any job",
    ),
    (
        "predict ranks per node beyond any job",
        ["predict", "results/none", "--ranks", "8", "--ranks-per-node", "99999999999"],
        "--ranks-per-node must be 1 to",
    ),
]


def assert_one_error_line(code: int, out: str, err: str, fragment: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("colbench: error: ")
    assert len(lines[0]) > len("colbench: error: ")
    assert fragment in lines[0]


@pytest.mark.parametrize(("argv", "fragment"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_invocations_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    code, out, err = run_main(capsys, *argv)
    assert_one_error_line(code, out, err, fragment)
    assert out == ""


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA GPUs")
def test_nccl_without_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "sweep", "--backend", "nccl")
    assert_one_error_line(code, out, err, "--backend nccl")
    assert "gloo" in err


def test_bad_invocations_through_the_real_entry_point(
    colbench: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    # A user's view: python -m colbench in a fresh process. Each one imports torch (seconds),
    # so only a couple, run concurrently.
    cases = [
        (["sweep", "--op", "all_scream"], "unknown op"),
        (["sweep", "--bogus"], "--bogus"),
    ]
    # The autouse fixture has already taken launcher variables out of os.environ.
    with ThreadPoolExecutor(len(cases)) as pool:
        procs = list(pool.map(lambda case: colbench(*case[0], timeout=120), cases))
    for (_, fragment), proc in zip(cases, procs, strict=True):
        assert_one_error_line(proc.returncode, proc.stdout, proc.stderr, fragment)


def test_more_ranks_than_the_open_file_limit_allows_are_refused_before_starting(
    colbench: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    # A hard limit of 256 open files: 100 ranks need more each (a socket per peer in
    # each process group), so they are refused at once instead of failing mid-start.
    out = tmp_path / "run"
    proc = subprocess.run(
        ["bash", "-c", f'ulimit -n 256 && exec "$0" -m colbench sweep --sizes 1K --nprocs 100 '
         f'--backend gloo --out {out}', sys.executable],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert_one_error_line(proc.returncode, proc.stdout, proc.stderr, "--nprocs 100")
    assert "more than the 256 this host allows (ulimit -Hn)" in proc.stderr
    assert not out.exists()


def test_explain_all_gather_worked_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "explain", "all_gather")
    assert code == 0, err
    assert "n=3: count 84, size_bytes 1008" in out
    assert "(n-1)/n" in out
    assert err == ""


@pytest.mark.parametrize(
    "op",
    [
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "broadcast",
        "reduce",
        "all_to_all",
        "gather",
        "scatter",
        "sendrecv",
        "barrier",
    ],
)
def test_explain_every_op(capsys: pytest.CaptureFixture[str], op: str) -> None:
    code, out, _ = run_main(capsys, "explain", op)
    assert code == 0
    assert out.startswith(f"{op}: ")
    assert "busbw" in out and "GB/s" in out


@pytest.mark.parametrize("argv", [["--help"], ["sweep", "--help"], ["-h"], ["sweep", "-h"]])
def test_help_states_units(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = run_main(capsys, *argv)
    assert code == 0, err
    text = " ".join(out.split())
    assert "1K = 1024" in text
    assert "GB/s" in text
    assert "Traceback" not in err


COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def test_the_commands() -> None:
    assert {"sweep", "explain", "env", "version"} <= set(COMMANDS)


@pytest.mark.parametrize(
    "command",
    COMMANDS,
)
def test_every_command_help_has_an_example(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    code, out, err = run_main(capsys, command, "--help")
    assert code == 0, err
    assert "Example" in out, out


def test_top_level_help_names_every_exit_code() -> None:
    from colbench.errors import ExitCode

    text = " ".join(str(typer.main.get_command(app).help).split())
    listed = text.split("Exit codes:")[1]
    for code in ExitCode:
        assert f" {int(code)} " in f" {listed.replace('/', ' ')} ", f"{code.name} missing"


def test_top_level_help_lists_every_command_under_what_a_user_wants(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each command sits under one panel (measure; compare and judge; explain; import),
    the panels in that order, every command listed once."""
    from colbench.cli.app import PANELS

    code, out, err = run_main(capsys, "--help")
    assert code == 0, err
    headings = [line[:-1] for line in out.splitlines() if line.endswith(":") and line[0] != " "]
    assert headings == ["Options", *PANELS], headings
    sections = dict(zip(PANELS, out.split("\n\n")[-len(PANELS) :], strict=True))
    listed = {
        line.split()[0]: panel for panel, text in sections.items() for line in text.splitlines()[1:]
    }
    assert sorted(listed) == COMMANDS
    assert listed["sweep"] == listed["p2p"] == "Measure"
    assert listed["gate"] == listed["compare"] == "Compare and judge"
    assert listed["explain"] == "Explain" and listed["import"] == "Import"
