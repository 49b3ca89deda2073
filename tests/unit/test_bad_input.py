"""Bad input beyond flags: suite files, output directories and result files given to the
readers. Each case exits 2 with one line that says what to fix, and no traceback.

(The flag and size-string cases are in test_cli_errors.py; together they are the
table-driven bad-input suite of the failure-handling issue.)
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from colbench import reading
from colbench.cli import main
from colbench.results.rows import COLUMNS
from tests.conftest import run_main
from tests.unit.predict_runs import model_run


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _csv(path: Path, header: list[str], row: list[str]) -> str:
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.csv").write_text(",".join(header) + "\n" + ",".join(row) + "\n")
    return str(path)


def _bytes(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def _noise(size: int, seed: int = 22) -> bytes:
    """Random bytes, NULs included: a binary file given by mistake."""
    return random.Random(seed).randbytes(size)


def _run(path: Path, world_size: int = 2) -> str:
    """A whole run of two ops and twelve sizes, written as a sweep writes it."""
    return str(model_run(path, world_size))


def _header_only(path: Path) -> str:
    """A run whose results.csv holds its header and no row (a sweep killed at once)."""
    run = Path(_run(path))
    text = (run / "results.csv").read_text()
    (run / "results.csv").write_text(text.splitlines(keepends=True)[0])
    return str(run)


def _linked(path: Path, target: str) -> str:
    """A run directory whose results.csv is a link to ``target`` (a device, say)."""
    path.mkdir()
    (path / "results.csv").symlink_to(target)
    return str(path)


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return str(path)


def _future_schema(tmp: Path) -> str:
    row = ["99"] + ["x"] * (len(COLUMNS) - 1)
    return _csv(tmp / "future", list(COLUMNS), row)


CASES = [
    # (name, argv builder, what the one line must mention)
    ("suite: unknown key", lambda t: ["run", _write(t / "s.yaml", "op: all_reduce\nsizez: 1K\n")],
     "sizez"),
    ("suite: wrong type", lambda t: ["run", _write(t / "s.yaml", "iters: many\n")], "iters"),
    ("suite: bad size", lambda t: ["run", _write(t / "s.yaml", "sizes: 1Q-1M\n")], "1Q"),
    ("suite: not a mapping", lambda t: ["run", _write(t / "s.yaml", "- a\n- b\n")], "s.yaml"),
    ("suite: broken yaml", lambda t: ["run", _write(t / "s.yaml", "op: [all_reduce\n")], "s.yaml"),
    ("suite: missing file", lambda t: ["run", str(t / "nope.yaml")], "nope.yaml"),
    ("out under a file", lambda t: ["sweep", "--sizes", "1K", "--out",
                                    _write(t / "f", "") + "/run"], "run directory"),
    ("out not empty", lambda t: ["sweep", "--sizes", "1K", "--out", str(_nonempty(t))],
     "already exists"),
    ("plot: no such run", lambda t: ["plot", str(t / "missing")], "missing"),
    ("plot: garbage csv", lambda t: ["plot", _write(t / "g.csv", "\x00\x01garbage\n")], "g.csv"),
    ("plot: wrong schema", lambda t: ["plot", _future_schema(t)], "schema version"),
    ("compare: missing columns", lambda t: ["compare", _csv(t / "a", ["schema_version", "op"],
                                                            ["2", "all_reduce"]),
                                   _future_schema(t)],
     "schema"),
    ("fit: not a csv", lambda t: ["fit", _write(t / "n.csv", "just words\n")], "n.csv"),
    ("import: missing log", lambda t: ["import", "nccl-tests", str(t / "none.log")], "none.log"),
    ("import: not a log", lambda t: ["import", "nccl-tests", _write(t / "x.log", "hello\n")],
     "x.log"),
    # Issue 22: every reader bounds what it reads and checks the file's type first.
    ("run: random bytes", lambda t: ["run", _bytes(t / "r.yaml", _noise(4096))],
     "r.yaml holds binary data"),
    ("run: not UTF-8", lambda t: ["run", _bytes(t / "u.yaml", b"op: all_reduce\nsizes: \xff\n")],
     "u.yaml is not UTF-8 text"),
    ("run: a python tag", lambda t: ["run", _write(
        t / "p.yaml", f'op: !!python/object/apply:os.system ["touch {t}/PWNED"]\n')],
     "p.yaml line 1: op: could not determine a constructor"),
    ("run: /dev/zero", lambda t: ["run", "/dev/zero"], "/dev/zero is a device, not a suite"),
    ("run: a directory", lambda t: ["run", str(t)], "is a directory, not a suite"),
    ("run: a pipe", lambda t: ["run", _fifo(t / "pipe.yaml")], "pipe.yaml is a pipe"),
    ("run: larger than any suite", lambda t: ["run", _write(
        t / "big.yaml", "# " + "x" * reading.SUITE.limit_bytes + "\n")],
     "more than the 1M any suite colbench reads"),
    ("import: /dev/zero", lambda t: ["import", "nccl-tests", "/dev/zero"],
     "/dev/zero is a device, not an nccl-tests log"),
    ("import: random bytes", lambda t: ["import", "nccl-tests", _bytes(t / "b.log", _noise(9000))],
     "b.log holds binary data (NUL bytes), not an nccl-tests log"),
    ("compare: A only a header", lambda t: ["compare", _header_only(t / "a"), _run(t / "b")],
     "a/results.csv holds no rows, only its header"),
    ("compare: B only a header", lambda t: ["compare", _run(t / "a"), _header_only(t / "b")],
     "b/results.csv holds no rows, only its header"),
    ("plot: only a header", lambda t: ["plot", _header_only(t / "a")], "holds no rows"),
    ("fit: only a header", lambda t: ["fit", _header_only(t / "a")], "holds no rows"),
    ("predict: only a header", lambda t: ["predict", _header_only(t / "a"), _run(t / "b", 3),
                                          "--ranks", "8"], "holds no rows"),
    ("gate: a baseline of only a header", lambda t: ["gate", _header_only(t / "a"), _run(t / "b")],
     "baseline"),
    ("plot: results.csv is /dev/zero", lambda t: ["plot", _linked(t / "z", "/dev/zero")],
     "results.csv is a device, not a results CSV"),
    ("compare: binary results.csv", lambda t: ["compare", _run(t / "a"),
                                               _csv_bytes(t / "b", _noise(5000))],
     "b/results.csv holds binary data"),
    ("gate: a row with too many cells", lambda t: ["gate", _run(t / "a"), _extra_cell(t / "b")],
     "b/results.csv row 3 has"),
    ("compare: nothing comparable", lambda t: ["compare", _run(t / "a", 2), _run(t / "b", 3),
                                               "--out", str(t / "c.png")],
     "nothing to compare"),
]  # fmt: skip


def _csv_bytes(path: Path, data: bytes) -> str:
    path.mkdir()
    (path / "results.csv").write_bytes(data)
    return str(path)


def _extra_cell(path: Path) -> str:
    run = Path(_run(path))
    lines = (run / "results.csv").read_text().splitlines(keepends=True)
    lines[3] = lines[3].rstrip("\r\n") + ",surplus\r\n"
    (run / "results.csv").write_text("".join(lines))
    return str(run)


def _nonempty(tmp: Path) -> Path:
    run = tmp / "run"
    run.mkdir()
    (run / "results.csv").write_text("keep me\n")
    return run


@pytest.mark.parametrize(("name", "argv", "needle"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, argv, needle: str
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv(tmp_path))
    _, err = capsys.readouterr()
    assert info.value.code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("colbench: error:"), err
    assert needle in lines[0], err
    assert "Traceback" not in err
    # Refused before anything was written or run.
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "c.png").exists()


def test_sweep_config_is_the_suite_with_flags_on_top(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Both values are invalid and iters is checked before warmup: the error shows whose
    # iters won, before any rank starts; `sweep --config` and `run` must agree.
    path = tmp_path / "s.yaml"
    path.write_text("op: all_reduce\nsizes: 1K\niters: 0\nwarmup: -1\nbackend: gloo\n")
    for argv in (
        ["sweep", "--config", str(path)],
        ["sweep", f"--config={path}"],
        ["run", str(path)],
    ):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        assert capsys.readouterr().err == "colbench: error: --iters must be at least 1, got 0\n"
        with pytest.raises(SystemExit) as info:
            main([*argv[:1], "-n", "3", *argv[1:]])
        assert info.value.code == 2
        assert capsys.readouterr().err == "colbench: error: --warmup must be 0 or more, got -1\n"


def _cut(run: str, keep_bytes_of_last: int = 20) -> str:
    """The run's results.csv cut inside its last row, as a killed copy leaves it."""
    path = Path(run) / "results.csv"
    text = path.read_text()
    last_start = text.rstrip("\r\n").rfind("\n") + 1
    path.write_text(text[: last_start + keep_bytes_of_last])
    return run


