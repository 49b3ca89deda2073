"""Values are checked where they enter: rows no measurement can have are kept as status
``invalid`` and never judged; a run that is not whole is said to be so by every reader and
fails the gate; a meta.json of the wrong shape is named, never a traceback (issue 34)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from colbench.importers.nccl_tests import parse_log
from colbench.results import metafile
from colbench.results.rows import load
from tests.conftest import run_main
from tests.unit import nccl_logs
from tests.unit.gate_runs import BIG, GATHER, SMALL, STEADY, write_run

Edit = Callable[[list[dict[str, str]]], None]


def _run(path: Path, **kw: object) -> Path:
    return write_run(path, {BIG: STEADY, GATHER: STEADY, SMALL: STEADY}, **kw)  # type: ignore[arg-type]


def _edit_rows(run: Path, edit: Edit) -> None:
    with (run / "results.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        columns, rows = list(reader.fieldnames or []), list(reader)
    edit(rows)
    with (run / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def _set(index: int, column: str, value: str) -> Edit:
    def edit(rows: list[dict[str, str]]) -> None:
        rows[index][column] = value

    return edit


def _duplicate(rows: list[dict[str, str]]) -> None:
    rows.append(dict(rows[0]))


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (_set(0, "time_us", "inf"), "time_us is not finite"),
        (_set(0, "time_p50_us", "nan"), "time_p50_us is not finite"),
        (_set(0, "busbw_gbps", "-inf"), "busbw_gbps is not finite"),
        (_set(0, "time_us", "-3.5"), "time_us is negative"),
        (_set(0, "size_bytes", "-1024"), "size_bytes is negative"),
        (_set(0, "algbw_gbps", "-1"), "algbw_gbps is negative"),
        (_set(0, "status", "exploded"), "its status is not one colbench writes"),
        (_set(0, "world_size", "0"), "world_size is below 1"),
        (_duplicate, "it repeats the key of an earlier row"),
    ],
)
def test_a_row_no_measurement_can_have_is_kept_as_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Edit, reason: str
) -> None:
    run = _run(tmp_path / "run")
    _edit_rows(run, edit)
    frame = load(run)
    invalid = frame[frame["status"] == "invalid"]
    assert len(invalid) == 1 and len(frame) >= 15
    assert invalid["invalid_reason"].tolist() == [reason]
    err = capsys.readouterr().err
    assert err.count("invalid and not judged") == 1 and f"1: {reason}" in err


def test_a_row_of_another_world_size_than_its_run_is_invalid(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", meta={"world_size": 2})
    _edit_rows(run, _set(3, "world_size", "8"))
    frame = load(run)
    assert frame["invalid_reason"].tolist()[3] == "its world_size is not its run's (2, meta.json)"


def test_a_sound_file_has_no_reason_column(tmp_path: Path) -> None:
    assert "invalid_reason" not in load(_run(tmp_path / "run")).columns


@pytest.mark.parametrize("value", ["inf", "-5", "nan"])
def test_the_gate_judges_no_impossible_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """inf as the baseline once gave "math domain error"; as the current run "+inf%
    better", a pass."""
    base, cur = _run(tmp_path / "base"), _run(tmp_path / "cur")
    for side in (base, cur):
        _edit_rows(side, _set(0, "time_us", value))
    for first, second in ((base, cur), (cur, base)):
        code, out, err = run_main(
            capsys, "gate", str(first), str(second), "--check", "time_us:+50%"
        )
        assert "Traceback" not in err and "inf%" not in out and "nan%" not in out, out + err
        assert code in (0, 5), out + err


def test_a_negative_size_is_no_new_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cur = _run(tmp_path / "base"), _run(tmp_path / "cur")
    _edit_rows(cur, _set(0, "size_bytes", "-1024"))
    code, out, _ = run_main(capsys, "gate", str(base), str(cur), "--check", "time_us:+50%")
    assert code == 0 and " new" not in out.splitlines()[-1] and "-1024" not in out


def test_compare_and_fit_read_an_impossible_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cur = _run(tmp_path / "base"), _run(tmp_path / "cur")
    _edit_rows(cur, _set(0, "time_us", "inf"))
    code, _, err = run_main(capsys, "compare", str(base), str(cur), "--out", str(tmp_path / "c"))
    assert code == 0 and "Traceback" not in err
    assert "1 row(s) are invalid" in err


def test_one_run_given_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cur = _run(tmp_path / "base"), _run(tmp_path / "cur")
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("results.csv", "meta.json"):
        (copy / name).write_bytes((cur / name).read_bytes())
    for twice in ([cur, cur], [cur, copy]):
        code, _, err = run_main(capsys, "gate", str(base), *map(str, twice))
        assert code == 2 and "would count twice" in err, err


# -- a run that is not whole ---------------------------------------------------------------


def _killed(path: Path) -> Path:
    """A sweep killed from outside (SIGKILL): meta.json still says running."""
    return _run(path, status="running", meta={"rows_planned": 15})


def _cut(path: Path) -> Path:
    """A failed sweep that kept 9 of its 15 planned rows."""
    run = _run(path, status="failed", meta={"rows_planned": 15})
    _edit_rows(run, lambda rows: rows.__delitem__(slice(9, None)))
    return run


def _interrupted_interleaved(path: Path) -> Path:
    """An interleaved run stopped by SIGTERM: its top meta.json knows no plan, only that
    the rows kept are not all (colbench.host.supervise.end_meta)."""
    return _run(path, status="interrupted", meta={"rows_complete": False})


