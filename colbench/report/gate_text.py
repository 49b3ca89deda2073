"""What the gate's reports say about its statistics: the rule, the power, the family.

One wording for the console table, the Markdown report and the JUnit properties
(colbench.report.gate_report), so that the three never disagree about what was tested.
"""

from __future__ import annotations

from colbench.analysis.drift_rows import OverallResult
from colbench.analysis.gate import GateResult
from colbench.analysis.verdict import Verdict


def rule_text(result: GateResult) -> str:
    if result.drift is not None:
        return (
            f"each row's median is compared with the medians of the baseline's "
            f"{result.drift.runs} runs; a change beyond its limit is real when a one-sided "
            "t test of the current median against the runs' mean and between-run spread "
            f"(log scale, {result.drift.runs - 1} dof) finds it beyond the mean moved by the "
            f"limit (p <= {result.alpha:g})"
        )
    return (
        "medians of the samples are compared; a change beyond its limit is real when a "
        "one-sided exact Mann-Whitney U test finds the current samples beyond the baseline's "
        f"moved by the limit (p <= {result.alpha:g}); with too few samples for that test, "
        "when every current sample lies beyond the moved baseline's range and the medians "
        "moved by more than twice the limit"
    )


def power_text(result: GateResult) -> str:
    """What the gate could see: the worst detectable slowdown over the rows that could
    see one, and the rows too noisy to judge; or why performance was not judged."""
    if result.not_judged:
        return result.not_judged
    if not result.performance_checked:
        return ""
    sensitive = [r.detectable for r in result.sensitive if r.detectable is not None]
    text = (
        f"sensitive to slowdowns >= {max(sensitive):.0%} on {len(sensitive)} rows"
        if sensitive
        else "sensitive on no row"
    )
    text += _drift_text(result)
    if result.too_noisy:
        text += f"; {result.too_noisy} rows too noisy to judge"
    if result.drift is None and sensitive:
        text += (
            f"; within-run spread only: the baseline holds {result.baseline_runs} of the "
            f"{result.min_runs} runs needed to know this runner's drift"
        )
    if result.inconclusive and result.passed:
        text += (
            f"; performance inconclusive: fewer than {result.min_judged} sensitive rows "
            "(--min-judged)"
        )
    return text


def _drift_text(result: GateResult) -> str:
    """Whose spread the figures come from, and the overall statistic's figure."""
    drift = result.drift
    if drift is None:
        return ""
    text = f" (between-run drift of {drift.runs} baseline runs)"
    for o in drift.overall:
        if o.detectable is None:
            continue
        state = ", too noisy to judge" if o.insensitive else ""
        name = f" {o.check.metric}" if len(drift.overall) > 1 else ""
        text += f"; overall{name} >= {o.detectable:.0%} over {o.rows} rows{state}"
        if o.verdict is not Verdict.SAME:
            text += f" ({o.verdict.value}: {overall_change(o)})"
    return text


def overall_change(o: OverallResult) -> str:
    """The overall statistic's change and p, as the rows' cells show theirs."""
    p = f", p={o.p_value:.3g}" if o.p_value is not None else ""
    return f"median change {o.change:+.1%}{p}"


def power_rule(result: GateResult) -> str:
    if result.drift is not None:
        d = result.drift
        return (
            f"weighted Holm over the {result.family} rows judged and the overall statistic "
            f"(family-wise false-alarm rate <= {result.alpha:g}; rows at >= "
            f"{d.row_level:.2g}, overall at >= {d.overall_level:.2g}); detect: the smallest "
            f"slowdown a row (or the run's median over rows) would have shown at "
            f"{result.power:.0%} power, from the between-run spread of the baseline's "
            f"{d.runs} runs"
        )
    family = (
        f"Holm over the {result.family} rows judged (family-wise false-alarm rate "
        f"<= {result.alpha:g})"
        if result.fwer == "holm"
        else f"no family-wise control (each row at {result.alpha:g})"
    )
    return (
        f"{family}; detect: the smallest slowdown a row would have shown at "
        f"{result.power:.0%} power, from its samples' spread"
    )


def overall_lines(result: GateResult) -> list[str]:
    """One line per overall statistic (drift test only): its change, p and verdict."""
    if result.drift is None:
        return []
    return [
        f"overall {o.check.metric}: {o.verdict.value}, {overall_change(o)} over {o.rows} rows "
        f"against {o.spread.runs} baseline runs (between-run SD {o.spread.sd_log:.3f} in logs)"
        for o in result.drift.overall
    ]
