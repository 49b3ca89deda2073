"""``colbench gate`` as a plain function: parse the flags, judge or accept, write reports;
and accepting a run as the gate's baseline, refusing one that would hide a break."""

from __future__ import annotations

import csv
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from colbench import reading
from colbench.commands.gate.checks import DEFAULT_KEEP, SizeWindow, parse_checks
from colbench.commands.gate.engine import other_machine, run_gate
from colbench.commands.gate.options import GateOptions
from colbench.commands.gate.result import GateRules, check_levels
from colbench.config import min_bw
from colbench.errors import ExitCode, UsageError
from colbench.results import metafile, tables
from colbench.results.join import RunFrames, fabric_warnings_of, load_pooled
from colbench.results.rows import STATUS_OK, STATUS_UNSUPPORTED, csv_path, frame_text
from colbench.results.rundir import RunDir


def run(baseline: str, current: Sequence[str], flags: GateOptions) -> int:
    """``colbench gate``: judge (or accept) the current run(s), print the table, write the
    reports; the exit code."""
    from colbench.commands.gate import report as gate_report

    if flags.variant_a is not None or flags.variant_b is not None:
        return _paired(baseline, current, flags)
    # One read of each run serves every step below: the fabric check, the judging, the
    # copy check and --update-baseline's checks.
    frames_of = RunFrames()
    for warning in fabric_warnings_of([baseline, *current], flags.allow_emulated, frames_of):
        print(f"colbench: warning: {warning}", file=sys.stderr)
    _check_arguments(baseline, current, flags)
    checks = parse_checks(flags.check or ())
    window = SizeWindow.parse(flags.min_size, flags.max_size)
    # The explicit flag wins; both are checked, so a bad variable is refused either way.
    from_environment = min_bw.from_environment()
    floor = min_bw.explicit(flags.min_avg_busbw_gbps) or from_environment

    rules = GateRules(
        tuple(checks),
        window,
        flags.alpha,
        flags.max_cv_pct / 100,
        fwer=flags.fwer,
        power=flags.power,
        min_judged=flags.min_judged,
        min_runs=flags.min_baseline_runs,
        floor=floor,
        any_machine=flags.any_machine,
        missing_ok=flags.missing_baseline_ok,
        accept_incomplete_baseline=flags.accept_incomplete_baseline,
    )
    if flags.update:
        return _accept(baseline, current, flags.keep, replace(rules, floor=None), frames_of)
    result = run_gate(baseline, current, rules, frames_of)
    _warn_if_self(baseline, current, frames_of)
    lines, markdown = gate_report.console_lines(result), gate_report.markdown(result)
    code = _report(lines, markdown, flags, not result.passed, result.passed_on_presence_only)
    if flags.junit:
        tables.write_text(flags.junit, gate_report.junit_xml(result))
    return code


def _accept(
    baseline: str, current: Sequence[str], keep: int, rules: GateRules, frames_of: RunFrames
) -> int:
    """--update-baseline: the gate shown, then the run accepted. A run the gate fails joins
    no window of accepted runs (its drift would hide the next regression); alone
    (``--keep 1``) it replaces the baseline, a deliberate re-baselining, and says so."""
    from colbench.commands.gate import report as gate_report

    # A broken run is refused for what it is (exit 2) before any gate is shown.
    for path in current:
        _refuse_as_baseline(path, frames_of)
    failed = False
    if csv_path(baseline).is_file():
        shown = run_gate(baseline, current, rules, frames_of)
        print("\n".join(gate_report.console_lines(shown)), flush=True)
        failed = not shown.passed
    if failed and keep > 1:
        print(
            f"colbench: {' + '.join(current)} not accepted: it fails the gate, and a window of "
            f"--keep {keep} pools only runs that pass (--keep 1 replaces the baseline with it)",
            file=sys.stderr,
        )
        return int(ExitCode.DATA_ERROR)
    target = update_baseline(current, baseline, keep, frames_of)
    said = " although it fails the gate" if failed else ""
    print(f"colbench: {' + '.join(current)} is the new baseline in {target}{said}", file=sys.stderr)
    return int(ExitCode.OK)


