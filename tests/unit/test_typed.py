"""validity.typed, which parses most numeric columns in one pandas call, types a run exactly as
the text pass per column did before (main 08a7fa3): the same frame (dtypes, values, NaN
against <NA>), the same non_finite masks and the same errors, on real runs (the golden
smoke runs, the checked-in baseline, nccl-tests reports imported) and on a copy of a run
with each edge case (blank, spaced, inf, nan, huge and fractional cells) in float and
integer columns, with and without other empty cells beside it."""

from __future__ import annotations

import contextlib
import csv
import itertools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from colbench.errors import UsageError
from colbench.results import tables, validity
from colbench.results.rows import load
from colbench.results.tables import Table, TableRow
from colbench.results.tables import column as _column
from tests.conftest import run_main

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "unit" / "data"
REAL_RUNS = [
    DATA / "golden" / "gloo-smoke",
    DATA / "gloo-smoke-v2",
    ROOT / "results" / "baselines" / "gloo-smoke",
]
NCCL_TESTS = [
    ROOT / "tests" / "data" / "nccl-tests-json" / "allreduce-t4-2gpu-nccl2.29.3-per-iter.json",
    # A few of the logs: each import starts a whole command.
    *sorted((ROOT / "tests" / "data" / "nccl-tests-logs").glob("*.log"))[::4],
]

# Int64 casts an inf or 1e30 in a count with a warning before refusing it, old code and new.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")

#: Every whitespace character Python's str.strip removes: a cell of them alone is empty.
BLANKS = [chr(i) for i in range(sys.maxunicode + 1) if chr(i).isspace()]
EDGES = [
    *["", " ", " 12 ", "\t7\n", "inf", "-inf", "+inf", "Infinity", "INF"],
    *["nan", "+nan", "-nan", "NaN", " NAN ", "\u3000-NaN\u3000", "nan(1)"],
    *["1e30", "100000000000000000000000000000", "-100000000000000000000000000000"],
    *["18446744073709551615", "9223372036854775808", "-9223372036854775809"],
    *["1.5", "-0", "0x10", "1_000", "abc", "1,5", "\u0661\u0662", "+3", "3.", ".5e1"],
    *BLANKS,
    *[blank * 2 + "4" for blank in BLANKS[:3]],
]
#: A float and an integer column with no empty cell in the golden run, and one of each
#: holding empty cells already (gloo measures no enqueue time, checks not every size).
COLUMNS = ["time_us", "count", "enqueue_us", "wrong"]


def _typed_per_column(file: Path, raw: Any, table: tables.Table) -> tuple[Any, dict[str, Any]]:
    """tables.typed as it was (main 08a7fa3), a count's whole-number rule added: a text pass
    over every numeric column. The oracle, slow and plain."""
    text_columns, float_columns = table.text_columns, table.float_columns
    frame = raw.copy()
    non_finite: dict[str, Any] = {}
    for column in table.columns:
        if column in text_columns:
            frame[column] = raw[column].astype("string")
            continue
        text = raw[column].fillna("").astype(str).str.strip()
        nan_cells = text.str.lower().isin(("nan", "+nan", "-nan")) & (column in float_columns)
        try:
            numbers = pd.to_numeric(raw[column].mask((text == "") | nan_cells, None))
        except (ValueError, TypeError):
            raise UsageError(
                f"{file}: column {column} holds a value that is not a number"
            ) from None
        if column in float_columns:
            frame[column] = numbers.astype("float64")
            bad = np.isinf(frame[column]) | nan_cells
            if bad.any():
                non_finite[column] = bad
            continue
        try:
            # Since the one-call parse: a count that is not a whole int64 is refused, not cast (the
            # cast cut 1.5 to 1 and wrapped 1e30 in a column with no missing cell).
            if not all(_whole_int64(value) for value in numbers.dropna()):
                raise ValueError(column)
            frame[column] = numbers.astype("Int64" if numbers.isna().any() else "int64")
        except (ValueError, TypeError, OverflowError):
            raise UsageError(
                f"{file}: column {column} holds a value that is not a whole number"
            ) from None
    return frame, non_finite


