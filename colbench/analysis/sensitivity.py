"""The gate's judgement of many rows at once: Holm across rows, and what it could see.

Two passes over the verdicts of :mod:`colbench.analysis.verdict`, after every row is
judged (both need the number of rows judged, m):

1. **Family-wise control.** Each row judged on performance is one hypothesis; its
   p-value is the smallest of its relative checks' rank tests that found it worse (busbw
   and time of one row come from the same timed calls: one question asked twice). Holm's
   procedure over the m rows keeps the chance that an unchanged run fails any row at
   alpha; a row the test alone would call worse but Holm does not is ``noisy``.
2. **Power.** Each relative check states the smallest slowdown it would have caught
   with the gate's power at alpha/m (Holm's strictest step, so the statement holds for
   every row), from the samples' spread (:mod:`colbench.analysis.power`); a row whose
   checks all need a margin beyond their limit larger than the limit is ``insensitive``.
"""

from __future__ import annotations

from collections.abc import Sequence

from colbench.analysis import power
from colbench.analysis.verdict import RowResult, Verdict, gravest

#: Family-wise control: Holm over the rows, or none (each row at alpha on its own).
FWER_CHOICES = ("holm", "none")


def control_family(rows: Sequence[RowResult], alpha: float, fwer: str) -> int:
    """Demote the rank-test ``worse`` verdicts that Holm does not back; m, the family."""
    family = [r for r in rows if r.judged]
    if fwer == "none":
        return len(family)
    p_values = [
        min(
            (c.p_value for c in r.checks if c.verdict is Verdict.WORSE and c.p_value is not None),
            default=1.0,
        )
        for r in family
    ]
    for row, p, kept in zip(family, p_values, power.holm(p_values, alpha), strict=True):
        if kept or p >= 1.0:
            continue
        for c in row.checks:
            if c.verdict is Verdict.WORSE and c.p_value is not None:
                c.verdict = Verdict.NOISY
        row.verdict = gravest({c.verdict for c in row.checks})
        row.notes.append(f"p={p:.3g} is not significant after Holm over {len(family)} rows")
    return len(family)


def state_power(rows: Sequence[RowResult], level: float, target_power: float) -> None:
    """Each relative check's detectable slowdown at ``level``; insensitive rows marked."""
    for row in rows:
        figures = []
        relative = [c for c in row.checks if c.change is not None]
        for c in relative:
            margin = None
            if c.log_sd is not None:
                margin = power.shift_margin(
                    c.log_sd, c.n_baseline, c.n_current, level, target_power
                )
            c.insensitive = power.insensitive(c.check.limit, c.check.worse_when, margin)
            if margin is not None:
                c.detectable = power.detectable_slowdown(c.check.limit, c.check.worse_when, margin)
            if not c.insensitive and c.detectable is not None:
                figures.append(c.detectable)
        row.detectable = min(figures, default=None)
        if relative and not figures and row.verdict is Verdict.SAME:
            row.verdict = Verdict.INSENSITIVE
            shown = [c.detectable for c in relative if c.detectable is not None]
            if shown:
                seen = f"it would see only slowdowns >= {min(shown):.0%}"
            else:
                seen = f"{row.n_baseline}/{row.n_current} samples cannot reach p <= {level:.2g}"
            row.notes.append(f"too noisy to judge: {seen} at {target_power:.0%} power")
