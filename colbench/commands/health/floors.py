"""Floors learned from healthy runs: per check, a WARN and a CRITICAL level, each with
the false-alarm rate it implies and the smallest degradation it sees.

**What is learned.** ``colbench health learn RUN...`` reads each run's health.jsonl:
every node's figure of every check (the median of its passes). On the log scale, a
healthy node's figure in a new run varies by the run (the machine's drift) and by the
node (node-to-node spread). The runs' means give the between-run spread, the nodes'
distance from their run's mean the within-run spread; a new figure's standard deviation
about the grand mean is ``sqrt(between**2 + within**2)``, and it is treated as the gate's
drift statistic (colbench.stats.drift.RunSpread) with as many draws as runs: the
prediction error ``* sqrt(1 + 1/K)`` and Student's t with K - 1 degrees of freedom, the
conservative count (nodes of one run drift together).

**The floors.** A floor at false-alarm rate q is ``exp(mean - t(q, K - 1) * scale)``:
a healthy node falls below it with probability q per check. WARN at 1%, CRITICAL at
0.1%. The smallest degradation a floor sees is the gate's detectable margin
(drift.detectable_margin): a node slowed that much falls below it 80% of the time.

floors.json carries ``schema_version`` and the fingerprint of the hardware it was
learned on (the gate's machine fingerprint, plus each node's NIC kind and rate from
meta.json's hardware facts); judging against floors of another fingerprint warns.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from colbench import reading, text
from colbench.commands.gate.checks import DEFAULT_POWER
from colbench.errors import UsageError
from colbench.results import metafile, tables
from colbench.results.rundir import RunDir
from colbench.stats import drift
from colbench.text import Column

_FLOOR_COLUMNS = (Column("check", 18), Column("size_bytes", 10), Column("floors"))

#: floors.json's format. History: 1, the first; 2 records ``health_version``, the
#: health.samples.json version of the runs learned from (2 judges the pair sendrecv rank
#: by rank and adds the pair all_reduce): floors of version 1 read as learned from 1.
SCHEMA_VERSION = 2
KIND = "colbench health floors"
MIN_RUNS = 10
#: What floors and the runs they judge must share, beyond the NICs.
LEARNED_ON = (*metafile.MUST_MATCH, "health_version")
WARN_RATE = 0.01
CRITICAL_RATE = 0.001
FLOORS = reading.Kind("floors file", 16 * 1024**2)
JSONL = reading.Kind("health.jsonl", 256 * 1024**2)


@dataclass(frozen=True)
class Floor:
    check: str
    size_bytes: int
    #: The healthy figure: exp of the mean log figure over runs and nodes.
    typical_gbps: float
    sd_log: float
    runs: int
    figures: int
    warn_gbps: float
    critical_gbps: float
    warn_rate: float
    critical_rate: float
    #: A node this much below the typical figure falls under the floor 80% of the time.
    warn_sees_pct: float
    critical_sees_pct: float

    def rate(self, verdict: str) -> float:
        return self.critical_rate if verdict == "CRITICAL" else self.warn_rate


def read_figures(run: Path) -> list[dict[str, Any]]:
    """A run's health.jsonl (a directory or the file itself)."""
    path = run / "health.jsonl" if run.is_dir() else run
    if not path.exists():
        raise UsageError(f"{run}: no health.jsonl (is it a `colbench health` run directory?)")
    lines = reading.read_text(path, JSONL).splitlines()
    try:
        return [json.loads(line) for line in lines if line.strip()]
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON lines: {exc}") from None


