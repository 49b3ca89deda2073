"""Whether each variant's rows ran the NCCL algorithm its NCCL_ALGO asked for.

A ring-vs-tree comparison is true only where NCCL ran what was asked: NCCL may run
another algorithm than the one named (older versions fall back to Ring, a tuner plugin
may choose otherwise). The rows' ``nccl_algo`` (what NCCL's own log said it chose, see
colbench.commands.sweep.probe) against the request, per variant and op, in one line each.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from colbench.config.variants import variant_env
from colbench.nccl.algo import asked
from colbench.output import plural


def ran_lines(label: str, frame: Any) -> list[str]:
    """``A NCCL_ALGO=Tree: all_reduce ran Tree in 12 of 12 rows, as asked`` and the like,
    for each variant and op of an NCCL run; nothing for runs NCCL did not measure."""
    nccl = frame[(frame["backend"] == "nccl") & (frame["status"] == "ok")]
    out = []
    for (variant, op), rows in nccl.groupby(["variant", "op"], sort=False):
        recorded = [str(a) for a in rows["nccl_algo"] if str(a) not in ("", "<NA>")]
        request = variant_env(str(variant)).get("NCCL_ALGO")
        allowed = asked(request, str(op)) if request is not None else None
        head = f"{label} {variant or '(no variant)'}: {op}"
        if not recorded:
            if allowed is not None:
                out.append(f"{head}: which algorithm NCCL ran is not recorded (no probe)")
            continue
        out.append(f"{head} {_verdict(Counter(recorded), len(rows), allowed)}")
    return out


def _verdict(ran: Counter[str], rows: int, allowed: frozenset[str] | None) -> str:
    shown = ", ".join(f"{algo} in {n}" for algo, n in ran.most_common())
    if allowed is None:
        # NCCL_ALGO may still be in the ranks' environment (the shell's, not a variant's).
        return f"ran {shown} of {plural(rows, 'row')} (its variant sets no NCCL_ALGO)"
    wanted = "/".join(sorted(allowed))
    good = sum(n for algo, n in ran.items() if algo in allowed)
    if good == rows:
        return f"ran {shown} of {plural(rows, 'row')}, as asked"
    return f"ran {shown} of {plural(rows, 'row')}: NOT {wanted} as asked in {rows - good}"
