"""RunDir: the one owner of a run directory's files (colbench.results.rundir)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from colbench.errors import UsageError
from colbench.results.rows import SCHEMA_VERSION, Row
from colbench.results.rundir import RunDir, stamped_name
from tests.conftest import run_main
from tests.unit.rows import row as synthetic_row
from tests.unit.rows import write_run


def a_row(size_bytes: int = 1024, **fields: object) -> Row:
    return Row(**{**synthetic_row("all_reduce", size_bytes, 12.5), **fields})


def test_default_name_is_stamp_ops_backend_and_steps_aside(tmp_path: Path) -> None:
    default = tmp_path / "results" / stamped_name("all_reduce", "gloo")
    assert re.fullmatch(r"\d{8}-\d{6}-all_reduce-gloo", default.name)
    first = RunDir.create(None, default)
    second = RunDir.create(None, default)
    assert first.path == default and first.path.is_dir()
    # The same second and the same ops: a second run gets its own directory.
    assert second.path == default.with_name(default.name + "-2")
    assert first.name == default.name


def test_explicit_out_must_be_new_or_empty(tmp_path: Path) -> None:
    assert RunDir.create(tmp_path / "new" / "run", tmp_path / "unused").path.is_dir()
    (tmp_path / "empty").mkdir()
    assert RunDir.create(tmp_path / "empty", tmp_path / "unused").path == tmp_path / "empty"
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "results.csv").write_text("precious\n")
    with pytest.raises(UsageError, match="already exists and is not empty"):
        RunDir.create(tmp_path / "full", tmp_path / "unused")
    assert (tmp_path / "full" / "results.csv").read_text() == "precious\n"
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="cannot create run directory"):
        RunDir.create(tmp_path / "file" / "run", tmp_path / "unused")
    assert not (tmp_path / "unused").exists()


def test_rows_appended_are_read_back(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", tmp_path)
    assert not run.has_table() and run.rows_kept() == 0
    with run.writer() as writer:
        writer.write(a_row(1024))
        # Each row is on disk as soon as it is written, before the writer closes.
        assert run.rows_kept() == 1
        writer.write(a_row(2048, in_place=1))
    with run.writer() as writer:  # appending again adds rows, not a second header
        writer.write(a_row(4096))
    frame = run.results()
    assert frame["size_bytes"].tolist() == [1024, 2048, 4096]
    assert frame["in_place"].tolist() == [0, 1, 0]
    assert run.rows_kept() == 3
    assert RunDir.of(run.table_path()).path == run.path == RunDir.of(run.path).path


def test_appending_to_a_file_of_another_schema_is_refused(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", tmp_path)
    run.table_path().write_text("schema_version,op\n1,all_reduce\n")
    with pytest.raises(UsageError, match="another schema"):
        run.writer()
    assert run.table_path().read_text() == "schema_version,op\n1,all_reduce\n"


def test_meta_is_written_whole_and_updated(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", tmp_path)
    assert run.meta_or_none() is None
    run.write_meta({"schema_version": SCHEMA_VERSION, "status": "running", "rows": 0})
    run.update_meta(status="complete", rows=3)
    assert run.read_meta() == {"schema_version": SCHEMA_VERSION, "status": "complete", "rows": 3}
    assert [p.name for p in run.path.iterdir()] == ["meta.json"]  # no temporary left
    run.meta_path.write_text("{half a fi")
    assert run.meta_or_none() is None


def test_meta_of_a_newer_colbench_is_refused(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", tmp_path)
    run.write_meta({"schema_version": SCHEMA_VERSION + 1})
    with pytest.raises(UsageError, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        run.read_meta()
    with pytest.raises(UsageError, match="newer"):
        run.meta_or_none()


def test_rank_logs_in_rank_order_and_tidied(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", tmp_path)
    for rank in (10, 2, 0):
        run.rank_log(rank).write_text("" if rank == 2 else f"rank {rank} said something\n")
    run.error_report(1).write_text("{}")
    (run.path / "rankX.log").write_text("not a rank's\n")
    assert list(run.rank_logs()) == [0, 2, 10]
    assert run.error_reports() == [run.path / "rank1.error.json"]
    run.tidy_logs()
    assert list(run.rank_logs()) == [0, 10]
    assert run.figure_path("busbw") == run.path / "busbw.png"


def _future(run: Path, *, csv: bool) -> None:
    """Make a run look written by a newer colbench: its CSV rows or its meta.json."""
    if csv:
        text = (run / "results.csv").read_text().splitlines()
        rows = [f"{SCHEMA_VERSION + 1}{line[line.index(',') :]}" for line in text[1:]]
        (run / "results.csv").write_text("\n".join([text[0], *rows]) + "\n")
    else:
        (run / "meta.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))


@pytest.mark.parametrize("what", ["csv", "meta"])
@pytest.mark.parametrize("command", ["compare", "gate"])
def test_cli_refuses_a_run_of_another_schema_version_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str, command: str
) -> None:
    sizes = (1 << 16, 1 << 17, 1 << 18)
    a = write_run(tmp_path / "a", [synthetic_row("all_reduce", s, 100.0) for s in sizes])
    b = write_run(tmp_path / "b", [synthetic_row("all_reduce", s, 100.0) for s in sizes])
    RunDir(a).write_meta({"schema_version": SCHEMA_VERSION, "status": "complete"})
    _future(b, csv=what == "csv")
    code, _, err = run_main(capsys, command, str(a), str(b))
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert f"schema version {SCHEMA_VERSION + 1}" in lines[0]
    assert ("results.csv" if what == "csv" else "meta.json") in lines[0]


def test_out_naming_a_file_says_it_is_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `--out README.md` once said "run directory README.md already exists": the user
    # named a file, and the line must say that --out wants a directory.
    monkeypatch.chdir(tmp_path)
    Path("README.md").write_text("# mine\n")
    code, _, err = run_main(capsys, "sweep", "--backend", "gloo", "--out", "README.md")
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("colbench: error: --out README.md is a file: --out names the run ")
    assert "already exists" not in err
    assert Path("README.md").read_text() == "# mine\n"


def test_one_row_is_one_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from colbench.host.supervise import report_done
    from colbench.output import plural

    assert [plural(n, "row") for n in (0, 1, 2)] == ["0 rows", "1 row", "2 rows"]
    assert plural(1, "pass", "passes") == "1 pass" and plural(3, "pass", "passes") == "3 passes"
    run = RunDir.create(tmp_path / "run", tmp_path)
    run.write_meta({"rows": 1, "wrong_total": 0})
    assert report_done(run.path) == 0
    assert capsys.readouterr().err == f"colbench: 1 row in {run.table_path()}\n"
