"""Bad input beyond flags: suite files, output directories and result files given to the
readers. Each case exits 2 with one line that says what to fix, and no traceback.

(The flag and size-string cases are in test_cli_errors.py; together they are the
table-driven bad-input suite of the failure-handling issue.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from colbench.cli import main
from colbench.results import COLUMNS


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _csv(path: Path, header: list[str], row: list[str]) -> str:
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.csv").write_text(",".join(header) + "\n" + ",".join(row) + "\n")
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
]  # fmt: skip


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
