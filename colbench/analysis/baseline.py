"""Accepting a run as the gate's baseline, and refusing one that would hide a break."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from colbench.analysis.engine import load_pooled, read_meta
from colbench.errors import UsageError
from colbench.results import STATUS_OK, STATUS_UNSUPPORTED, csv_path, frame_text, load
from colbench.rundir import RunDir


def update_baseline(
    current: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    baseline: str | os.PathLike[str],
) -> Path:
    """Make the current run(s) the baseline: their results.csv (rows of several runs
    concatenated) and the first run's meta.json.

    A run with wrong elements, rows without a measurement, or a status other than
    complete is refused: a broken baseline would let the next broken run pass.
    """
    currents = [current] if isinstance(current, (str, os.PathLike)) else list(current)
    metas = []
    for path in currents:
        _refuse_as_baseline(path)
        metas.append(read_meta(path))
    target = Path(baseline)
    if target.suffix == ".csv":
        raise UsageError(f"--update-baseline needs a baseline directory, not the file {target}")
    texts = [csv_path(p).read_text(encoding="utf-8").splitlines(keepends=True) for p in currents]
    if len({t[0] if t else "" for t in texts}) == 1:
        # One layout: the rows as measured, byte for byte.
        lines = texts[0][:1] + [line for t in texts for line in t[1:]]
    else:
        # Runs of different schema versions: one file in this version's layout.
        lines = [frame_text(load_pooled(currents))]
    meta = metas[0]
    if meta is not None and len(currents) > 1:
        meta = {**meta, "pooled_runs": [m.get("run_id") if m else None for m in metas]}
    try:
        target.mkdir(parents=True, exist_ok=True)
        _replace(RunDir(target).table_path(), "".join(lines))
        if meta is not None:
            RunDir(target).write_meta(meta)
        else:
            RunDir(target).meta_path.unlink(missing_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write the baseline to {target}: {exc.strerror}") from None
    return target


def _replace(path: Path, text: str) -> None:
    # Write next to the target, then rename: a reader never sees half a baseline file.
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _refuse_as_baseline(path: str | os.PathLike[str]) -> None:
    frame = load(path)
    where = csv_path(path).parent
    bad_wrong = int((frame["wrong"].fillna(0) > 0).sum())
    if bad_wrong:
        raise UsageError(
            f"refusing to accept {where} as the baseline: {bad_wrong} row(s) have wrong elements"
        )
    # An unsupported row is a fact of the variant (NCCL has no tree all_gather), the
    # same in every run; an oom row is an accident of that run.
    not_ok = int((~frame["status"].isin([STATUS_OK, STATUS_UNSUPPORTED])).sum())
    if not_ok:
        raise UsageError(
            f"refusing to accept {where} as the baseline: {not_ok} row(s) have no "
            "measurement (status other than ok or unsupported)"
        )
    meta = read_meta(path)
    if meta is not None and meta.get("status") != "complete":
        raise UsageError(
            f"refusing to accept {where} as the baseline: its status is "
            f"{meta.get('status')!r}, not complete"
        )
