"""The paired gate's statistics: the exact signed-rank test, Holm, and its verdicts on
synthetic interleaved runs of known truth (identical variants, a 25% slower one)."""

from __future__ import annotations

import itertools
import json
import math
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from colbench.commands.gate.checks import Check, SizeWindow
from colbench.commands.gate.command import run as gate_run
from colbench.commands.gate.options import GateOptions
from colbench.commands.gate.paired import paired_gate
from colbench.errors import UsageError
from colbench.stats import rank_tests
from colbench.stats.rank_tests import signed_rank_p_greater
from tests.unit.rows import row, write_run

SIZES = [1 << 20, 1 << 22, 1 << 24]


def _brute_force_p(diffs: list[float]) -> float:
    """P(W+ >= observed) by listing every sign pattern (no ties in these inputs)."""
    ranked = sorted(abs(d) for d in diffs)
    rank = {v: i + 1 for i, v in enumerate(ranked)}
    observed = sum(rank[abs(d)] for d in diffs if d > 0)
    n = len(diffs)
    hits = sum(
        sum(r for r, s in zip(range(1, n + 1), signs, strict=True) if s) >= observed
        for signs in itertools.product([False, True], repeat=n)
    )
    return hits / 2**n


def test_signed_rank_matches_counting_every_sign_pattern() -> None:
    rng = random.Random(3)
    for n in (1, 4, 7, 10):
        diffs = [rng.uniform(-1, 1.5) for _ in range(n)]
        assert signed_rank_p_greater(diffs) == pytest.approx(_brute_force_p(diffs))
    assert signed_rank_p_greater([1, 2, 3, 4, 5]) == pytest.approx(1 / 32)
    assert signed_rank_p_greater([-1, 2, 3, 4, 5]) == pytest.approx(2 / 32)
    assert signed_rank_p_greater([-1, -2, -3]) == pytest.approx(1.0)
    assert signed_rank_p_greater([0, 0]) == 1.0


def test_normal_approximation_agrees_with_exact_near_the_switch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(5)
    diffs = [rng.gauss(0.15, 1) for _ in range(70)]
    exact = _exact_for_many(diffs, monkeypatch)
    assert 0.01 < exact < 0.5
    assert signed_rank_p_greater(diffs) == pytest.approx(exact, rel=0.05)


def _exact_for_many(diffs: list[float], monkeypatch: pytest.MonkeyPatch) -> float:
    # The same DP as the module's exact branch, run past its switch-over.
    monkeypatch.setattr(rank_tests, "EXACT_MAX_PAIRS", 10_000)
    p = rank_tests.signed_rank_p_greater(diffs)
    monkeypatch.undo()
    return p


def _run(slowdown: float, noise: float, rng: random.Random, repeats: int = 10) -> pd.DataFrame:
    """An interleaved run's rows: A and B per size and repeat, sharing each repeat's drift."""
    rows = []
    for repeat in range(repeats):
        drift = math.exp(rng.gauss(0, 0.3))  # the machine's state, shared by the pair
        for size in SIZES:
            base = size / 1e3 * drift
            for variant, factor in (("A", 1.0), ("B", 1.0 / (1 - slowdown))):
                time_us = base * factor * math.exp(rng.gauss(0, noise))
                rows.append({**row("all_reduce", size, time_us, variant=variant), "repeat": repeat})
    return pd.DataFrame(rows)


CHECK = Check.parse("busbw_gbps:-10%")


def test_identical_variants_rarely_fail_and_a_quarter_slower_one_always_does() -> None:
    rng = random.Random(11)
    window = SizeWindow.parse(None, None)
    same = [paired_gate(_run(0.0, 0.1, rng), "A", "B", CHECK, window, 0.05) for _ in range(200)]
    slow = [paired_gate(_run(0.25, 0.1, rng), "A", "B", CHECK, window, 0.05) for _ in range(50)]
    # Family-wise over the 3 rows and the pooled one: far below alpha, as B must be
    # worse than the 10% limit, not merely worse.
    assert sum(r.failures > 0 for r in same) <= 200 * 0.05
    assert all(r.failures > 0 for r in slow)
    assert all(r.pooled_change == pytest.approx(-0.25, abs=0.08) for r in slow)