CUT = [
    # (name, argv builder, exit code): a cut file is read without its cut row, and said.
    ("compare", lambda t: ["compare", _cut(_run(t / "a")), _run(t / "b"), "--out",
                           str(t / "c")], 0),
    ("plot", lambda t: ["plot", _cut(_run(t / "a")), "--out", str(t / "p")], 0),
    ("fit", lambda t: ["fit", _cut(_run(t / "a"))], 0),
    ("predict", lambda t: ["predict", _cut(_run(t / "a")), _run(t / "b", 3), "--ranks", "8"], 0),
    ("gate", lambda t: ["gate", _run(t / "a"), _cut(_run(t / "b"))], 1),  # its row is missing
]  # fmt: skip


@pytest.mark.parametrize(("name", "argv", "code"), CUT, ids=[c[0] for c in CUT])
def test_a_cut_results_file_is_read_without_its_cut_row_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, argv, code: int
) -> None:
    got, out, err = run_main(capsys, *argv(tmp_path))
    assert got == code, err
    warned = [line for line in err.splitlines() if "cut short" in line]
    assert len(warned) == 1, err
    assert warned[0].startswith("colbench: warning: ") and "results.csv" in warned[0]
    assert "Traceback" not in err
    # fit once printed `inf inf` out of its columns for what was left.
    assert " inf inf" not in out


