"""colbench.text: the one table formatter every printed table is laid out with."""

from __future__ import annotations

import math

from colbench import text
from colbench.text import Column

COLUMNS = (Column("op", 8, "<"), Column("size", 6), Column("note", gap="  "))


def test_a_row_pads_each_cell_after_its_gap_and_drops_trailing_blanks() -> None:
    assert text.line(("all_reduce", 4, "slow"), COLUMNS) == "  all_reduce      4  slow"
    assert text.line(("gather", 1024, ""), COLUMNS) == "  gather     1024"


def test_the_header_is_the_titles_laid_out_as_a_row_behind_a_hash() -> None:
    assert text.header(COLUMNS) == "# op         size  note"
    # With no lead, the first title's first character gives way to the hash.
    assert text.header(COLUMNS, lead="") == "#p         size  note"


def test_apart_keeps_a_space_before_a_value_that_fills_a_gapless_column() -> None:
    tight = (Column("a", 4, gap=""), Column("b", 4, gap=""))
    assert text.line(("1", "12345"), tight, lead="") == "   112345"
    assert text.line(("1", "12345"), tight, lead="", apart=True) == "   1 12345"
    assert text.line(("1", "1234"), tight, lead="", apart=True) == "   1 1234"


def test_fit_widens_columns_to_their_widest_cell_or_title() -> None:
    fitted = text.fit(
        (Column("node", align="<", gap="  "), Column("gbps", gap="  ")), [("a", "12.5")]
    )
    assert [c.width for c in fitted] == [4, 4]
    assert text.line(("a", "12.5"), fitted, lead="") == "a     12.5"


def test_number_says_dash_for_none_and_nan() -> None:
    # The four copies this replaced differed on NaN: compare's and crosscheck's said '-',
    # health's and contend's 'nan'. A NaN in a results table is a missing value: '-'.
    assert text.number(None) == "-"
    assert text.number(math.nan) == "-"
    assert text.number(1234567.0) == "1.235e+06"
    assert text.number(0.000398765) == "0.0003988"


def test_markdown() -> None:
    assert text.markdown(("a", "b"), [(1, "x")]) == ["| a | b |", "|---|---|", "| 1 | x |"]
