"""nccl-tests' command lines, parsed by ``colbench sweep`` in process (no ranks): each flag is
taken with nccl-tests' meaning or refused with its reason, as docs/nccl-tests.md's table says.

The lines are the real ones in the headers of tests/data/nccl-tests-logs and the examples
of nccl-tests' README; the sizes, counts and roots they ask for are worked out here the way
nccl-tests' ``TimeTest`` loop steps them, independently of colbench's size code.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main

from colbench.bench import ops
from colbench.cli import app, docgen
from colbench.cli.measure import sweep_options
from colbench.config import model, nccl_flags, options, validate
from colbench.config.sizes import parse_size
from colbench.errors import UsageError
from tests.conftest import REPO

LOGS = REPO / "tests" / "data" / "nccl-tests-logs"

#: nccl-tests 2.19.6's getopt letters (``src/common.cu``), to check FLAGS against.
GETOPT_LETTERS = set("tgbeifnmwNpIKcodrzyThGCaRxDVJSMu")

#: The examples of nccl-tests' README ("Quick examples"), after the program's name.
README_EXAMPLES = ("-b 8 -e 128M -f 2 -g 8", "-b 8 -e 8G -f 2 -g 1")


def _log_command_lines() -> list[tuple[str, str, list[str]]]:
    """(log, collective, flags) of each ``*_perf`` command line in the real logs."""
    found = []
    for log in sorted(LOGS.glob("*.log")):
        for line in log.read_text(encoding="utf-8").splitlines():
            words = line.split()
            programs = [i for i, w in enumerate(words) if re.search(r"_perf(_mpi)?$", w)]
            if programs and len(words) > programs[0] + 1 and words[programs[0] + 1][0] == "-":
                name = Path(words[programs[0]]).name.removesuffix("_mpi").removesuffix("_perf")
                found.append((log.name, name, words[programs[0] + 1 :]))
                break
    return found


#: The parameter line of nccl-tests' header (``# nThread 1 nGpus 8 minBytes 8 ...``): each
#: field and the flag that set it.
HEADER_FIELDS = (
    ("nThread", "-t"),
    ("nGpus", "-g"),
    ("minBytes", "-b"),
    ("maxBytes", "-e"),
    ("warmup iters:", "-w"),
    ("agg iters:", "-m"),
    ("validation:", "-c"),
    ("graph:", "-G"),
)


def _header_lines() -> list[tuple[str, str, list[str]]]:
    """(log, collective, flags) rebuilt from each log's header parameter line."""
    found = []
    for log in sorted(LOGS.glob("*.log")):
        text = log.read_text(encoding="utf-8")
        header = re.search(r"# nThread .*", text)
        if header is None:
            continue
        line, flags = header.group(0), []
        for field, flag in HEADER_FIELDS:
            got = re.search(rf"(?<![a-z]){re.escape(field)} (\d+)", line)
            if got:
                flags += [flag, got.group(1)]
        step = re.search(r"step: (\d+)\((factor|bytes)\)", line)
        assert step is not None, log.name
        flags += ["-f" if step.group(2) == "factor" else "-i", step.group(1)]
        flags += ["-n", re.findall(r"(?<![a-z] )iters: (\d+)", line)[-1]]
        name = log.name.split("__")[0]
        found.append((f"{log.name} header", name, flags))
    return found


LINES = [
    *[(f"{log}", name, flags) for log, name, flags in _log_command_lines()],
    *_header_lines(),
    *[(f"README: {line}", "all_reduce", shlex.split(line)) for line in README_EXAMPLES],
]


def parse(argv: list[str]) -> model.SweepConfig:
    """``colbench sweep ARGV`` up to its config, as the command does it, without ranks."""
    sweep = getattr(typer.main.get_command(app), "commands", {})["sweep"]
    ctx = sweep.make_context("colbench sweep", list(argv))
    return validate.from_options(sweep_options(ctx, None, dict(ctx.params)))


def nccl_tests_view(flags: list[str]) -> dict[str, str]:
    """nccl-tests' reading of its flags (short or long, value in the next word)."""
    long_to_short = {f.long: f.short for f in nccl_flags.FLAGS}
    pairs = zip(flags[::2], flags[1::2], strict=True)
    return {long_to_short.get(flag, flag): value for flag, value in pairs}