def test_a_file_cut_between_rows_is_said_incomplete_by_its_meta_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Path(_run(tmp_path / "a"))
    (run / "meta.json").write_text('{"run_id": "a", "rows": 24, "status": "complete"}\n')
    path = run / "results.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-2]))  # two whole rows gone: the file still looks whole
    code, _, err = run_main(capsys, "fit", str(run))
    assert code == 0, err
    assert (
        "results.csv: run a is incomplete: it holds 22 of the 24 row(s) its meta.json says "
        "were written (cut short or edited)" in err
    )


def test_a_broken_meta_json_is_said_and_read_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Path(_run(tmp_path / "a"))
    (run / "meta.json").write_bytes(_noise(300, seed=7).replace(b"\x00", b" "))
    code, _, err = run_main(capsys, "compare", str(run), _run(tmp_path / "b"), "--out",
                              str(tmp_path / "c"))  # fmt: skip
    assert code == 0, err
    assert "colbench: warning: " in err and "meta.json" in err and "read without it" in err
    assert "Traceback" not in err


def test_a_row_count_in_meta_json_of_a_failed_run(tmp_path: Path) -> None:
    # A run that stopped says how many rows it kept, for the check above to use.
    from colbench.host.supervise import end_meta, kept_line

    run = Path(_run(tmp_path / "a"))
    (run / "meta.json").write_text('{"run_id": "a", "rows_planned": 30}\n')
    end_meta(run, "failed", {"error": "boom"})
    meta = json.loads((run / "meta.json").read_text())
    assert (meta["rows"], meta["rows_complete"], meta["status"]) == (24, False, "failed")
    assert kept_line(run) == f"24 rows measured before the failure (of 30 planned) are in {run}"
    (run / "meta.json").write_text('{"run_id": "a", "rows_planned": 24}\n')
    assert kept_line(run).startswith("every row was measured before the failure: all 24 are in")


def test_an_interrupted_run_whose_plan_is_given_with_its_end(tmp_path: Path) -> None:
    # An interleaved run's top meta.json holds no plan until its end: the worlds' plans,
    # given there, tell a run stopped after its last row (whole) from one stopped sooner.
    from colbench.host.supervise import end_meta

    run = Path(_run(tmp_path / "a"))
    (run / "meta.json").unlink(missing_ok=True)
    for planned, whole in ((24, True), (30, False)):
        end_meta(run, "interrupted", {"rows_planned": planned, "interleaved": True})
        meta = json.loads((run / "meta.json").read_text())
        assert (meta["rows"], meta["rows_complete"], meta["interleaved"]) == (24, whole, True)
