"""colbench crosscheck without running anything: the flag mapping and every refusal.

The end-to-end runs (a stand-in nccl-tests beside real gloo ranks) are in
tests/dist/test_crosscheck.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import typer.main

from colbench.bench import ops
from colbench.cli import app, main
from colbench.commands.crosscheck import plan as crosscheck
from colbench.commands.crosscheck.command import nccl_tests_side
from colbench.errors import UsageError
from tests.unit.test_cli_errors import LAUNCHER_VARS

#: The real one: the fixture below makes reaching it a failure in every other test.
OUT_DIR = crosscheck.out_dir


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in LAUNCHER_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a refused cross-check got as far as its output directory")

    monkeypatch.setattr(crosscheck, "out_dir", refuse)


@pytest.fixture
def programs(tmp_path: Path) -> Path:
    """A directory with an executable file for every nccl-tests program (never run here)."""
    build = tmp_path / "nccl-tests" / "build"
    build.mkdir(parents=True)
    for coll in ops.REGISTRY:
        if coll.nccl_tests_binary:
            program = build / coll.nccl_tests_binary
            program.write_text("#!/bin/sh\nexit 99\n")
            program.chmod(0o755)
    return build


def plan(
    argv: list[str], nccl_tests: Path, gpus: int = 8, mpiexec: str | None = None
) -> crosscheck.Plan:
    """make_plan from sweep-style flags, parsed the way the CLI parses them."""
    sweep = getattr(typer.main.get_command(app), "commands", {})["sweep"]
    flags = sweep.make_context("colbench crosscheck", list(argv))
    given = {
        name
        for name in flags.params
        if getattr(flags.get_parameter_source(name), "name", "") == "COMMANDLINE"
    }
    return crosscheck.make_plan(
        flags.params, given, str(nccl_tests), gpu_count=lambda: gpus, mpiexec=mpiexec
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--op", "all_gather", "--sizes", "8-128M", "-d", "bfloat16", "-a", "rank0", "-G", "5"],
            "all_gather_perf -b 8 -e 134217728 -f 2 -g 8 -d bfloat16 -n 20 -w 5 -c 1 -a 0 -G 5",
        ),
        (
            ["--op", "reduce", "-b", "1K", "-e", "1M", "-f", "4", "-o", "max", "-r", "3",
             "--nprocs", "4", "-d", "int32", "-a", "min"],
            "reduce_perf -b 1024 -e 1048576 -f 4 -g 4 -d int32 -o max -r 3 -n 20 -w 5 -c 1 -a 2",
        ),
        (
            ["--op", "alltoall", "-b", "1M", "-e", "4M", "-i", "1M", "-n", "7", "-w", "2",
             "-c", "0", "-d", "half", "--nprocs", "1"],
            "alltoall_perf -b 1048576 -e 4194304 -i 1048576 -g 1 -d half -n 7 -w 2 -c 0 -a 1",
        ),
        (
            ["--op", "scatter", "--sizes", "64K", "-r", "1", "-d", "float64", "-a", "max"],
            "scatter_perf -b 65536 -e 65536 -g 8 -d double -r 1 -n 20 -w 5 -c 1 -a 3",
        ),
        (
            ["--op", "reduce_scatter", "--sizes", "1K-1M", "-f", "8", "-o", "avg", "-d", "fp16"],
            "reduce_scatter_perf -b 1024 -e 524288 -f 8 -g 8 -d half -o avg -n 20 -w 5 -c 1 -a 1",
        ),
        (
            # nccl-tests' -c N, -p and -b/-e without -f (a step of -i, 1M) pass through as given.
            ["--op", "all_reduce", "-b", "1M", "-e", "3M", "-c", "3", "-p", "1", "--nprocs", "2"],
            "all_reduce_perf -b 1048576 -e 3145728 -i 1048576 -g 2 -d float -o sum -n 20 -w 5 "
            "-c 3 -a 1 -p 1",
        ),
    ],
    ids=["all_gather-graph", "reduce-root", "alltoall-step", "scatter-one-size", "rs-avg",
         "nccl-tests-meanings"],
)  # fmt: skip
def test_nccl_tests_flags(argv: list[str], expected: str, programs: Path) -> None:
    made = plan(argv, programs.parent)
    got = made.nccl_tests_argv()
    # Found in the build/ directory under the directory given.
    assert Path(got[0]).parent == programs
    assert " ".join([Path(got[0]).name, *got[1:]]) == expected


def test_colbench_side_gets_the_same_settings(programs: Path, tmp_path: Path) -> None:
    made = plan(
        ["--op", "all_gather", "-b", "1K", "-e", "64K", "-f", "4", "-d", "bf16", "-n", "9",
         "-w", "3", "-a", "3", "--nprocs", "2", "-G", "3", "--timeout", "60", "--no-progress"],
        programs.parent,
    )  # fmt: skip
    argv = made.colbench_argv(tmp_path / "run")
    assert argv[1:4] == ["-m", "colbench", "sweep"]
    assert " ".join(argv[4:]) == (
        "--op all_gather -b 1024 -e 65536 -f 4 --dtype bfloat16 --placement out,in "
        "--iters 9 --warmup 3 --check 1 --average max --backend nccl --nprocs 2 --cuda-graph 3 "
        f"--timeout 60.0 --no-progress --out {tmp_path / 'run'}"
    )


@pytest.fixture
def mpiexec(tmp_path: Path) -> Path:
    """A stand-in launcher (this machine has no MPI): runs the command once per rank, in
    turn, with MPICH's PMI_RANK and PMI_SIZE, as mpiexec -n N would, one after another."""
    program = tmp_path / "bin" / "mpiexec"
    program.parent.mkdir()
    program.write_text(
        '#!/bin/sh\n[ "$1" = -n ] || exit 9\nn=$2; shift 2; i=0\n'
        'while [ $i -lt $n ]; do PMI_RANK=$i PMI_SIZE=$n "$@" || exit $?; i=$((i+1)); done\n'
    )
    program.chmod(0o755)
    return program