def nccl_tests_sizes(given: dict[str, str]) -> list[int]:
    """The sizes nccl-tests' loop runs: from -b to -e, times -f if above 1, else plus -i."""
    low = parse_size(given.get("-b", "32M"))
    high = parse_size(given.get("-e", "32M"))
    factor = int(given.get("-f", "1"))
    step = parse_size(given.get("-i", "1M"))
    sizes, size = [], low
    while size <= high:
        sizes.append(size)
        size = size * factor if factor > 1 else size + step
    return sizes


def refusal_for(given: dict[str, str]) -> str:
    """The reason the table gives for the first flag of ``given`` it refuses, or ""."""
    by_short = {r.short: r for r in nccl_flags.REFUSED}
    for flag, value in given.items():
        if flag in by_short and value not in by_short[flag].same:
            return by_short[flag].reason
    return ""


def test_the_logs_give_command_lines() -> None:
    # Six logs carry their command line, eleven a header; none may silently drop out.
    assert len(_log_command_lines()) >= 6
    assert len(_header_lines()) >= 11


@pytest.mark.parametrize(("source", "name", "flags"), LINES, ids=[line[0] for line in LINES])
def test_real_command_lines_are_taken_or_refused_as_the_table_says(
    source: str, name: str, flags: list[str]
) -> None:
    given = nccl_tests_view(flags)
    argv = ["--op", ops.get(name).name, *flags]
    reason = refusal_for(given)
    if reason:
        with pytest.raises(UsageError, match=re.escape(reason)):
            parse(argv)
        return
    cfg = parse(argv)
    assert list(cfg.measure.sizes_bytes) == nccl_tests_sizes(given)
    assert cfg.measure.iters == int(given.get("-n", "20"))
    # colbench's warm-up default is its own (5), as the table says; a given -w is nccl-tests'.
    assert cfg.measure.warmup == int(given.get("-w", "5"))
    assert cfg.measure.check == int(given.get("-c", "1"))


def test_every_nccl_tests_flag_is_answered_exactly_once() -> None:
    assert {f.short.lstrip("-") for f in nccl_flags.FLAGS} == GETOPT_LETTERS
    taken = [o for o in options.table() if o.spec.nccl_tests.startswith("-")]
    refused = {r.short for r in nccl_flags.REFUSED}
    for flag in nccl_flags.FLAGS:
        takers = [o for o in taken if o.spec.nccl_tests == flag.short]
        answers = len(takers) + (flag.short in refused) + (flag.short == "-h")
        assert answers == 1, f"{flag.short} is answered {answers} times"
        for opt in takers:
            assert flag.short in opt.spec.flags, f"{opt.name} does not take {flag.short}"
            # --op is colbench's collective; nccl-tests' reduction is -o/--redop here.
            assert flag.long in opt.spec.flags or flag.long == "--op", flag.long
    for opt in taken:
        assert opt.spec.nccl_tests in nccl_flags.BY_SHORT, opt.spec.nccl_tests


@pytest.mark.parametrize("refusal", nccl_flags.REFUSED, ids=[r.short for r in nccl_flags.REFUSED])
def test_each_refused_flag_says_why_in_either_form(refusal: nccl_flags.Refusal) -> None:
    for flag in (refusal.short, refusal.flag.long):
        with pytest.raises(UsageError, match=re.escape(refusal.reason)):
            parse([flag, "2"])
    for value in refusal.same:
        # The value nccl-tests uses for what colbench does anyway runs as it would there.
        assert parse([refusal.short, value]).measure.sizes_bytes


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["--warmup_iters", "3"], "warmup", 3),
        (["--datatype", "half"], "dtypes", ("float16",)),
        (["--run_cycles", "3"], "repeat", 3),
        (["-N", "2"], "repeat", 2),
        (["--iters", "7"], "iters", 7),
        (["--check", "3"], "check", 3),
        (["-c", "0"], "check", 0),
        (["--root", "-1"], "root", model.EVERY_ROOT),
        (["-T", "0"], "timeout_s", model.NO_TIMEOUT_S),
        (["--timeout", "9"], "timeout_s", 9.0),
        (["--average", "2"], "average", "min"),
        (["--cudagraph", "4", "--backend", "nccl"], "cuda_graph", 4),
        (["-G", "0"], "cuda_graph", 0),
        (["-o", "max"], "redops", ("max",)),
        (["--minbytes", "1M", "--maxbytes", "3M"], "sizes_bytes", (1 << 20, 2 << 20, 3 << 20)),
        (["-b", "1K", "-e", "4K", "--stepfactor", "2"], "sizes_bytes", (1024, 2048, 4096)),
        (["-b", "1K", "-e", "3K", "--stepbytes", "1K"], "sizes_bytes", (1024, 2048, 3072)),
        (["-b", "1K", "-e", "4K"], "sizes_bytes", (1024,)),
    ],
)
def test_taken_flags_mean_what_nccl_tests_means(argv: list[str], field: str, value: Any) -> None:
    cfg = parse(argv)
    part = next(p for p in (cfg.measure, cfg.launch, cfg.output) if hasattr(p, field))
    assert getattr(part, field) == value


