"""The gate's rows judged on the baseline window's between-run drift (colbench.stats.drift).

When the baseline holds at least ``--min-baseline-runs`` runs (told apart by ``run_id``),
every relative check of a judged row is decided by the drift test instead of the
within-run rank test, and one more hypothesis joins them: the run-level statistic of
each relative check (the median over the rows of log(current / baseline)).

**Family-wise control.** The overall statistic and the rows form one family under
weighted Holm (:func:`colbench.commands.gate.sensitivity.control_family`): the overall
hypothesis carries half the weight, the m rows share the other half, so the chance that
an unchanged run fails anything stays at alpha. The stated figures use each one's
strictest level: alpha / 2 for the overall statistic, alpha / (2 m) for a row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from colbench.commands.gate import sensitivity
from colbench.commands.gate.sensitivity import OverallResult
from colbench.commands.gate.verdict import CheckResult, RowResult, Verdict, gravest
from colbench.results.join import Pair, Sample, is_ok
from colbench.stats import drift, rank_tests


@dataclass
class DriftSummary(sensitivity.FamilySummary):
    """What the drift pass did: the family, the overall results, and the baseline's runs."""

    runs: int = 0


def baseline_runs(frame: Any) -> list[str]:
    """The run ids of a baseline's rows, oldest first."""
    if not len(frame) or "run_id" not in frame.columns:
        return []
    return list(dict.fromkeys(str(r) for r in frame["run_id"]))


def _run_medians(samples: Sequence[Sample], metric: str) -> dict[str, float]:
    """Each run's median of the metric over its samples with a positive measurement."""
    by_run: dict[str, list[float]] = {}
    for s in samples:
        value = s.get(metric)
        if is_ok(s) and value is not None and float(value) > 0:
            by_run.setdefault(str(s.get("run_id")), []).append(float(value))
    return {run: rank_tests.median(values) for run, values in by_run.items()}


@dataclass
class _Judged:
    """One relative check of one row under the drift test, with what the overall needs."""

    row: RowResult
    result: CheckResult
    base_medians: dict[str, float]
    current_log: float
    spread: drift.RunSpread


def judge_rows(
    judged: Sequence[tuple[Pair, RowResult]],
    runs: Sequence[str],
    min_runs: int,
    alpha: float,
    target_power: float,
    fwer: str = "holm",
) -> DriftSummary:
    """Re-judge every relative check of the rows on the drift test; Holm; the figures."""
    summary = DriftSummary(runs=len(runs))
    found = (
        _judge_check(pair, row, c, min_runs, alpha) for pair, row in judged for c in row.relative
    )
    cases = [case for case in found if case is not None]
    rows = list({id(case.row): case.row for case in cases}.values())
    summary.overall = _overall(cases, runs, alpha) if len(rows) >= 2 else []
    sensitivity.control_family(summary, rows, alpha, fwer, "overall statistic")
    for case in cases:
        margin = drift.detectable_margin(case.spread, summary.row_level, target_power)
        sensitivity.state_margin(case.result, margin)
    for o in summary.overall:
        if o.spread is not None:
            margin = drift.detectable_margin(o.spread, summary.overall_level, target_power)
            sensitivity.state_margin(o, margin)
    for _, row in judged:
        if row.relative:
            row.verdict = gravest({c.verdict for c in row.checks})
            sensitivity.settle_power(row, target_power, "no figure", " (between-run drift)")
    return summary


def _judge_check(
    pair: Pair, row: RowResult, c: CheckResult, min_runs: int, alpha: float
) -> _Judged | None:
    """The drift test of one check; None (and the check left without a figure) when the
    baseline holds the row in fewer than ``min_runs`` runs."""
    medians = _run_medians(pair.a, c.check.metric)
    current = [float(s[c.check.metric]) for s in pair.b if is_ok(s) and s.get(c.check.metric)]
    spread = drift.spread_of([math.log(v) for v in medians.values()])
    if spread is None or len(medians) < min_runs or not current:
        c.p_value, c.log_sd, c.detectable, c.insensitive = None, None, None, True
        c.verdict = Verdict.SAME if c.verdict is Verdict.SAME else Verdict.NOISY
        c.rule = f"the baseline holds this row in {len(medians)} of {min_runs} runs"
        row.notes.append(f"{c.check.metric}: {c.rule}")
        return None
    current_log = math.log(rank_tests.median(current))
    j = drift.judge(spread, current_log, c.check.worse_when, c.check.limit)
    c.baseline_median, c.change = math.exp(spread.center_log), j.change
    c.current_median, c.p_value, c.log_sd = math.exp(current_log), j.p_value, spread.sd_log
    c.rule = "drift test"
    c.verdict = _verdict(j, alpha)
    return _Judged(row, c, medians, current_log, spread)


def _verdict(j: drift.DriftJudgement, level: float) -> Verdict:
    """At the unadjusted level: Holm (_control) then demotes the worse it does not back."""
    if j.direction == 0:
        return Verdict.SAME
    if j.p_value is None or j.p_value > level:
        return Verdict.NOISY
    return Verdict.WORSE if j.direction > 0 else Verdict.BETTER


def _overall(cases: Sequence[_Judged], runs: Sequence[str], alpha: float) -> list[OverallResult]:
    """One run-level statistic per relative check, over the rows present in every run."""
    out = []
    checks = list(dict.fromkeys(case.result.check for case in cases))
    for check in checks:
        mine = [c for c in cases if c.result.check == check and set(runs) <= set(c.base_medians)]
        if len(mine) < 2:
            continue
        base = [[math.log(c.base_medians[r]) for r in runs] for c in mine]
        spread = drift.overall_spread(base)
        if spread is None:
            continue
        current = drift.overall_current(base, [c.current_log for c in mine])
        j = drift.judge(spread, current, check.worse_when, check.limit)
        out.append(
            OverallResult(check, len(mine), j.change, j.p_value, _verdict(j, alpha), spread=spread)
        )
    return out