def fingerprint(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The gate's machine fingerprint and the nodes' NICs (kind and rate) toward the
    coordinator: what makes floors of one fleet apply to another."""
    found = metafile.fingerprint(meta)
    nics = set()
    for facts in (meta.get("hardware") or {}).values():
        iface = facts.get("interface")
        for nic in facts.get("nics") or []:
            if nic.get("name") == iface:
                nics.add(f"{nic.get('kind')} {nic.get('rate_gbit_s')} Gb/s")
    found["nics"] = sorted(nics)
    found["nodes"] = len(meta.get("hardware") or {})
    # What a check's figure means changed with the samples' version: floors of another
    # version state rates for another figure.
    found["health_version"] = int(meta.get("health_version") or 1)
    return found


def floor_of(check: str, size: int, per_run: Sequence[Sequence[float]]) -> Floor:
    """One check's floors from each run's node figures (GB/s)."""
    logs = [[math.log(v) for v in run if v > 0] for run in per_run]
    logs = [run for run in logs if run]
    means = [statistics.fmean(run) for run in logs]
    within = [x - m for run, m in zip(logs, means, strict=True) for x in run]
    between_var = statistics.variance(means) if len(means) > 1 else 0.0
    within_var = sum(d * d for d in within) / max(1, len(within) - len(logs))
    spread = drift.RunSpread(
        statistics.fmean(means), math.sqrt(between_var + within_var), len(logs)
    )
    levels = {}
    for rate in (WARN_RATE, CRITICAL_RATE):
        floor = math.exp(spread.center_log - drift.t_critical(rate, spread.dof) * spread.scale)
        margin = drift.detectable_margin(spread, rate, DEFAULT_POWER)
        sees = -math.expm1(-margin)
        levels[rate] = (floor, 100 * sees)
    return Floor(
        check,
        size,
        math.exp(spread.center_log),
        spread.sd_log,
        len(logs),
        len(within),
        levels[WARN_RATE][0],
        levels[CRITICAL_RATE][0],
        WARN_RATE,
        CRITICAL_RATE,
        levels[WARN_RATE][1],
        levels[CRITICAL_RATE][1],
    )


def learn(runs: Sequence[str], out: str) -> int:
    """``colbench health learn``: floors from at least MIN_RUNS healthy runs of one
    fingerprint into ``out``; the exit code."""
    # Each run read once: its figures and meta.json serve the checks and the floors.
    read = [_health_run(Path(run)) for run in runs]
    metas = [meta for meta, _ in read]
    _refuse_runs_twice([Path(run) for run in runs], metas)
    if len(runs) < MIN_RUNS:
        raise UsageError(f"health learn needs at least {MIN_RUNS} healthy runs, got {len(runs)}")
    per_check: dict[tuple[str, int], list[list[float]]] = defaultdict(list)
    prints = []
    for run, (meta, figures) in zip(map(Path, runs), read, strict=True):
        prints.append((run, fingerprint(meta)))
        by_check: dict[tuple[str, int], list[float]] = defaultdict(list)
        for f in figures:
            if f.get("busbw_gbps") and f["check"] != "world_straggler":
                by_check[(f["check"], int(f["size_bytes"]))].append(float(f["busbw_gbps"]))
        for key, values in by_check.items():
            per_check[key].append(values)
    first_run, first = prints[0]
    for run, other in prints[1:]:
        differ = metafile.machine_differences(first, other, (*LEARNED_ON, "nics"))
        if differ:
            name, a, b = differ[0]
            what = "by another colbench health" if name == "health_version" else "on other hardware"
            raise UsageError(f"{run} was measured {what} than {first_run}: {name} {b} vs {a}")
    floors = [floor_of(c, s, v) for (c, s), v in sorted(per_check.items()) if len(v) >= MIN_RUNS]
    if not floors:
        _refuse_no_shared_check(per_check, metas)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "health_version": first["health_version"],
        "fingerprint": first,
        "runs": [str(r) for r in runs],
        "floors": [asdict(f) for f in floors],
    }
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    tables.write_text(out, json.dumps(doc, indent=1) + "\n")
    for floor in floors:
        print(floor_line(floor))
    print(
        f"colbench: floors of {len(floors)} checks from {len(runs)} runs in {out}", file=sys.stderr
    )
    return 0


def _health_run(run: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run's meta.json ({} without one) and its figures: a path that is not a health run
    is named before the runs are counted."""
    if not run.exists():
        raise UsageError(
            f"health learn: {run} does not exist (give `colbench health` run directories)"
        )
    figures = read_figures(run)
    return (RunDir(run).meta_or_none() if run.is_dir() else None) or {}, figures


def _refuse_runs_twice(runs: Sequence[Path], metas: Sequence[Mapping[str, Any]]) -> None:
    """One run given twice (the same path, or a copy) would count its figures twice:
    the runs would look closer than they are and the floors sit too close to the typical
    figure, so a healthy node falls below them. A copy keeps meta.json's run_id (the
    directory's name) and the time it was judged; two runs in directories of one name
    differ in that time."""
    seen: dict[Any, Path] = {}
    for run, meta in zip(runs, metas, strict=True):
        figures = run / "health.jsonl" if run.is_dir() else run
        keys: list[Any] = [figures.resolve()]
        if meta.get("run_id"):
            keys.append((str(meta["run_id"]), meta.get("report_time")))
        for key in keys:
            if key in seen:
                if isinstance(key, Path):
                    again = "" if str(run) == str(seen[key]) else f" (as {seen[key]})"
                    what = f"{run} is given twice{again}"
                else:
                    what = f"{run} is a copy of {seen[key]} (run_id {key[0]})"
                raise UsageError(
                    f"health learn: {what}: its figures would count twice, and floors "
                    "learned from too little spread name healthy nodes"
                )
        seen.update(dict.fromkeys(keys, run))


def _refuse_no_shared_check(
    per_check: Mapping[tuple[str, int], Sequence[Any]], metas: Sequence[Mapping[str, Any]]
) -> None:
    """No floor at all: the runs measured different checks or sizes (health levels), none
    in MIN_RUNS of them."""
    held = ", ".join(f"{c} {s} B in {len(v)}" for (c, s), v in sorted(per_check.items()))
    levels: dict[str, int] = defaultdict(int)
    for meta in metas:
        levels[str(meta.get("level") or "unknown")] += 1
    of_level = ", ".join(f"{level} {n}" for level, n in sorted(levels.items()))
    raise UsageError(
        f"health learn: no check is in {MIN_RUNS} of the {len(metas)} runs, as a floor "
        f"needs (runs of one --level measure the same checks): {held or 'no figures'}; "
        f"runs by --level: {of_level}"
    )


def floor_line(f: Floor) -> str:
    """One check's floors, as ``health learn`` prints them."""
    said = (
        f"B: typical {f.typical_gbps:.4g} GB/s, WARN below {f.warn_gbps:.4g} ({f.warn_rate:.0%} "
        f"false alarms, sees {f.warn_sees_pct:.0f}% less), CRITICAL below "
        f"{f.critical_gbps:.4g} ({f.critical_rate:.1%}, sees {f.critical_sees_pct:.0f}% less)"
    )
    return text.line((f.check, f.size_bytes, said), _FLOOR_COLUMNS, lead="")


def load(
    path: str, option: str = "--floors"
) -> tuple[dict[tuple[str, int], Floor], dict[str, Any]]:
    """floors.json: the floors by (check, size) and the fingerprint; refused when it is
    not one, or of a newer schema (the error names ``option``, the one that gave it)."""
    try:
        doc = json.loads(reading.read_text(path, FLOORS))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{option} {path} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise UsageError(f"{option} {path} is not a floors file of `colbench health learn`")
    version = doc.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise UsageError(
            f"{option} {path} has schema_version {version!r}; this colbench reads up to "
            f"{SCHEMA_VERSION}"
        )
    floors = {(f["check"], int(f["size_bytes"])): Floor(**f) for f in doc["floors"]}
    learned_on = dict(doc.get("fingerprint") or {})
    learned_on["health_version"] = int(doc.get("health_version") or 1)
    return floors, learned_on


#: Health's checks that are a collective of their own over a node or the world, the ones a
#: references file can hold: check -> (op, whether it spans one node).
HEALTH_CHECKS = {
    "intra_all_reduce": ("all_reduce", True),
    "intra_all_gather": ("all_gather", True),
    "world": ("all_reduce", False),
}


def as_references(path: str, gpus_per_node: int | None = None) -> list[Any]:
    """floors.json as entries of a references file (colbench.commands.references.table): per
    check that is a collective of its own, the fleet's typical figure (a measurement)
    and its WARN floor (a floor), on the hardware the floors were learned on."""
    import datetime as dt

    from colbench.commands.references.table import Reference, gpu_model

    floors, learned_on = load(path, "--from-floors")
    gpus = learned_on.get("gpus") or []
    model = next((gpu_model(g) for g in gpus if gpu_model(str(g))), None)
    if model is None:
        raise UsageError(
            f"--from-floors {path} was learned on no GPU colbench can name "
            f"({', '.join(map(str, gpus)) or 'cpu'}): nothing to compare published results to"
        )
    mtime = Path(path).stat().st_mtime
    date = dt.datetime.fromtimestamp(mtime, dt.timezone.utc).date().isoformat()
    stem = Path(path).stem
    source = {"url": Path(path).resolve().as_uri()}
    out = []
    for (check, size), floor in sorted(floors.items()):
        if check not in HEALTH_CHECKS:
            continue
        op, one_node = HEALTH_CHECKS[check]
        nodes = 1 if one_node else learned_on.get("nodes")
        hardware: dict[str, Any] = {"gpu": model}
        if gpus_per_node is not None:
            hardware["gpus_per_node"] = gpus_per_node
        if isinstance(nodes, int) and nodes > 0:
            hardware["nodes"] = nodes
        nics = learned_on.get("nics") or []
        if len(nics) == 1:
            hardware["nic"] = str(nics[0])
        note = f"colbench health floors, {floor.runs} runs, {floor.figures} figures"
        for kind, gbps in (("measurement", floor.typical_gbps), ("floor", floor.warn_gbps)):
            out.append(
                Reference(
                    id=f"{stem}-{check}-{size}-{'typical' if kind == 'measurement' else 'warn'}",
                    source=source,
                    date=date,
                    kind=kind,
                    op=op,
                    busbw_gbps=round(gbps, 3),
                    size_bytes=size,
                    hardware=hardware,
                    note=note,
                )
            )
    return out


def place_health(
    findings: Iterable[Mapping[str, Any]],
    meta: Mapping[str, Any],
    references: str | Path | None = None,
) -> dict[str, Any]:
    """Health's node checks (each node's own ranks; the median over nodes) and its whole-
    world all_reduce, each beside the published results for as many GPUs (placed by
    colbench.commands.references.place): one placement per span, ``{"table", "node": ...,
    "world": ...}``."""
    from colbench.commands.references.place import as_number, place
    from colbench.commands.references.table import load as load_references

    refs = load_references(references)
    local = meta.get("local_world_size")
    if isinstance(local, dict) and len(set(local.values())) == 1:
        local = next(iter(local.values()))
    per_node = local if isinstance(local, int) and not isinstance(local, bool) else None
    nodes = meta.get("nnodes") if isinstance(meta.get("nnodes"), int) else None
    world = meta.get("world_size") if isinstance(meta.get("world_size"), int) else None
    device = next((d for d in meta.get("devices") or [] if isinstance(d, str)), "")
    figures: dict[tuple[bool, str, int], list[float]] = defaultdict(list)
    for f in findings:
        check = HEALTH_CHECKS.get(str(f.get("check")))
        busbw = as_number(f.get("busbw_gbps"))
        if check is None or busbw is None or busbw <= 0:
            continue
        op, one_node = check
        figures[(one_node, op, int(f["size_bytes"]))].append(busbw)
    out: dict[str, Any] = {"table": "published" if references is None else str(references)}
    for one_node, span in ((True, "node"), (False, "world")):
        rows = [
            {
                "device": device,
                "op": op,
                "size_bytes": size,
                "busbw_gbps": statistics.median(values),
                "world_size": per_node if one_node else world,
                "nnodes": 1 if one_node else nodes,
                "status": "ok",
            }
            for (node_span, op, size), values in sorted(figures.items())
            if node_span == one_node
        ]
        if rows:
            out[span] = place(rows, meta, refs, out["table"])
    return out


def health_lines(placement: Mapping[str, Any]) -> list[str]:
    from colbench.commands.references.place import lines

    out: list[str] = []
    for span, what in (("node", "each node's own ranks"), ("world", "the whole world")):
        if span in placement:
            out += [f"{what}: {line}" for line in lines(placement[span])]
    return out
