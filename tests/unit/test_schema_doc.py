"""docs/schema.md is generated from the row types and must match them (declare once)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from colbench.results.tables import TABLE_MODULES, Table, TableRow, every_table, markdown, register

SCHEMA_DOC = Path(__file__).resolve().parents[2] / "docs" / "schema.md"
TABLES = every_table()


def test_committed_schema_doc_is_current() -> None:
    assert SCHEMA_DOC.read_text() == markdown(TABLES), (
        "docs/schema.md is stale: python -m colbench.results.tables --markdown > docs/schema.md"
    )


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.file_name)
def test_every_column_says_what_it_means(table: Table) -> None:
    for f in dataclasses.fields(table.row_type):
        assert f.metadata.get("meaning", "").strip(), f"{table.file_name}: {f.name} lacks a meaning"
        assert "unit" in f.metadata, f"{table.file_name}: {f.name} lacks a unit (empty: none)"


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.file_name)
def test_every_version_has_its_history(table: Table) -> None:
    assert sorted(table.history) == list(range(1, table.version + 1))


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.file_name)
def test_units_follow_the_names(table: Table) -> None:
    for name, unit in table.units.items():
        if name.endswith("_us"):
            assert unit == "us", name
        if name.endswith("_gbps"):
            assert unit == "GB/s", name
        if name.endswith("_bytes"):
            assert unit == "B", name


def test_the_module_prints_the_doc() -> None:
    made = subprocess.run(
        [sys.executable, "-m", "colbench.results.tables", "--markdown"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    assert made.stdout == SCHEMA_DOC.read_text()


def _in_a_fresh_interpreter(code: str) -> str:
    made = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def test_rundir_imports_no_module_that_declares_another_table() -> None:
    # The registry lets rundir name TABLES without importing p2p (or skew).
    imported = _in_a_fresh_interpreter(
        "import sys, colbench.results.rundir; print(sorted(m for m in sys.modules if m in "
        f"{TABLE_MODULES!r}))"
    )
    assert imported == "['colbench.results.rows']"


def test_the_tables_keep_the_docs_order_whatever_imports_them_first() -> None:
    names = _in_a_fresh_interpreter(
        "import colbench.commands.p2p.results, colbench.results.init_rows, "
        "colbench.results.reporters.stragglers, "
        "colbench.results.rundir as r; print(' '.join(t.file_name for t in r.TABLES))"
    )
    assert names == "results.csv per_rank.csv init.csv p2p.csv"
    assert [t.file_name for t in TABLES] == names.split()


def test_a_table_of_an_unlisted_module_is_refused() -> None:
    class Stray(TableRow):
        pass

    with pytest.raises(ValueError, match=r"add tests\.unit\.test_schema_doc to"):
        register(Table("stray.csv", Stray, 1, {1: "first"}))
    assert "stray.csv" not in [t.file_name for t in every_table()]