def test_an_emulated_cross_check_runs_both_sides_at_k_ranks_per_gpu(
    programs: Path, tmp_path: Path, mpiexec: Path
) -> None:
    made = plan(["--op", "all_reduce", "--sizes", "1K-64M", "-f", "4", "--ranks-per-gpu", "4"],
                programs.parent, gpus=1, mpiexec=f"{mpiexec} -launcher fork")  # fmt: skip
    argv = made.nccl_tests_argv()
    assert made.ranks == 4
    assert argv[:6] == [str(mpiexec), "-launcher", "fork", "-n", "4", sys.executable]
    assert argv[6:9] == ["-m", crosscheck.EMULATED_RANK, "4"]
    assert Path(argv[9]) == programs / "all_reduce_perf"
    assert " ".join(argv[10:]) == (
        "-b 1024 -e 67108864 -f 4 -g 1 -d float -o sum -n 20 -w 5 -c 1 -a 1"
    )
    ours = made.colbench_argv(tmp_path / "run")
    assert "--nprocs 4 --ranks-per-gpu 4 --out" in " ".join(ours)
    # Two GPUs hold 8 such ranks, and no more; --nprocs picks fewer.
    assert plan(["--op", "all_reduce", "--ranks-per-gpu", "4"], programs.parent, gpus=2,
                mpiexec=str(mpiexec)).ranks == 8  # fmt: skip
    with pytest.raises(UsageError, match="--ranks-per-gpu 4 gives 4 rank"):
        plan(["--op", "all_reduce", "--ranks-per-gpu", "4", "--nprocs", "5"], programs.parent,
             gpus=1, mpiexec=str(mpiexec))  # fmt: skip