def _check_arguments(baseline: str, current: Sequence[str], flags: GateOptions) -> None:
    if not current:
        raise UsageError("give the current run(s) after the baseline")
    if flags.max_cv_pct <= 0:
        raise UsageError(f"--max-cv-pct must be positive, got {flags.max_cv_pct:g}")
    if flags.min_judged < 0:
        raise UsageError(f"--min-judged must be >= 0, got {flags.min_judged}")
    if flags.keep < 1:
        raise UsageError(f"--keep must be >= 1, got {flags.keep}")


def _run_ids(path: str, frames_of: RunFrames) -> set[str]:
    try:
        return {str(v) for v in frames_of(path)["run_id"].unique()}
    except (OSError, UsageError, KeyError):
        return set()  # no baseline (--missing-baseline-ok): nothing to be a copy of


def _warn_if_self(baseline: str, current: Sequence[str], frames_of: RunFrames) -> None:
    # Still useful for correctness and the floor, so not refused; but every performance
    # row then reads "same", which must not pass unremarked. A copy pooled into the
    # baseline by --update-baseline is the same run under another path: same run_id.
    in_baseline = _run_ids(baseline, frames_of)
    for run in current:
        if csv_path(run).resolve() == csv_path(baseline).resolve():
            why = "is the baseline itself"
        elif _run_ids(run, frames_of) & in_baseline:
            why = "shares its run_id with a run in the baseline (accepted into it already?)"
        else:
            continue
        print(
            f"colbench: warning: {run} {why}: performance may compare the run with itself "
            "(correctness and the floor are still judged)",
            file=sys.stderr,
        )


def _paired(run: str, current: Sequence[str], flags: GateOptions) -> int:
    """One interleaved run, variant B against A pair by pair (colbench.commands.gate.paired)."""
    from colbench.commands.gate import paired

    if current:
        raise UsageError("--variant-a/--variant-b judge variants of ONE run: give one run")
    a, b = flags.variant_a, flags.variant_b
    if not a or not b:
        raise UsageError("the paired gate needs both --variant-a and --variant-b")
    if a == b:
        raise UsageError(
            f"--variant-a and --variant-b both name {a}: B is judged against another A"
        )
    texts = flags.check or ()
    relative = [c for c in parse_checks(texts) if c.relative]
    if len(relative) != 1 or len(relative) != len(texts):
        raise UsageError(
            "the paired gate takes one relative check, e.g. --check busbw_gbps:-10% "
            "(B may be at most 10% worse than A)"
        )
    check_levels(flags.alpha, flags.power)
    window = SizeWindow.parse(flags.min_size, flags.max_size)
    frame = load_pooled([run])
    result = paired.paired_gate(frame, a, b, relative[0], window, flags.alpha, run, flags.power)
    if not result.rows:
        raise UsageError(
            f"no pairs of {a} and {b} rows to judge in {run} "
            "(an interleaved run, within --min-size/--max-size?)"
        )
    files = RunDir.of(run)
    meta = files.meta_or_none() or {}
    result.incomplete = metafile.incomplete(meta, len(frame)) if meta else ""
    # A whole run says whether its variants took turns (meta.json's ``interleaved``).
    if meta.get("status") == "complete" and not meta.get("interleaved"):
        print(
            f"colbench: warning: {run}'s variants ran one after another (--no-interleave), so "
            "a pair's two rows were not measured side by side: drift between the variants "
            "reads as a difference",
            file=sys.stderr,
        )
    lines, markdown = paired.console_lines(result), paired.markdown(result)
    code = _report(lines, markdown, flags, bool(result.failures), result.inconclusive)
    if flags.junit:
        tables.write_text(flags.junit, paired.junit_xml(result))
    return code


def _report(
    lines: list[str], markdown: str, flags: GateOptions, failed: bool, inconclusive: bool
) -> int:
    """The table on stdout, the Markdown report where asked and into the job summary on
    GitHub Actions; the exit code of a gate that failed, or passed inconclusive."""
    print("\n".join(lines), flush=True)
    if flags.report:
        tables.write_text(flags.report, markdown)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        tables.write_text(summary, markdown + "\n", append=True)
    if failed:
        return int(ExitCode.DATA_ERROR)
    if flags.fail_inconclusive and inconclusive:
        return int(ExitCode.INCONCLUSIVE)
    return int(ExitCode.OK)


