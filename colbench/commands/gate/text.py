"""What the gate's reports say about its statistics: the rule, the power, the family.

One wording for the console table, the Markdown report and the JUnit properties
(colbench.commands.gate.report), so that the three never disagree about what was tested.
"""

from __future__ import annotations

from colbench.commands.gate.result import GateResult
from colbench.commands.gate.sensitivity import OverallResult
from colbench.commands.gate.verdict import Verdict
from colbench.output import plural
from colbench.stats import rank_tests


def rule_text(result: GateResult) -> str:
    if result.drift is not None:
        return (
            f"each row's median is compared with the medians of the baseline's "
            f"{result.drift.runs} runs; a change beyond its limit is real when a one-sided "
            "t test of the current median against the runs' mean and between-run spread "
            f"(log scale, {result.drift.runs - 1} dof) finds it beyond the mean moved by the "
            f"limit (p <= {result.rules.alpha:g})"
        )
    text = (
        "medians of the samples are compared; a change beyond its limit is real when a "
        "one-sided exact Mann-Whitney U test finds the current samples beyond the baseline's "
        f"moved by the limit (p <= {result.rules.alpha:g}); with too few samples for that test, "
        "when every current sample lies beyond the moved baseline's range and the medians "
        "moved by more than twice the limit"
    )
    if result.overall:
        text += (
            "; the pooled test sums that test's U over the rows (stratified, van Elteren) "
            "and asks whether the rows together lie beyond their moved baselines"
        )
    return text


def power_text(result: GateResult) -> str:
    """What the gate could see: the worst detectable slowdown over the rows that could
    see one, the overall figure, the rows too noisy to judge, and what the figures
    assume; or why performance was not judged."""
    if result.not_judged:
        return result.not_judged
    if not result.performance_checked:
        return ""
    sensitive = [r.detectable for r in result.sensitive if r.detectable is not None]
    alone = _alone(result)
    if sensitive:
        text = f"sensitive to slowdowns >= {max(sensitive):.0%} on {plural(len(sensitive), 'row')}"
    elif alone:
        text = f"no row can be judged alone ({alone})"
    else:
        text = "sensitive on no row"
    if result.drift is not None:
        text += f" (between-run drift of {result.drift.runs} baseline runs)"
    text += _overall_text(result)
    if result.too_noisy and not alone:
        text += f"; {plural(result.too_noisy, 'row')} too noisy to judge"
    if result.drift is None and (sensitive or _overall_stated(result)):
        text += (
            f"; within-run spread only: a baseline of {result.baseline_runs} run(s) (the "
            f"drift test needs {result.rules.min_runs}) cannot tell a slowdown from a busy "
            "machine; gate variants run interleaved for that (--variant-a/--variant-b)"
        )
    if result.inconclusive and result.passed:
        text += (
            f"; performance inconclusive: fewer than {result.rules.min_judged} sensitive rows "
            "(--min-judged)"
        )
    return text


def _alone(result: GateResult) -> str:
    """Why the judged rows were left to the pooled test (their sample counts cannot reach
    their level: colbench.commands.gate.sensitivity.control_family); "" when some row can."""
    summary = result.pooled
    if summary is None or not summary.overall or summary.alone < summary.family:
        return ""
    counts = {(c.n_baseline, c.n_current) for r in result.rows for c in r.relative}
    best = min(rank_tests.smallest_one_sided_p(b, c) for b, c in counts)
    shown = ", ".join(f"{b}/{c}" for b, c in sorted(counts))
    return f"{shown} samples: p >= {best:.2g} > {summary.nominal_row_level:.2g}"


def _overall_stated(result: GateResult) -> bool:
    return any(o.detectable is not None for o in result.overall)


def _overall_text(result: GateResult) -> str:
    """The overall results' figures: the drift statistic's or the pooled test's."""
    text = ""
    name = "overall" if result.drift is not None else "pooled"
    for o in result.overall:
        if o.detectable is None:
            continue
        state = ", too noisy to judge" if o.insensitive else ""
        metric = f" {o.check.metric}" if len(result.overall) > 1 else ""
        text += f"; {name}{metric} >= {o.detectable:.0%} over {plural(o.rows, 'row')}{state}"
        if o.verdict is not Verdict.SAME:
            text += f" ({o.verdict.value}: {overall_change(o)})"
    return text


def overall_change(o: OverallResult) -> str:
    """The overall statistic's change and p, as the rows' cells show theirs."""
    p = f", p={o.p_value:.3g}" if o.p_value is not None else ""
    return f"median change {o.change:+.1%}{p}"


def power_rule(result: GateResult) -> str:
    summary = result.summary
    if summary is not None and summary.overall and result.rules.fwer == "holm":
        name = "overall statistic" if result.drift is not None else "pooled test"
        short = name.split()[0]
        rows = f"rows at >= {summary.row_level:.2g}"
        if summary.alone == summary.family:
            rows = (
                f"rows at >= {summary.nominal_row_level:.2g}, which no row's samples can "
                f"reach: their share goes to the {short} test"
            )
        elif summary.alone:
            rows += (
                f" ({plural(summary.alone, 'row')} whose samples cannot reach it left to the "
                f"{short} test)"
            )
        family = (
            f"weighted Holm over the {plural(result.family, 'row')} judged and the {name} "
            "(family-wise "
            f"false-alarm rate <= {result.rules.alpha:g}; {rows}, {short} at >= "
            f"{summary.overall_level:.2g})"
        )
    elif result.rules.fwer == "holm":
        family = (
            f"Holm over the {plural(result.family, 'row')} judged (family-wise false-alarm rate "
            f"<= {result.rules.alpha:g})"
        )
    else:
        family = f"no family-wise control (each row at {result.rules.alpha:g})"
    if result.drift is not None:
        return (
            f"{family}; detect: the smallest slowdown a row (or the run's median over rows) "
            f"would have shown at {result.rules.power:.0%} power, from the between-run spread of "
            f"the baseline's {result.drift.runs} runs"
        )
    pooled = " (or every row alike, pooled)" if result.overall else ""
    return (
        f"{family}; detect: the smallest slowdown a row{pooled} would have shown at "
        f"{result.rules.power:.0%} power, from the samples' spread"
    )


def overall_lines(result: GateResult) -> list[str]:
    """One line per overall result: its change, p and verdict."""
    if result.drift is not None:
        return [
            f"overall {o.check.metric}: {o.verdict.value}, {overall_change(o)} over {o.rows} "
            f"rows against {o.spread.runs} baseline runs (between-run SD "
            f"{o.spread.sd_log:.3f} in logs)"
            for o in result.drift.overall
            if o.spread is not None
        ]
    return [
        f"pooled {o.check.metric}: {o.verdict.value}, {overall_change(o)} "
        f"over {plural(o.rows, 'row')} "
        "(stratified rank test of every row's samples against its baseline's moved by the "
        "limit)"
        for o in result.overall
    ]
