"""``colbench predict``'s options, declared once with the options-table machinery
(colbench.options): its Typer parameters and its section of docs/options.md come from
:class:`PredictFlags`. Kept free of pandas and numpy so ``--help`` stays quick.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from colbench.options import Option, option, rows_of

_judge = functools.partial(option, concern="judge")
_output = functools.partial(option, concern="output")


@dataclass(frozen=True)
class PredictFlags:
    """The options of ``colbench predict`` beyond the runs (see docs/predict.md)."""

    ranks: str | None = _judge(
        None, "--ranks", help="Target world sizes to predict, e.g. 64,512,4096."
    )
    ranks_per_node: int | None = _judge(
        None,
        "--ranks-per-node",
        "--gpus-per-node",
        help="Ranks per node of the targets (alias --gpus-per-node; default: as measured).",
    )
    sizes: str | None = _judge(
        None, "--sizes", help="Sizes to predict, e.g. 4K-1G (default: the measured sizes)."
    )
    # Lists because Typer repeats an option only into a list; the defaults are None.
    op: list[str] | None = _judge(  # noqa: RUF009
        None, "--op", help="Only this op; repeatable (default: every modelled op measured)."
    )
    algo: list[str] | None = _judge(  # noqa: RUF009
        None,
        "--algo",
        help="ring, tree or double_tree; repeatable (default: all that apply). One --algo "
        "also names the algorithm of NCCL runs made without NCCL_ALGO.",
    )
    against: list[str] | None = _judge(  # noqa: RUF009
        None,
        "--against",
        help="A measured run to check the prediction against; repeatable "
        "(--against r6 --against r8). Must not be one of the fitted runs.",
    )
    min_size: str = _judge("4K", "--min-size", help="Judge --against errors only at sizes >= this.")
    max_error: float | None = _judge(
        None, "--max-error", help="Exit 1 when the largest |error| (%) of --against exceeds this."
    )
    out: str | None = _output(
        None, "--out", help="Write predict.csv, against.csv and meta.json into this directory."
    )
    plot: bool = _output(
        False,
        "--plot",
        help="Draw predict.png (time vs size per N, crossover vs N) into --out (default: .).",
    )


@functools.cache
def table() -> tuple[Option, ...]:
    """Every option of ``colbench predict``, in the order ``--help`` lists them."""
    return rows_of(PredictFlags)
