"""Holm's step-down procedure, weighted: the one multiple-testing correction.

Every verdict that asks many questions at once (the gate's rows and its overall test,
p2p's and health's links and nodes, the straggler test's ranks) keeps the chance that
noise alone rejects anything at alpha with this procedure (Holm 1979). Hypothesis i
carries a weight w_i (equal by default); ordered by p / w, the next one is rejected when
p <= alpha * w / (the weight still unrejected), and the first that is not stops the
rejections. Weights of 0 leave a hypothesis out of the family.

The decisions are made in that form, not read off the adjusted p-values
(p * remaining weight / w, made monotone): the two agree in exact arithmetic but not in
floats, where 11 * (0.05 / 11) > 0.05, so a p exactly at Holm's level would be rejected
by one and kept by the other. Holm's rule is "p <= level"; it is the one kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class HolmResult:
    rejected: list[bool]
    """Which hypotheses are rejected with the family-wise error rate kept at alpha."""
    adjusted: list[float]
    """Holm-adjusted p-values (1.0 for a hypothesis of weight 0)."""


def holm(
    p_values: Sequence[float], alpha: float, weights: Sequence[float] | None = None
) -> HolmResult:
    """Holm's step-down procedure over ``p_values`` at ``alpha``, weighted by ``weights``."""
    m = len(p_values)
    w = [1.0] * m if weights is None else [float(x) for x in weights]
    # Sorted once by p / w (ties: the lower index first); the weight still unrejected is
    # then a running sum from the end, so a family of thousands of links is quick.
    order = sorted((i for i in range(m) if w[i] > 0), key=lambda i: (p_values[i] / w[i], i))
    remaining = [0.0] * (len(order) + 1)
    for k in range(len(order) - 1, -1, -1):
        remaining[k] = remaining[k + 1] + w[order[k]]
    rejected, adjusted = [False] * m, [1.0] * m
    running, stopped = 0.0, False
    for k, i in enumerate(order):
        total = remaining[k]
        running = max(running, min(1.0, p_values[i] * total / w[i]))
        adjusted[i] = running
        stopped = stopped or p_values[i] > alpha * w[i] / total
        rejected[i] = not stopped
    return HolmResult(rejected, adjusted)
