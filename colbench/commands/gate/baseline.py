"""Accepting a run as the gate's baseline, and refusing one that would hide a break."""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from colbench import reading
from colbench.commands.gate.checks import DEFAULT_KEEP
from colbench.errors import UsageError
from colbench.results import metadata, tables
from colbench.results.join import RunFrames, load_pooled, read_meta
from colbench.results.rows import STATUS_OK, STATUS_UNSUPPORTED, csv_path, frame_text
from colbench.results.rundir import RunDir


def update_baseline(
    current: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    baseline: str | os.PathLike[str],
    keep: int = DEFAULT_KEEP,
    frames_of: RunFrames | None = None,
) -> Path:
    """Make the current run(s) the baseline: a rolling window of the last ``keep`` accepted
    runs, their rows in one results.csv and the first current run's meta.json.

    The current runs always stay; the baseline's own runs fill the rest of the window,
    newest first, unless they were measured on another machine (metadata.MUST_MATCH),
    which the window then drops. A run with wrong elements, rows without a measurement,
    or a status other than complete is refused: a broken baseline would let the next
    broken run pass. ``frames_of``: the command's reads of the runs (all made before the
    baseline is written).
    """
    currents = [current] if isinstance(current, (str, os.PathLike)) else list(current)
    load_run = frames_of or RunFrames()
    metas = []
    for path in currents:
        _refuse_as_baseline(path, load_run)
        metas.append(read_meta(path))
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
    if room <= 0 or not csv_path(target).is_file():
        return []
    old_meta = read_meta(target)
    if old_meta is not None and new_meta is not None:
        differ = metadata.machine_differences(
            metadata.fingerprint(old_meta), metadata.fingerprint(new_meta)
        )
        if differ:
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
        meta = read_meta(path)
        if meta is None or meta.get("status") == "complete":
            return
        why = f"its status is {meta.get('status')!r}, not complete"
    raise UsageError(f"refusing to accept {csv_path(path).parent} as the baseline: {why}")