def test_a_slowdown_beyond_the_stated_figure_is_caught_at_the_stated_power() -> None:
    # What the gate says it could see (the pooled row 'all', 30 pairs at Holm's 0.05/4)
    # is what it catches: 80% power, three binomial standard errors (0.037) of slack.
    rng = random.Random(8)
    window = SizeWindow.parse(None, None)
    told = paired_gate(_run(0.0, 0.1, rng), "A", "B", CHECK, window, 0.05)
    pooled = next(r for r in told.rows if r.key["op"] == "all")
    assert pooled.detectable is not None and not pooled.insensitive
    assert 0.10 < pooled.detectable < 0.25
    trials = 120
    caught = sum(
        paired_gate(
            _run(pooled.detectable * 1.02, 0.1, rng), "A", "B", CHECK, window, 0.05
        ).failures
        > 0
        for _ in range(trials)
    )
    assert caught / trials >= 0.80 - 0.1
    # A row of 10 pairs alone states a larger figure than all 30 together.
    alone = [r.detectable for r in told.rows if r.key["op"] != "all"]
    assert all(d is not None and d > pooled.detectable for d in alone)


def test_a_slowdown_within_the_limit_passes() -> None:
    rng = random.Random(2)
    window = SizeWindow.parse(None, None)
    results = [paired_gate(_run(0.05, 0.05, rng), "A", "B", CHECK, window, 0.05) for _ in range(50)]
    assert sum(r.failures > 0 for r in results) <= 2


def test_missing_rows_and_wrong_elements_fail() -> None:
    frame = _run(0.0, 0.05, random.Random(1), repeats=4)
    frame.loc[(frame["variant"] == "B") & (frame["size_bytes"] == SIZES[0]), "wrong"] = 3
    dropped = frame[~((frame["variant"] == "B") & (frame["size_bytes"] == SIZES[2]))]
    result = paired_gate(dropped, "A", "B", CHECK, SizeWindow.parse(None, None), 0.05)
    assert len(result.wrong) == 4 and len(result.missing) == 4
    assert result.failures == 8


def test_gate_command_runs_the_paired_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(4)
    run = write_run(tmp_path / "ab", _run(0.25, 0.05, rng).to_dict("records"))
    # A whole run that does not say its variants took turns ran them one after another.
    (run / "meta.json").write_text(json.dumps({"run_id": "ab", "status": "complete"}))
    junit = tmp_path / "gate.xml"
    options = GateOptions(check=["busbw_gbps:-10%"], variant_a="A", variant_b="B", junit=str(junit))
    code = gate_run(str(run), [], options)
    out, err = capsys.readouterr()
    assert code == 1
    assert "paired gate FAILED" in out and "Holm over 4 rows" in out
    # Its verdict line says what it could see, even when no row could promise a figure.
    assert ";  (" not in out.splitlines()[-1] and "power)" in out.splitlines()[-1]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "4" and suite.get("failures") != "0"
    assert "ran one after another (--no-interleave)" in err
    (run / "meta.json").write_text(
        json.dumps({"run_id": "ab", "status": "complete", "interleaved": True})
    )
    assert gate_run(str(run), [], options) == 1
    assert "one after another" not in capsys.readouterr().err


def test_the_paired_gate_fails_an_incomplete_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An interleaved run stopped by SIGTERM: every row kept is whole and alike, but most of
    # the plan is missing.
    run = write_run(tmp_path / "ab", _run(0.0, 0.05, random.Random(3)).to_dict("records"))
    meta = {"run_id": "ab", "status": "interrupted", "rows": 60, "rows_complete": False}
    (run / "meta.json").write_text(json.dumps(meta))
    options = GateOptions(check=["busbw_gbps:-10%"], variant_a="A", variant_b="B")
    assert gate_run(str(run), [], options) == 1
    out = capsys.readouterr().out
    assert "incomplete run" in out and "paired gate FAILED (incomplete run)" in out


@pytest.mark.parametrize(
    ("checks", "variants", "message"),
    [
        (["busbw_gbps:-10%", "time_us:+5%"], ("A", "B"), "one relative check"),
        (["busbw_gbps:1.0"], ("A", "B"), "one relative check"),
        (["busbw_gbps:-10%"], ("A", "C"), "no rows of variant 'C'"),
        (["busbw_gbps:-10%"], ("A", None), "both --variant-a and --variant-b"),
        (["busbw_gbps:-10%"], ("A", "A"), "both name A: B is judged against another A"),
    ],
)
def test_bad_paired_requests_are_one_line_errors(
    tmp_path: Path, checks: list[str], variants: tuple[str, str | None], message: str
) -> None:
    run = write_run(tmp_path / "ab", _run(0.0, 0.05, random.Random(1), 2).to_dict("records"))
    with pytest.raises(UsageError, match=message):
        gate_run(
            str(run),
            [],
            GateOptions(check=list(checks), variant_a=variants[0], variant_b=variants[1]),
        )
