"""``colbench explain OP``: how one collective's size, count and bandwidths are defined."""

from __future__ import annotations

import textwrap

from colbench.bench.ops.base import Collective

FORMS = {"out": "out-of-place", "in": "in-place"}


def explain_text(coll: Collective) -> str:
    factor_doc = " ".join((coll.busbw_factor.__doc__ or "").split())
    lines = [
        f"{coll.name}: {coll.summary}",
        f"  timed call : {coll.torch_call}",
        f"  size       : {coll.size_rule}",
        f"  count      : {coll.count_rule}",
        "  algbw      : size_bytes / time, in GB/s (1 GB/s = 1e9 bytes/s)",
        f"  busbw      : {coll.busbw_rule}",
        f"  why        : {factor_doc}",
        f"  placements : {', '.join(FORMS[p] for p in coll.placements)}",
    ]
    if coll.sized:
        lines.append("  example    : a requested 1K of float32:")
        for n in (1, 2, 3, 8):
            lay = coll.layout(1024, 4, n)
            lines.append(
                f"               n={n}: count {lay.count}, size_bytes {lay.size_bytes}, "
                f"busbw factor {coll.busbw_factor(n):.4g}"
            )
    if coll.uses_redop:
        lines.append("  redop      : sum, prod, min, max, avg (avg on floating types only)")
    if coll.rooted:
        lines.append("  root       : --root (default 0)")
    if coll.notes:
        lines.append(f"  note       : {coll.notes}")
    for label, text in coll.details:
        lines.extend(
            textwrap.wrap(text, 92, initial_indent=f"  {label:<10} : ", subsequent_indent=" " * 15)
        )
    return "\n".join(lines)