@pytest.mark.parametrize("make", [_killed, _cut, _interrupted_interleaved])
@pytest.mark.parametrize("flags", [[], ["--fail-inconclusive"]])
def test_the_gate_fails_an_incomplete_current_run(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Callable[[Path], Path],
    flags: list[str],
) -> None:
    base, cur = _run(tmp_path / "base"), make(tmp_path / "cur")
    code, out, err = run_main(capsys, "gate", str(base), str(cur), *flags)
    assert code == 1, out + err
    assert out.splitlines()[-1].startswith("colbench gate: FAIL (incomplete run; ")
    assert f"# FAIL: incomplete run {cur}" in out
    assert "run cur is incomplete" in err


@pytest.mark.parametrize("make", [_killed, _cut])
def test_the_gate_refuses_an_incomplete_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Callable[[Path], Path]
) -> None:
    base, cur = make(tmp_path / "base"), _run(tmp_path / "cur")
    code, _, err = run_main(capsys, "gate", str(base), str(cur))
    assert code == 2 and f"baseline {base} is an incomplete run" in err, err
    code, out, err = run_main(capsys, "gate", str(base), str(cur), "--accept-incomplete-baseline")
    assert code == 0 and "colbench gate: PASS" in out.splitlines()[-1], out + err


def test_a_run_that_failed_after_its_last_row_is_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _run(tmp_path / "base")
    cur = _run(tmp_path / "cur", status="failed", meta={"rows_planned": 15})
    code, out, _ = run_main(capsys, "gate", str(base), str(cur))
    assert code == 0 and "status 'failed', not complete" in out


@pytest.mark.parametrize("command", ["compare", "plot", "fit"])
def test_every_reader_says_a_run_is_incomplete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    cur = _killed(tmp_path / "cur")
    args = [str(_run(tmp_path / "base"))] if command == "compare" else []
    out = ["--out", str(tmp_path / "x")] if command != "fit" else []
    code, _, err = run_main(capsys, command, *args, str(cur), *out)
    assert code == 0 and "Traceback" not in err
    assert "run cur is incomplete: its meta.json still says 'running'" in err


def test_incomplete_reasons() -> None:
    assert metafile.incomplete({"status": "complete", "rows_planned": 4, "rows": 4}, 4) == ""
    assert "3 of its 4 planned" in metafile.incomplete({"status": "complete", "rows_planned": 4}, 3)
    assert "3 of the 4 row(s)" in metafile.incomplete({"status": "complete", "rows": 4}, 3)
    assert "still says 'running'" in metafile.incomplete({"status": "running"}, 9)
    said = metafile.incomplete({"status": "interrupted", "rows_complete": False}, 9)
    assert said == "9 row(s) kept, status 'interrupted', and not every planned row"
    # A count of true is no count.
    assert metafile.incomplete({"status": "complete", "rows_planned": True}, 0) == ""


# -- meta.json of the wrong shape ------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("versions", "2.13", "field 'versions' is a string, not an object"),
        ("env", ["NCCL_ALGO=Tree"], "field 'env' is a list, not an object"),
        ("devices", 3, "field 'devices' is a whole number, not a list"),
        ("rows", "many", "field 'rows' is a string, not a whole number"),
        ("rows_planned", True, "field 'rows_planned' is true or false, not a whole number"),
        ("cpu", None, "field 'cpu' is null, not an object"),
        ("versions", {"torch": 2}, "field 'versions' holds 'torch': a whole number"),
    ],
)
@pytest.mark.parametrize("command", ["gate", "compare"])
def test_a_meta_json_of_the_wrong_shape_is_named(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    field: str,
    value: object,
    said: str,
    command: str,
) -> None:
    base, cur = _run(tmp_path / "base"), _run(tmp_path / "cur")
    meta = json.loads((cur / "meta.json").read_text())
    (cur / "meta.json").write_text(json.dumps({**meta, field: value}))
    extra = ["--out", str(tmp_path / "c")] if command == "compare" else []
    code, _, err = run_main(capsys, command, str(base), str(cur), *extra)
    assert "Traceback" not in err and code in (0, 5), err
    assert f"{cur / 'meta.json'}: {said}" in err


def test_a_meta_json_with_a_huge_integer_is_named(tmp_path: Path) -> None:
    path = tmp_path / "meta.json"
    path.write_text('{"rows": ' + "9" * 5000 + "}")
    with pytest.raises(ValueError, match=r"is not a meta\.json colbench wrote"):
        metafile.read(path, 99)


# -- an imported log with impossible times --------------------------------------------------


@pytest.mark.parametrize("text", ["inf", "nan", "-20.09"])
def test_an_imported_impossible_time_is_invalid(text: str, tmp_path: Path) -> None:
    log = nccl_logs.new_all_reduce_log().replace("   20.09 ", f" {text:>7} ", 1)
    assert log != nccl_logs.new_all_reduce_log()
    imported = parse_log(log, source="x.log")
    statuses = [r.status for r in imported.rows]
    assert statuses.count("invalid") == 1 and statuses.count("ok") == 11
    assert any("1 time(s) no measurement can have" in w for w in imported.warnings)
    # Written and read back, the row stays invalid.
    from colbench.importers.nccl_tests import import_log

    source = tmp_path / "x.log"
    source.write_text(log)
    import_log(source, out_dir=tmp_path / "run")
    assert (load(tmp_path / "run")["status"] == "invalid").sum() == 1