def test_parallel_init_is_taken_and_said_to_change_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert parse(["-p", "1"]) == parse([])
    assert "changes nothing here" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["sum", "prod", "min", "max", "avg", "mulsum"])
def test_op_with_a_reduction_names_the_redop_flag(name: str) -> None:
    with pytest.raises(UsageError, match=f"--op names the collective.*-o/--redop {name}"):
        parse(["--op", name])


def test_op_all_runs_every_collective_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse(["--op", "all"]).measure.ops == tuple(c.name for c in ops.REGISTRY)
    assert "-o all / --redop all" in capsys.readouterr().err
    # With the reduction given, --op all can only mean the collectives: no note.
    parse(["--op", "all", "-o", "sum"])
    assert capsys.readouterr().err == ""


def test_nprocs_has_no_short_form_that_nccl_tests_uses() -> None:
    shorts = {flag for opt in options.table() for flag in opt.spec.flags if len(flag) == 2}
    nprocs = next(opt for opt in options.table() if opt.name == "nprocs")
    assert nprocs.spec.flags == ("--nprocs",)
    # Every short flag sweep takes is one nccl-tests gives the same meaning, or -s/-h.
    assert shorts - {f.short for f in nccl_flags.FLAGS} == {"-s"}


def test_the_committed_table_is_what_the_options_generate() -> None:
    committed = docgen.NCCL_TESTS_DOC.read_text(encoding="utf-8")
    assert committed == docgen.with_nccl_tests_table(committed), (
        "docs/nccl-tests.md's flags table is stale: run `make docs` and commit it"
    )
    table = docgen.nccl_tests_markdown()
    for flag in nccl_flags.FLAGS:
        assert f"| `{flag.short}`, `{flag.long}` |" in table
    for refusal in nccl_flags.REFUSED:
        assert refusal.reason in table


def test_root_minus_one_runs_every_rank_as_root_in_turn() -> None:
    from colbench.bench.plan import plan

    cfg = parse(["--op", "broadcast,all_reduce", "-r", "-1", "-b", "1K", "-e", "1K"])
    work = plan(cfg, 4, "gloo")
    assert [(w.coll.name, w.root) for w in work] == [
        *[("broadcast", root) for root in range(4)],
        ("all_reduce", -1),
    ]
    one = plan(parse(["--op", "broadcast", "-r", "2"]), 4, "gloo")
    assert [w.root for w in one] == [2]


def test_sweep_help_lists_what_it_takes_not_what_it_refuses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.conftest import run_main

    code, out, _ = run_main(capsys, "sweep", "--help")
    assert code == 0
    for refusal in nccl_flags.REFUSED:
        # --memory is refused; --memory-check is colbench's own.
        assert not re.search(rf"{refusal.flag.long}(?![-\w])", out), refusal.flag.long
    for taken in ("--warmup_iters", "--datatype", "--cudagraph", "--run_cycles", "-T, --timeout"):
        assert taken in out, taken


def test_run_cycles_zero_is_refused_with_the_reason() -> None:
    with pytest.raises(UsageError, match=r"-N 0, forever, is not offered"):
        parse(["-N", "0"])
