"""``colbench predict``'s options, declared once with the options-table machinery
(colbench.config.option_table): its Typer parameters and its section of docs/options.md come from
:class:`PredictOptions`. Kept free of pandas and numpy so ``--help`` stays quick.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from colbench.config.option_table import Option, judge, output, rows_of


@dataclass(frozen=True)
class PredictOptions:
    """The options of ``colbench predict`` beyond the runs (see docs/predict.md)."""

    ranks: str | None = judge(
        None, "--ranks", help="Target world sizes to predict, e.g. 64,512,4096."
    )
    ranks_per_node: int | None = judge(
        None,
        "--ranks-per-node",
        "--gpus-per-node",
        help="Ranks per node of the targets (alias --gpus-per-node; default: as measured).",
    )
    sizes: str | None = judge(
        None,
        "--sizes",
        help="Sizes to ask for at each target, e.g. 4K-1G (default: those the runs asked "
        "for); each is predicted at the size a sweep at the target would report.",
    )
    # Lists because Typer repeats an option only into a list; the defaults are None.
    op: list[str] | None = judge(  # noqa: RUF009
        None, "--op", help="Only this op; repeatable (default: every modelled op measured)."
    )
    algo: list[str] | None = judge(  # noqa: RUF009
        None,
        "--algo",
        help="ring, tree or double_tree; repeatable (default: all that apply). One --algo "
        "also names the algorithm of NCCL runs made without NCCL_ALGO.",
    )
    against: list[str] | None = judge(  # noqa: RUF009
        None,
        "--against",
        help="Measured runs to check the prediction against: every run up to the next "
        "option (--against r6 r8). Must not be fitted runs.",
    )
    dtype: str | None = judge(
        None, "--dtype", help="Only rows of this dtype (needed when the runs hold several)."
    )
    redop: str | None = judge(
        None,
        "--redop",
        help="Only reductions with this op, e.g. sum (needed when the runs hold several).",
    )
    allow_emulated: bool = judge(
        False,
        "--allow-emulated",
        help="Fit or check runs of an emulated fabric (sweep --ranks-per-gpu) beside runs of "
        "a real one (refused without it: emulated times measure the emulation).",
    )
    min_size: str = judge(
        "4K",
        "--min-size",
        help="Judge --against errors only from this size up, as a sweep at each row's ranks "
        "measures it (4K takes all_gather's 4032 B on 6 ranks).",
    )
    max_error: float | None = judge(
        None, "--max-error", help="Exit 1 when the largest |error| (%) of --against exceeds this."
    )
    out: str | None = output(
        None, "--out", help="Write predict.csv, against.csv and meta.json into this directory."
    )
    plot: bool = output(
        False,
        "--plot",
        help="Draw predict.png (time vs size per N, crossover vs N) into --out (default: .).",
    )


@functools.cache
def table() -> tuple[Option, ...]:
    """Every option of ``colbench predict``, in the order ``--help`` lists them."""
    return rows_of(PredictOptions)


AGAINST = "--against"


def spread_against(args: Sequence[str]) -> list[str]:
    """``--against r6 r8 --out d`` -> ``--against r6 --against r8 --out d``. The parser takes one
    value per option; without this, a second run after --against would silently join the fitted
    runs (the positional RUNs) and the check would be an interpolation. Every word after
    --against up to the next option (or ``--``) is a run to check against."""
    out: list[str] = []
    greedy = False  # among --against's runs, after its first
    for index, word in enumerate(args):
        if word == "--":
            return out + list(args[index:])
        if word.startswith("-") and word != "-":
            greedy = word.startswith(AGAINST + "=")
            out.append(word)
            continue
        if greedy:
            out.append(AGAINST)
        greedy = greedy or (bool(out) and out[-1] == AGAINST)
        out.append(word)
    return out
