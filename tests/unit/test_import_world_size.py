"""colbench import nccl-tests on real logs cut down to no Rank lines: the world size is read
from what else the log says, or the one-line error says where to look."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from colbench.errors import UsageError
from colbench.importers.nccl_tests import parse_log
from tests.datadir import NCCL_TESTS_LOGS
from tests.unit.test_import_nccl_tests import run_cli


def _real(name: str) -> tuple[str, int]:
    """The cut log (no Rank lines) and the world size its Rank lines said."""
    text = (NCCL_TESTS_LOGS / name).read_text()
    ranks = [line for line in text.splitlines() if re.search(r"#\s+Rank\s+\d", line)]
    assert ranks, name
    cut = [line for line in text.splitlines() if not re.search(r"#\s+Rank\s+\d", line)]
    return "\n".join(cut) + "\n", len(ranks)


def _only_table(text: str, name: str, **kwargs: object) -> dict[str, object]:
    (table,) = parse_log(text, source=name, **kwargs).facts["tables"]  # type: ignore[arg-type]
    return table


@pytest.mark.parametrize(
    ("name", "said_by"),
    [
        ("all_reduce__dgx2-wohlbier-old.log", "nThread T nGpus G' header and command line"),
        ("all_gather__dgx2-wohlbier-old.log", "nThread T nGpus G' header and command line"),
        ("all_reduce__p5-eks-efa-tuner-nccl-info.log", "NCCL INFO 'nranks"),
        ("alltoall__rccl-mi355x-2node-alibaba.log", "command line (16 processes)"),
    ],
)
def test_world_size_is_read_from_what_the_log_says(name: str, said_by: str) -> None:
    cut, world_size = _real(name)
    table = _only_table(cut, name)
    assert table["world_size"] == world_size
    assert said_by in str(table["world_size_from"])
    # Agreeing with the log is accepted, contradicting it is refused.
    assert _only_table(cut, name, world_size=world_size)["world_size"] == world_size
    with pytest.raises(UsageError, match=f"say {world_size} ranks but --world-size is 3"):
        parse_log(cut, source=name, world_size=3)


def test_gpus_per_process_without_the_process_count_asks_and_says_where() -> None:
    name = "all_reduce__a3mega-ztan-h100-2node.log"
    cut, world_size = _real(name)
    said = r"header gives nThread 1 x nGpus 1 .*\(mpirun -np P\)"
    with pytest.raises(UsageError, match=said) as info:
        parse_log(cut, source=name)
    assert "give --world-size N" in str(info.value) and "\n" not in str(info.value)
    assert _only_table(cut, name, world_size=world_size)["world_size_from"] == "--world-size"


def test_nranks_lines_take_the_place_of_rank_lines_and_are_needed() -> None:
    name = "all_reduce__p5-eks-efa-tuner-nccl-info.log"
    cut, _ = _real(name)
    without_info = "\n".join(line for line in cut.splitlines() if "nranks" not in line.lower())
    with pytest.raises(UsageError, match=r"NCCL INFO 'nranks N' lines|mpirun -np"):
        parse_log(without_info, source=name)


def test_communicators_of_two_sizes_are_not_guessed_between() -> None:
    name = "all_reduce__p5-eks-efa-tuner-nccl-info.log"
    cut, world_size = _real(name)
    lines = cut.splitlines()
    first = next(i for i, line in enumerate(lines) if f"nranks {world_size} " in line)
    lines[first] = lines[first].replace(f"nranks {world_size} ", "nranks 2 ")
    with pytest.raises(UsageError, match=f"communicators of 2, {world_size} ranks"):
        parse_log("\n".join(lines), source=name)


def test_cli_imports_a_cut_log_and_refuses_an_undecidable_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut, world_size = _real("all_reduce__dgx2-wohlbier-old.log")
    log = tmp_path / "ar.log"
    log.write_text(cut)
    code, _, err = run_cli(["import", "nccl-tests", str(log), "--out", str(tmp_path / "a")], capsys)
    assert code == 0, err
    assert f"all_reduce at {world_size} ranks" in err
    undecidable, _ = _real("all_reduce__a3mega-ztan-h100-2node.log")
    log.write_text(undecidable)
    code, _, err = run_cli(["import", "nccl-tests", str(log), "--out", str(tmp_path / "b")], capsys)
    assert code == 2 and "--world-size" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