def _whole_int64(value: Any) -> bool:
    try:
        exact = int(value)
    except (ValueError, OverflowError):  # inf, nan
        return False
    return exact == value and -(2**63) <= exact < 2**63


def _outcome(typer: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "typed", typer(*args)
    except Exception as exc:
        return type(exc).__name__, str(exc)


def _assert_same(got: tuple[str, Any], want: tuple[str, Any]) -> None:
    assert got[0] == want[0], (got, want)
    if got[0] != "typed":
        assert got[1] == want[1]
        return
    (frame, non_finite), (want_frame, want_non_finite) = got[1], want[1]
    pd.testing.assert_frame_equal(frame, want_frame, check_dtype=True, check_exact=True)
    assert list(non_finite) == list(want_non_finite)
    for column, mask in want_non_finite.items():
        pd.testing.assert_series_equal(non_finite[column], mask, check_exact=True)


@pytest.fixture
def both_ways(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Every typed call a load makes is checked against the oracle on the same cells;
    the outcomes (typed, or the error's name) are kept for the test to look at."""
    seen: list[tuple[str, Any]] = []
    typed = validity.typed

    def both(file: Path, raw: Any, table: tables.Table) -> tuple[Any, dict[str, Any]]:
        want = _outcome(_typed_per_column, file, raw.copy(), table)
        got = _outcome(typed, file, raw, table)
        _assert_same(got, want)
        seen.append(got)
        return typed(file, raw, table)

    monkeypatch.setattr(validity, "typed", both)
    return seen


@pytest.mark.parametrize("run", REAL_RUNS, ids=lambda p: p.name)
def test_real_runs_type_as_before(run: Path, both_ways: list[tuple[str, Any]]) -> None:
    frame = load(run)
    assert len(frame) > 100
    assert [kind for kind, _ in both_ways] == ["typed"]


def test_imported_nccl_tests_reports_type_as_before(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, both_ways: list[tuple[str, Any]]
) -> None:
    for number, report in enumerate(NCCL_TESTS):
        out = tmp_path / f"r{number}"
        code, _, _ = run_main(capsys, "import", "nccl-tests", str(report), "--out", str(out))
        if code == 0:
            load(out)
    assert len(both_ways) >= len(NCCL_TESTS) // 2
    assert {kind for kind, _ in both_ways} == {"typed"}


def _golden_cells() -> tuple[list[str], list[list[str]]]:
    with open(DATA / "golden" / "gloo-smoke" / "results.csv", newline="") as f:
        header, *body = list(csv.reader(f))
    # Few rows keep the hundreds of loads cheap; some must hold empty cells (COLUMNS).
    unchecked = [line for line in body if line[header.index("wrong")] == ""]
    body = body[:30] + unchecked[:10]
    for column in COLUMNS[2:]:
        assert "" in [line[header.index(column)] for line in body]
    return header, body


def _load_edited(tmp_path: Path, edits: dict[tuple[int, str], str]) -> None:
    header, body = _golden_cells()
    for (row, column), cell in edits.items():
        body[row][header.index(column)] = cell
    (tmp_path / "results.csv").write_text(
        "".join(",".join(_quoted(c) for c in line) + "\n" for line in [header, *body]),
        encoding="utf-8",
    )
    with contextlib.suppress(UsageError):  # both_ways compared the messages
        load(tmp_path)


def _quoted(cell: str) -> str:
    return '"' + cell.replace('"', '""') + '"' if cell != cell.strip() or "," in cell else cell


@dataclass(frozen=True)
class _Cases(TableRow):
    """A table of the golden run's columns the cases edit, and a text one."""

    op: str = _column("")
    time_us: float | None = _column("")
    count: int = _column("")
    enqueue_us: float | None = _column("")
    wrong: int | None = _column("")


CASES = Table("cases.csv", _Cases, 1, {1: ""})


@pytest.mark.parametrize("edited", COLUMNS)
def test_each_edge_case_types_as_before(edited: str) -> None:
    header, body = _golden_cells()
    outcomes = []
    golden = pd.DataFrame(body, columns=header, dtype=str)[list(CASES.columns)]
    # The column as it is, and of two cells repeated (typed parses each distinct cell once).
    repeated = golden.copy()
    two = body[0][header.index(edited)], body[-1][header.index(edited)]
    repeated[edited] = [two[i % 2] for i in range(len(body))]
    for raw, cell in itertools.product((golden, repeated), EDGES):
        raw = raw.copy()
        raw.loc[3, edited] = cell
        want = _outcome(_typed_per_column, Path("r.csv"), raw.copy(), CASES)
        outcomes.append(_outcome(validity.typed, Path("r.csv"), raw, CASES))
        _assert_same(outcomes[-1], want)
    # The cases reach every outcome: typed, a non-number, and (counts) a non-whole number.
    assert {kind for kind, _ in outcomes} == {"typed", "UsageError"}
    messages = {str(message) for kind, message in outcomes if kind == "UsageError"}
    assert any("not a number" in m for m in messages)
    assert any("not a whole number" in m for m in messages) == (edited in ("count", "wrong"))


def test_edge_cases_together_and_whole_columns_blank(
    tmp_path: Path, both_ways: list[tuple[str, Any]]
) -> None:
    _, body = _golden_cells()
    harmless = [" 12 ", "", "inf", "-inf", "nan", "+nan", "-nan", " NaN ", "\u3000", "1e30"]
    for column in ("time_us", "busbw_gbps"):
        _load_edited(tmp_path, {(i, column): c for i, c in enumerate(harmless)})
    for column in ("count", "wrong", "repeat"):
        _load_edited(tmp_path, {(i, column): c for i, c in enumerate([" 12 ", "", "\t", "-0"])})
    for column in ("time_us", "count", "enqueue_us", "root"):
        _load_edited(tmp_path, {(i, column): "" for i in range(len(body))})
        _load_edited(tmp_path, {(i, column): " 5 " for i in range(len(body))})
    _load_edited(tmp_path, {(i, "count"): "1e30" for i in range(len(body))})
    typed = [outcome for kind, outcome in both_ways if kind == "typed"]
    assert len(typed) >= 8
    assert any("time_us" in non_finite for _, non_finite in typed)


def test_a_file_of_no_rows_types_as_before(
    tmp_path: Path, both_ways: list[tuple[str, Any]]
) -> None:
    header, _ = _golden_cells()
    (tmp_path / "results.csv").write_text(",".join(header) + "\n", encoding="utf-8")
    assert len(load(tmp_path)) == 0
    assert [kind for kind, _ in both_ways] == ["typed"]


@pytest.mark.parametrize("cell", ["1.5", "1e30", "-1e30", "18446744073709551615", "0.5"])
def test_a_count_that_is_not_a_whole_int64_is_refused(tmp_path: Path, cell: str) -> None:
    # The golden run's count column has no empty cell: the old cast took 1.5 as 1 and 1e30
    # as -2**63 without a word.
    header, body = _golden_cells()
    body[3][header.index("count")] = cell
    (tmp_path / "results.csv").write_text(
        "".join(",".join(line) + "\n" for line in [header, *body]), encoding="utf-8"
    )
    with pytest.raises(UsageError, match="column count holds a value that is not a whole number"):
        load(tmp_path)


def test_whole_counts_at_int64_edges_load(tmp_path: Path) -> None:
    header, body = _golden_cells()
    body[3][header.index("count")] = "9223372036854775807"
    body[4][header.index("count")] = "-0"
    (tmp_path / "results.csv").write_text(
        "".join(",".join(line) + "\n" for line in [header, *body]), encoding="utf-8"
    )
    counts = load(tmp_path)["count"]
    assert counts.dtype == "int64"
    assert (counts.iloc[3], counts.iloc[4]) == (2**63 - 1, 0)
