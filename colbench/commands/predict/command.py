"""``colbench predict`` as a plain function: load, fit, predict, check, print, write."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from colbench.bench import ops
from colbench.bench.ops.data import DTYPES, parse_dtypes, parse_redops
from colbench.commands.predict import data, engine, report
from colbench.commands.predict.models import ALGORITHMS
from colbench.commands.predict.options import PredictOptions
from colbench.config.sizes import parse_size, parse_sizes
from colbench.errors import ExitCode, UsageError
from colbench.results.join import fabric_warnings
from colbench.results.series import load_runs

#: The largest world a target may have: beyond the largest jobs run (about 10^5 GPUs), a
#: prediction extrapolates a model fitted at a few ranks by orders of magnitude.
MAX_TARGET_RANKS = 2**20


def _targets(text: str | None) -> list[int]:
    if text is None:
        return []
    try:  # an empty part ("64,,512") is no int either
        worlds = sorted({int(part) for part in text.split(",")})
    except ValueError:
        raise UsageError(f"bad --ranks {text!r}: give world sizes, e.g. 64,512,4096") from None
    if worlds[0] < 2:
        raise UsageError(f"bad --ranks {text!r}: world sizes of 2 ranks or more, e.g. 64,512")
    if worlds[-1] > MAX_TARGET_RANKS:
        raise UsageError(
            f"bad --ranks {text!r}: {worlds[-1]} ranks is beyond any job; colbench predicts "
            f"up to {MAX_TARGET_RANKS} ranks"
        )
    return worlds


def _algos(given: Sequence[str]) -> list[str]:
    for algo in given:
        if algo not in ALGORITHMS:
            raise UsageError(f"bad --algo {algo!r}: choose {', '.join(ALGORITHMS)}")
    return list(dict.fromkeys(given))


def _ranks_per_node(flags: PredictOptions, fitted: Sequence[data.Measured]) -> int | None:
    """--ranks-per-node, else the one value of the fitted runs; None (each target on one
    node) when every fitted run ran on one node."""
    if flags.ranks_per_node is not None:
        return flags.ranks_per_node
    if all(m.nnodes == 1 for m in fitted):
        return None
    seen = sorted({m.ranks_per_node for m in fitted})
    if len(seen) > 1:
        shown = ", ".join(map(str, seen))
        raise UsageError(
            f"the fitted runs differ in ranks per node ({shown}): say the targets' with "
            "--ranks-per-node"
        )
    return seen[0]


def _op_sizes(
    flags: PredictOptions, fitted: Sequence[data.Measured], elem_bytes: dict[str, int | None]
) -> dict[str, list[int]]:
    """Per op, the sizes to ask for at each target: --sizes, else those the runs asked
    for (all_gather's 4K, not the 4080 B of 3 ranks and the 4032 B of 6)."""
    wanted = list(dict.fromkeys(m.op for m in fitted))
    if flags.sizes is not None:
        sizes = [s for s in parse_sizes(flags.sizes) if s > 0] if flags.sizes.strip() else []
        if not sizes:
            raise UsageError(f"bad --sizes {flags.sizes!r}: give sizes above 0, e.g. 4K-1G")
        return {op: sizes for op in wanted}
    out = {}
    for op in wanted:
        asked = {(m.world_size, int(r)) for m in fitted if m.op == op for r in m.requested_bytes}
        requests = {r for _, r in asked}
        # An imported log knows only what each world size measured (4080 B of a 4K
        # request on 3 ranks): a size that is a larger request's layout at its own N is
        # that request again, not one more size.
        e = elem_bytes.get(op)
        aliases = {
            r for n, r in asked
            if any(big > r and engine.laid_out_bytes(op, big, e, n) == r for big in requests)
        }  # fmt: skip
        out[op] = sorted(requests - aliases)
    return out


def _elem_bytes(fitted: Sequence[data.Measured]) -> dict[str, int | None]:
    """Per op, the element size of its one dtype (data.select_kind). 1 for a dtype colbench
    cannot sweep (an imported float8 or uint64): ops split by rank round each rank's
    chunk to 16 bytes, so the layout comes out the same for any element of 1-16 bytes."""
    return {m.op: DTYPES[m.dtype].elem_bytes if m.dtype in DTYPES else 1 for m in fitted}


def _kind(flags: PredictOptions) -> tuple[str | None, str | None]:
    """--dtype and --redop in the rows' spelling (bf16 -> bfloat16); one of each at most."""
    dtype = redop = None
    if flags.dtype is not None:
        dtypes = parse_dtypes(flags.dtype)
        if len(dtypes) > 1:
            raise UsageError(f"--dtype takes one dtype for one fit, got {flags.dtype!r}")
        dtype = dtypes[0].name
    if flags.redop is not None:
        redops = parse_redops(flags.redop)
        if len(redops) > 1:
            raise UsageError(f"--redop takes one reduction op for one fit, got {flags.redop!r}")
        redop = redops[0]
    return dtype, redop


def _load(
    runs: Sequence[str], flags: PredictOptions, algos: Sequence[str]
) -> tuple[list[data.Measured], list[data.Measured]]:
    """The fitted and --against curves: one kind per op, never the same run twice."""
    against_paths = flags.against or []
    # Each run is read once: the fabric check looks at the rows the fit then uses.
    fitted_runs = load_runs(runs)
    against_runs = load_runs(against_paths) if against_paths else []
    given, loaded = [*runs, *against_paths], [*fitted_runs, *against_runs]
    frames = {str(path): run.frame for path, run in zip(given, loaded, strict=True)}
    for warning in fabric_warnings(frames, flags.allow_emulated):
        print(f"colbench: warning: {warning}", file=sys.stderr)
    wanted_ops = [ops.get(name).name for name in flags.op or ()]
    assumed = algos[0] if len(algos) == 1 else None
    fitted, against = data.select_kind(
        data.measured_of(fitted_runs, assumed, wanted_ops),
        data.measured_of(against_runs, assumed, wanted_ops),
        *_kind(flags),
    )
    if flags.against and not against:
        raise UsageError("the --against runs hold no rows of the fitted ops at 2 ranks or more")
    data.check_disjoint(fitted, against)
    return fitted, against


def _check_flags(flags: PredictOptions, targets: Sequence[int]) -> None:
    if flags.ranks_per_node is not None and not 1 <= flags.ranks_per_node <= MAX_TARGET_RANKS:
        raise UsageError(
            f"--ranks-per-node must be 1 to {MAX_TARGET_RANKS}, got {flags.ranks_per_node}"
        )
    if flags.plot and not targets:
        raise UsageError("--plot draws predictions: give --ranks")
    error = flags.max_error
    if error is not None and not flags.against:
        raise UsageError("--max-error judges --against runs: give --against RUN")
    if error is not None and not (math.isfinite(error) and error >= 0):
        raise UsageError(f"bad --max-error {error:g}: a percentage >= 0, e.g. 15")
    if flags.out or flags.plot:
        _check_writable(Path(flags.out or "."))


def _check_writable(out: Path) -> None:
    """Refuse an --out that cannot be written before any work, not after the whole table
    has been printed; nothing is created here (a refused run leaves no empty directory)."""
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write into --out {out}: {existing} is not a writable directory")


def run(runs: Sequence[str], flags: PredictOptions) -> int:
    """Print the fits, predictions, crossovers and checks; write --out; the exit code."""
    algos = _algos(flags.algo or [])
    targets = _targets(flags.ranks)
    min_size = parse_size(flags.min_size)
    _check_flags(flags, targets)
    fitted, against = _load(runs, flags, algos)
    fits = engine.fit_all(fitted)
    per_node = _ranks_per_node(flags, fitted)
    elem_bytes = _elem_bytes(fitted)
    op_sizes = _op_sizes(flags, fitted, elem_bytes)
    predicted = engine.predict_grid(fits, op_sizes, targets, per_node, algos, elem_bytes)
    crossings = engine.crossovers(fits, op_sizes, targets, per_node, algos)
    checked = engine.check_against(fits, against)
    lines = report.fit_lines(list(fits.values()))
    if not targets and not checked:
        lines.append("# no --ranks: the fits only (--ranks 64,512 predicts those world sizes)")
    if predicted:
        lines += report.prediction_lines(predicted, per_node)
    lines += report.skipped_lines(op_sizes, targets, elem_bytes)
    if crossings:
        lines += report.crossover_lines(crossings)
    if checked:
        lines += report.against_lines(checked, min_size, elem_bytes)
    print("\n".join(lines), flush=True)
    _write(runs, flags, list(fits.values()), predicted, checked, crossings, [*fitted, *against])
    return _verdict(flags, min_size, engine.largest_errors(checked, min_size, elem_bytes))


def _verdict(flags: PredictOptions, min_size: int, worst: dict[str, engine.Checked]) -> int:
    """--max-error's verdict, one line on stderr for a CI log; OK without --max-error."""
    if flags.max_error is None:
        return int(ExitCode.OK)
    if not worst:
        raise UsageError(
            f"--max-error judges sizes >= --min-size {flags.min_size}: the --against runs have none"
        )
    c = max(worst.values(), key=lambda c: abs(c.error_pct))
    where = f"({c.op}, {engine.size_text(c.size_bytes)}, {c.world_size} ranks)"
    failed = abs(c.error_pct) > flags.max_error
    print(
        f"colbench predict: {'FAIL' if failed else 'PASS'}: largest |error| from "
        f"{engine.size_text(min_size)} {abs(c.error_pct):.1f}% {where} "
        f"{'exceeds' if failed else 'within'} --max-error {flags.max_error:g}%",
        file=sys.stderr,
    )
    return int(ExitCode.DATA_ERROR if failed else ExitCode.OK)


def _write(
    runs: Sequence[str], flags: PredictOptions, fits: Sequence[engine.Fit],
    predicted: Sequence[engine.Predicted], checked: Sequence[engine.Checked],
    crossings: Sequence[engine.CrossRow], measured: Sequence[data.Measured],
) -> None:  # fmt: skip
    if flags.out:
        directory = report.write_outputs(
            flags.out, runs, flags.against or [], fits, predicted, checked, crossings
        )
        print(f"colbench: wrote {directory}/predict.csv and meta.json", file=sys.stderr)
    if flags.plot:
        from colbench.results.reporters.figures import save

        fig = report.figure(predicted, crossings, measured)
        path = save(fig, Path(flags.out or ".") / "predict.png")
        print(f"colbench: wrote {path}", file=sys.stderr)