def test_an_emulated_cross_check_needs_an_mpi_launcher(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no mpiexec or mpirun on PATH; pass --mpiexec"):
        crosscheck.find_mpiexec(None, path_env=str(tmp_path))
    (tmp_path / "mpirun").write_text("#!/bin/sh\n")
    (tmp_path / "mpirun").chmod(0o755)
    assert crosscheck.find_mpiexec(None, path_env=str(tmp_path)) == (str(tmp_path / "mpirun"),)


def test_nccl_tests_without_mpi_is_named_not_misread(
    tmp_path: Path, mpiexec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build without MPI=1 under mpiexec runs one world of 1 rank per process: the side
    says so, rather than importing four 1-rank tables as the cross-check."""
    from tests import nccl_tests_standin

    bin_dir = tmp_path / "nt"
    bin_dir.mkdir()
    nccl_tests_standin.write(bin_dir, "all_reduce", "all_reduce__a3mega-ztan-h100-2node.log",
                             tmp_path / "args.json")  # fmt: skip
    made = plan(["--op", "all_reduce", "--sizes", "1K-8K", "--ranks-per-gpu", "4"], bin_dir,
                gpus=1, mpiexec=str(mpiexec))  # fmt: skip
    (tmp_path / "out").mkdir()
    said: list[str] = []
    outcome = nccl_tests_side(made, tmp_path / "out", 60, said.append)
    assert outcome.exit_code == 3 and outcome.error is not None
    assert "world(s) of 1 rank(s), not one of 4" in outcome.error
    assert "MPI=1" in outcome.error
    # The stand-in ran (as the last of the four ranks), with -g 1: one GPU per process.
    args = json.loads((tmp_path / "args.json").read_text())
    assert args[args.index("-g") + 1] == "1" and args[-2:] == ["-a", "1"]


def test_size_flags() -> None:
    assert crosscheck.size_flags([8]) == ("-b", "8", "-e", "8")
    assert crosscheck.size_flags([1024, 3072, 9216]) == ("-b", "1024", "-e", "9216", "-f", "3")
    assert crosscheck.size_flags([100, 300, 500]) == ("-b", "100", "-e", "500", "-i", "200")
    with pytest.raises(UsageError, match="neither"):
        crosscheck.size_flags([1024, 4096, 1048576])


def test_binary_on_path_prefers_the_plain_build(tmp_path: Path) -> None:
    for name in ("sendrecv_perf", "sendrecv_perf_mpi"):
        (tmp_path / name).write_text("")
        (tmp_path / name).chmod(0o755)
    found = crosscheck.find_binary(ops.get("sendrecv"), None, path_env=str(tmp_path))
    assert found == tmp_path / "sendrecv_perf"
    (tmp_path / "sendrecv_perf").unlink()
    found = crosscheck.find_binary(ops.get("sendrecv"), None, path_env=str(tmp_path))
    assert found == tmp_path / "sendrecv_perf_mpi"


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(["crosscheck", *argv])
    out, err = capsys.readouterr()
    assert out == ""
    return int(info.value.code or 0), err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--op", "allgatherv"], "unknown op 'allgatherv'"),
        (["--op", "barrier"], "nccl-tests has no test for barrier; crosscheck takes all_reduce"),
        (["--op", "all"], "one op at a time"),
        (["--op", "all_reduce,all_gather"], "one op at a time"),
        (["--dtype", "float32,bfloat16"], "one dtype at a time"),
        (["--redop", "all"], "one redop at a time"),
        (["--sizes", "1K,4K,1M"], "nccl-tests steps sizes by a whole factor"),
        (["--sizes", "1K-1M", "-f", "1.5"], "valid integer"),
        (["--op", "broadcast", "-r", "-1"], "one root at a time"),
        (["--time-budget", "1"], "cannot use --time-budget: nccl-tests has nothing like it"),
        (["--env", "NCCL_ALGO=Ring,Tree"], "cannot use --env"),
        (["--repeat", "3"], "cannot use --repeat"),
        (["--group-size", "2"], "cannot use --group-size"),
        (["-J", "report.json"], "cannot use --output-file: its report is one run's"),
        (["--backend", "gloo", "-G", "5"], "--cuda-graph"),
        (["--backend", "mpi"], "bad --backend 'mpi'"),
        (["--op", "reduce", "--backend", "gloo", "--root", "2"], "--root 2 is not a rank"),
        (["--placement", "out"], "none of the chosen ops has a out form"),
        (["--nccl-tests-timeout", "0"], "--nccl-tests-timeout must be positive"),
        (["--bogus"], "No such option"),
        (["--backend", "gloo", "--ranks-per-gpu", "2"], "--ranks-per-gpu"),
        (["--mpiexec", "mpiexec"], "--mpiexec starts the nccl-tests ranks of an emulated world"),
        (
            ["--ranks-per-gpu", "2", "--mpiexec", "no-such-mpiexec -n"],
            "--mpiexec 'no-such-mpiexec -n': no such program",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(
    argv: list[str], message: str, programs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run_main(capsys, "--nccl-tests", str(programs.parent), *argv)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("colbench: error: "), err
    assert message in err


def test_missing_programs_say_where_and_how_to_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, err = run_main(capsys, "--nccl-tests", str(empty))
    assert code == 2 and err.count("\n") == 1
    assert f"no all_reduce_perf (or all_reduce_perf_mpi) in {empty} or {empty / 'build'}" in err
    assert "git clone https://github.com/NVIDIA/nccl-tests" in err

    code, err = run_main(capsys, "--nccl-tests", str(tmp_path / "nowhere"))
    assert code == 2 and "no such directory" in err and err.count("\n") == 1

    monkeypatch.setenv("PATH", str(empty))
    code, err = run_main(capsys, "--op", "sendrecv")
    assert code == 2 and err.count("\n") == 1
    assert "no sendrecv_perf (or sendrecv_perf_mpi) in PATH" in err


def test_refused_under_a_launcher_with_the_multi_node_recipe(
    programs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "16")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "head")
    monkeypatch.setenv("MASTER_PORT", "29500")
    code, err = run_main(capsys, "--nccl-tests", str(programs.parent))
    assert code == 2 and err.count("\n") == 1
    assert "not under a launcher (env)" in err
    assert "mpirun" in err and "colbench import nccl-tests" in err and "colbench compare" in err


def test_nccl_needs_gpus(programs: Path) -> None:
    with pytest.raises(UsageError, match="no CUDA GPU is visible"):
        plan(["--op", "all_reduce"], programs.parent, gpus=0)
    with pytest.raises(UsageError, match="--nprocs 4 but 2 GPU"):
        plan(["--op", "all_reduce", "--nprocs", "4"], programs.parent, gpus=2)
    # Without --nprocs, every visible GPU: nccl-tests -g 3, colbench --nprocs 3.
    made = plan(["--op", "all_reduce"], programs.parent, gpus=3)
    assert made.ranks == 3 and made.nccl_tests_argv()[7:9] == ["-g", "3"]


def test_existing_output_directory_is_refused(programs: Path, tmp_path: Path) -> None:
    made = plan(["--op", "all_reduce", "--backend", "gloo"], programs.parent)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("")
    with pytest.raises(UsageError, match="already exists and is not empty"):
        OUT_DIR(made, str(taken), "results")
    # The default name steps aside from an existing one.
    first = OUT_DIR(made, None, str(tmp_path / "results"))
    (first / "x").write_text("")
    second = OUT_DIR(made, None, str(tmp_path / "results"))
    assert first.name.endswith("-crosscheck-all_reduce-gloo") and second != first


def test_report_keeps_colbench_placements_and_flags_wrong_rows(
    programs: Path, tmp_path: Path
) -> None:
    from colbench.commands.crosscheck import command as report
    from colbench.importers.nccl_tests import import_log
    from tests.unit import nccl_logs

    text = nccl_logs.new_all_reduce_log(world_size=4)
    lines = text.splitlines()
    first_row = next(i for i, line in enumerate(lines) if line.strip().startswith("1024 "))
    # The second run reports 3 wrong elements in-place at 1K.
    lines[first_row] = lines[first_row].rstrip()[:-1] + "3"
    (tmp_path / "a.log").write_text(text)
    (tmp_path / "b.log").write_text("\n".join(lines) + "\n")
    directory = tmp_path / "cross"
    directory.mkdir()
    import_log(tmp_path / "a.log", out_dir=directory / "nccl-tests")
    import_log(tmp_path / "b.log", out_dir=directory / "colbench")
    made = plan(["--op", "all_reduce", "--nprocs", "4"], programs.parent)
    printed, wrong = report.write_report(made, directory, "nccl-tests", "colbench")
    assert wrong
    joined = (directory / report.JOINED_CSV).read_text().splitlines()
    assert joined[0].split(",") == list(report.CSV_COLUMNS)
    # all_reduce is in-place only in colbench: nccl-tests' out-of-place rows are left out.
    rows = [line.split(",") for line in joined[1:]]
    assert [int(r[4]) for r in rows] == [1 << e for e in range(10, 21, 2)]
    assert {r[3] for r in rows} == {"1"}
    assert rows[0][-2:] == ["False", "wrong results in B"]
    assert all(float(r[8]) == 1.0 and r[-2] == "True" for r in rows[1:])
    assert "out-of-place rows are left out" in printed and "wrong results in B" in printed
    assert (directory / report.FIGURE).is_file()


def test_help_lists_only_what_crosscheck_takes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["crosscheck", "--help"])
    text = capsys.readouterr().out
    options_part = text[text.index("Options:") :]
    for refused in ("--repeat", "--env", "--time-budget", "--rotate", "--group-size", "--split"):
        assert refused not in options_part, refused
    for taken in ("--op", "-b, --minbytes", "-G, --cuda-graph", "-p, --parallel_init", "--mpiexec"):
        assert taken in options_part, taken
    # Still parsed, so that giving one is answered with the reason rather than "no such option".
    code, err = run_main(capsys, "--rotate", "2")
    assert code == 2 and "crosscheck cannot use --rotate: nccl-tests has nothing like it" in err
    # nccl-tests' own flags that sweep refuses are refused here with the same reason.
    code, err = run_main(capsys, "-g", "4")
    assert code == 2 and "one rank per GPU here; use --nprocs" in err


def test_colbench_side_calls_nccl_directly_where_nccl4py_is(
    programs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakenccl import FAKE_NCCL

    flags = ["--op", "all_gather", "--sizes", "1K-1M", "--nprocs", "2"]
    # Without nccl4py (this machine): torch, and the sweep's argv is as before.
    made = plan(flags, programs.parent)
    assert made.cfg.measure.engines == ("torch",)
    assert "--engine" not in made.colbench_argv(tmp_path / "a")
    monkeypatch.syspath_prepend(str(FAKE_NCCL))
    try:
        made = plan(flags, programs.parent)
        assert made.cfg.measure.engines == ("nccl",)
        argv = made.colbench_argv(tmp_path / "b")
        assert argv[argv.index("--engine") + 1] == "nccl"
        # Asked for, torch it is; two engines are two measurements, not one cross-check.
        assert plan([*flags, "--engine", "torch"], programs.parent).cfg.measure.engines == (
            "torch",
        )
        with pytest.raises(UsageError, match="one engine at a time"):
            plan([*flags, "--engine", "torch,nccl"], programs.parent)
    finally:
        for name in [m for m in sys.modules if m == "nccl" or m.startswith("nccl.")]:
            del sys.modules[name]


def test_nccl_tests_r_and_x_reach_both_sides(
    programs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakenccl import FAKE_NCCL

    flags = ["--op", "all_reduce", "--sizes", "1K", "--nprocs", "2"]
    # Without nccl4py colbench's side is torch's, which registers nothing: refused.
    with pytest.raises(UsageError, match=r"^crosscheck --register local: nccl-tests registers"):
        plan([*flags, "-R", "1"], programs.parent)
    with pytest.raises(UsageError, match="one CTA policy at a time"):
        plan([*flags, "-x", "0,1"], programs.parent)
    monkeypatch.syspath_prepend(str(FAKE_NCCL))
    try:
        made = plan([*flags, "-R", "2", "-x", "1"], programs.parent)
        assert made.nccl_tests_argv()[-4:] == ["-R", "2", "-x", "1"]
        ours = " ".join(made.colbench_argv(tmp_path / "run"))
        assert "--engine nccl --register symmetric --cta-policy 1 --out" in ours
    finally:
        for name in [m for m in sys.modules if m == "nccl" or m.startswith("nccl.")]:
            del sys.modules[name]