def update_baseline(
    current: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    baseline: str | os.PathLike[str],
    keep: int = DEFAULT_KEEP,
    frames_of: RunFrames | None = None,
) -> Path:
    """Make the current run(s) the baseline: a rolling window of the last ``keep`` accepted
    runs, their rows in one results.csv and the first current run's meta.json.

    The baseline's own runs fill the rest of the window, newest first, unless measured
    on another machine. A run with wrong elements, rows without a measurement, or a
    status other than complete is refused: a broken baseline would let the next broken
    run pass. ``frames_of``: the command's reads of the runs (all made before the write).
    """
    currents = [current] if isinstance(current, (str, os.PathLike)) else list(current)
    load_run = frames_of or RunFrames()
    for path in currents:
        _refuse_as_baseline(path, load_run)
    metas = [RunDir.of(path).meta_or_none() for path in currents]
    target = Path(baseline)
    if target.suffix == ".csv":
        raise UsageError(f"--update-baseline needs a baseline directory, not the file {target}")
    ids = {str(m.get("run_id")) for m in metas if m}
    kept = _runs_to_keep(target, metas[0], keep - len(currents), ids, load_run)
    texts = [_lines(p) for p in currents]
    if kept:
        texts.insert(0, _lines(target, kept))
    if len({t[0] if t else "" for t in texts}) == 1:
        # One layout: the rows as measured, byte for byte.
        lines = texts[0][:1] + [line for t in texts for line in t[1:]]
    else:
        # Runs of different schema versions: one file in this version's layout.
        import pandas as pd

        frames = [load_pooled(currents, load_run)]
        if kept:
            old = load_run(target)
            frames.insert(0, old[old["run_id"].astype(str).isin(kept)])
        lines = [frame_text(pd.concat(frames, ignore_index=True))]
    meta = metas[0]
    if meta is not None and len(currents) + len(kept) > 1:
        runs = kept + [m.get("run_id") if m else None for m in metas]
        meta = {**meta, "pooled_runs": runs}
    try:
        target.mkdir(parents=True, exist_ok=True)
        # Written next to the target, then renamed: a reader never sees half a baseline.
        tables.replace_text(RunDir(target).table_path(), "".join(lines))
        if meta is not None:
            RunDir(target).write_meta(meta)
        else:
            RunDir(target).meta_path.unlink(missing_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write the baseline to {target}: {exc.strerror}") from None
    return target


def _runs_to_keep(
    target: Path, new_meta: dict[str, Any] | None, room: int, new_ids: set[str], load_run: RunFrames
) -> list[str]:
    """The run ids of the baseline's newest ``room`` runs, when they may stay; a run of
    the same id as a new one is that run accepted again, and goes."""
    if (
        room <= 0
        or not csv_path(target).is_file()
        or other_machine(RunDir.of(target).meta_or_none(), new_meta)
    ):
        return []
    order = list(dict.fromkeys(str(r) for r in load_run(target)["run_id"]))
    return [r for r in order if r not in new_ids][-room:]


def _lines(path: str | os.PathLike[str], runs: Sequence[str] | None = None) -> list[str]:
    """results.csv's lines (header first), only those of ``runs`` when given."""
    text = reading.read_text(csv_path(path), reading.TABLE).splitlines(keepends=True)
    if runs is None or not text:
        return text
    column = next(csv.reader(text[:1])).index("run_id")
    wanted = set(runs)
    return text[:1] + [line for line in text[1:] if next(csv.reader([line]))[column] in wanted]


def _refuse_as_baseline(path: str | os.PathLike[str], load_run: RunFrames) -> None:
    frame = load_run(path)
    bad_wrong = int((frame["wrong"].fillna(0) > 0).sum())
    # An unsupported row is a fact of the variant (NCCL has no tree all_gather), the
    # same in every run; an oom row is an accident of that run.
    not_ok = int((~frame["status"].isin([STATUS_OK, STATUS_UNSUPPORTED])).sum())
    if bad_wrong:
        why = f"{bad_wrong} row(s) have wrong elements"
    elif not_ok:
        why = f"{not_ok} row(s) have no measurement (status other than ok or unsupported)"
    else:
        meta = RunDir.of(path).meta_or_none()
        if meta is None or meta.get("status") == "complete":
            return
        why = f"its status is {meta.get('status')!r}, not complete"
    raise UsageError(f"refusing to accept {csv_path(path).parent} as the baseline: {why}")
