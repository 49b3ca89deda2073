"""After the ranks: the verdict, and what it writes (health.jsonl, health.prom, health.png
by colbench.commands.health.heatmap, the drain list; docs/health.md says what each holds)
and prints (the table, the pair matrix, one line per named node). Exit code 1 when a node
is CRITICAL, else 0.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from colbench import reading, text
from colbench.commands.health import floors as floor_files
from colbench.commands.health.config import SAMPLES_FILE, HealthConfig
from colbench.commands.health.judge import (
    CRITICAL,
    FLEET,
    LINK_CHECKS,
    SEVERITY,
    WARN,
    Finding,
    Samples,
    against_fleet,
    against_floors,
    link_medians,
    samples_of,
)
from colbench.commands.p2p.link_tests import MIN_NODES
from colbench.commands.p2p.report import matrix_text
from colbench.errors import ExitCode
from colbench.host.launchers.gpus import normal_bus_id
from colbench.host.protocol import Failure
from colbench.results import metafile, tables
from colbench.results.rundir import RunDir
from colbench.text import Column

JSONL_FILE, PROM_FILE, PLOT_FILE = "health.jsonl", "health.prom", "health.png"
SAMPLES = reading.Kind("health samples file", 256 * 1024**2)


def drain_failed(run_dir: Path, cfg: HealthConfig, failure: Failure) -> str | None:
    """A dead or hung rank's node into ``--drain-list`` and meta.json's verdict (the run
    judged nothing else); its name, or None where the run cannot tell which rank failed,
    or the ranks had not met to name their nodes. Rank 0 emptied the list as the run
    started, so a list left empty says that nothing is known. A list that cannot be
    written is said in one line: the run's own exit code stands."""
    rank = failure.rank
    hosts = (RunDir(run_dir).meta_or_none() or {}).get("rank_hosts") or []
    node = hosts[rank] if rank is not None and 0 <= rank < len(hosts) else None
    if node is None:
        return None
    what = "hung" if failure.exit_code == ExitCode.TIMEOUT else "failed"
    line = f"health: CRITICAL {node}: rank {rank} {what} (exit {failure.exit_code})"
    if cfg.drain_list is not None and _write_drain_list(cfg.drain_list, f"{node}\n"):
        line += f"; written to {cfg.drain_list}"
    try:
        RunDir(run_dir).update_meta(
            verdict={"lines": [line], "critical": [node], "warn": []}, report_time=time.time()
        )
    except (OSError, ValueError) as exc:
        print(f"colbench: warning: health: cannot write the verdict: {exc}", file=sys.stderr)
    print(f"colbench: {line}", file=sys.stderr)
    return node


def _write_drain_list(path: str, text: str) -> bool:
    """Write the list; a list that cannot be written is said in one line, and the run's
    own exit code stands."""
    try:
        tables.write_text(path, text)
    except OSError as exc:
        print(f"colbench: warning: health: cannot write the drain list: {exc}", file=sys.stderr)
        return False
    return True


def start_drain_list(cfg: HealthConfig) -> None:
    """Empty ``--drain-list`` as the run starts: a list left from an earlier run must not
    outlive a run that ends before it writes its own (a launcher's SIGTERM, a crash)."""
    if cfg.drain_list is not None:
        _write_drain_list(cfg.drain_list, "")


def report(run_dir: Path, cfg: HealthConfig) -> int:
    """Judge the run's samples, write the files, print; the exit code."""
    doc = json.loads(reading.read_text(run_dir / SAMPLES_FILE, SAMPLES))
    samples = samples_of(doc)
    meta = RunDir(run_dir).read_meta()
    if cfg.floors_path is not None:
        floors, learned_on = floor_files.load(cfg.floors_path)
        _warn_fingerprint(learned_on, floor_files.fingerprint(meta), cfg.floors_path)
        findings, judged_by = against_floors(samples, floors), f"floors {cfg.floors_path}"
    else:
        findings, judged_by = against_fleet(samples), "the fleet's median"
    findings = attach(findings, samples, meta.get("hardware") or {}, meta.get("backend"))
    write_jsonl(run_dir / JSONL_FILE, findings, judged_by)
    write_prom(run_dir / PROM_FILE, findings, meta.get("run_id", run_dir.name))
    critical = sorted({f.node for f in findings if f.verdict == CRITICAL and f.node != FLEET})
    if cfg.drain_list is not None:
        tables.write_text(cfg.drain_list, "".join(f"{n}\n" for n in critical))
    if cfg.plot:
        from colbench.commands.health.heatmap import nothing_to_draw, write_heatmap

        empty = nothing_to_draw(findings, samples)
        if empty is None:
            path = write_heatmap(run_dir / PLOT_FILE, findings, samples)
            print(f"colbench: heatmap: {path}", file=sys.stderr, flush=True)
        else:
            print(f"colbench: note: {empty}", file=sys.stderr, flush=True)
    print(table(findings))
    pair_matrix = _pair_matrix(samples)
    if pair_matrix:
        print("\n" + pair_matrix)
    lines = verdict_lines(findings, judged_by)
    print("\n" + "\n".join(lines))
    # The checks that are a collective of their own, beside the published results.
    references = floor_files.place_health([asdict(f) for f in findings], meta)
    for line in floor_files.health_lines(references):
        print(f"colbench: reference: {line}", file=sys.stderr)
    RunDir(run_dir).update_meta(
        references=references,
        verdict={
            "lines": lines,
            "critical": critical,
            "warn": sorted({f.node for f in findings if f.verdict == WARN}),
        },
        report_time=time.time(),
    )
    return int(ExitCode.DATA_ERROR) if critical else int(ExitCode.OK)


def _warn_fingerprint(learned: Mapping[str, Any], now: Mapping[str, Any], path: str) -> None:
    differ = metafile.machine_differences(learned, now, (*floor_files.LEARNED_ON, "nics", "nodes"))
    for name, then, current in differ:
        print(
            f"colbench: warning: --floors {path} was learned on {name} {then}, this run has "
            f"{current}: its false-alarm rates may not hold",
            file=sys.stderr,
        )


def _order(findings: Sequence[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.node == FLEET, f.node, f.check, f.size_bytes))


def write_jsonl(path: Path, findings: Sequence[Finding], judged_by: str) -> None:
    rows = [{**asdict(f), "judged_by": judged_by} for f in _order(findings)]
    for row in rows:
        for key in ("busbw_gbps", "fleet_gbps", "floor_gbps"):
            if row[key] is not None:
                row[key] = round(row[key], 6)
    tables.write_text(path, "".join(json.dumps(row) + "\n" for row in rows))


def _labels(f: Finding) -> str:
    node = f.node.replace("\\", "\\\\").replace('"', '\\"')
    return f'node="{node}",check="{f.check}",size_bytes="{f.size_bytes}"'


def write_prom(path: Path, findings: Sequence[Finding], run_id: str) -> None:
    """Prometheus text exposition format (node_exporter's textfile collector)."""
    ordered = _order(findings)
    lines = [
        "# HELP colbench_health_busbw_gbps Bus bandwidth of a health check on a node, GB/s.",
        "# TYPE colbench_health_busbw_gbps gauge",
        *(
            f"colbench_health_busbw_gbps{{{_labels(f)}}} {f.busbw_gbps:.6g}"
            for f in ordered
            if f.busbw_gbps
        ),
        "# HELP colbench_health_floor_gbps The floor the check was judged against, GB/s.",
        "# TYPE colbench_health_floor_gbps gauge",
        *(
            f"colbench_health_floor_gbps{{{_labels(f)}}} {f.floor_gbps:.6g}"
            for f in ordered
            if f.floor_gbps
        ),
        "# HELP colbench_health_verdict 0 OK, 1 WARN, 2 CRITICAL, -1 not judged.",
        "# TYPE colbench_health_verdict gauge",
        *(f"colbench_health_verdict{{{_labels(f)}}} {SEVERITY[f.verdict]}" for f in ordered),
        "# HELP colbench_health_run_timestamp_seconds When the run was judged.",
        "# TYPE colbench_health_run_timestamp_seconds gauge",
        f'colbench_health_run_timestamp_seconds{{run_id="{run_id}"}} {time.time():.0f}',
    ]
    tables.write_text(path, "\n".join(lines) + "\n")


def table(findings: Sequence[Finding]) -> str:
    header = ("node", "check", "size_bytes", "busbw_gbps", "fleet_gbps", "floor_gbps", "verdict")
    rows = [
        (
            f.node,
            f.check,
            str(f.size_bytes),
            text.number(f.busbw_gbps or None),
            text.number(f.fleet_gbps),
            text.number(f.floor_gbps),
            f.verdict,
        )
        for f in _order(findings)
    ]
    columns = text.fit([Column(h, align="<", gap="  ") for h in header], rows)
    return "\n".join(text.line(r, columns, lead="") for r in [header, *rows])


def verdict_lines(findings: Sequence[Finding], judged_by: str) -> list[str]:
    """One line per named node, gravest first, with its evidence; else the all-clear."""
    nodes = sorted({f.node for f in findings if f.node != FLEET})
    judged = [f for f in findings if SEVERITY[f.verdict] >= 0 and f.node != FLEET]
    lines = []
    for tier in (CRITICAL, WARN):
        for node in nodes:
            mine = [f for f in judged if f.node == node]
            bad = [f for f in mine if f.verdict == tier]
            if not bad or (tier == WARN and any(f.verdict == CRITICAL for f in mine)):
                continue
            worst = bad[0]
            where = where_text(worst)
            lines.append(
                f"health: {tier} {node}: {len(bad)} of {len(mine)} checks; {worst.check} "
                f"{text.number(worst.busbw_gbps or None)} GB/s{_against(worst)}"
                + (f"; {where}" if where else "")
            )
    few = len(nodes) < MIN_NODES and not judged
    if not lines:
        lines.append(
            f"health: no node named among {len(nodes)} node{'' if len(nodes) == 1 else 's'} "
            f"({len(judged)} checks judged{f': fewer than {MIN_NODES} nodes' if few else ''})"
        )
    if judged_by.startswith("floors"):
        lines.append(f"health: judged against {judged_by}")
    elif few:
        # Nothing was judged: saying "judged against the fleet's median" would read as a verdict.
        lines.append(
            f"health: nothing to judge against: no --floors given, and the fleet's median "
            f"needs {MIN_NODES} nodes"
        )
    else:
        lines.append(f"health: judged against {judged_by} (no --floors given)")
    return lines


def _against(f: Finding) -> str:
    """What a named finding fell below: its floor (the evidence says which), or the
    fleet's median; the fleet's figure beside a floor where there is one."""
    if f.floor_gbps is None:
        return f" against the fleet's {text.number(f.fleet_gbps)} ({f.evidence})"
    fleet = "" if f.fleet_gbps is None else f"; the fleet's {text.number(f.fleet_gbps)}"
    return f", {f.evidence}{fleet}"


#: More ranks than this in the rail-by-rail matrix: it is printed node by node.
MATRIX_RANKS = 16


def _pair_matrix(samples: Samples) -> str:
    """The pair checks' links as p2p prints its matrix (median over the passes): the
    sendrecv rank by rank (node by node, each pair's slowest rail, past MATRIX_RANKS
    ranks), the all_reduce node by node; a node's row is its first rank."""
    titles = {
        "pair": "pair sendrecv busbw, rail by rail",
        "pair_all_reduce": "pair all_reduce busbw over both nodes' ranks",
    }
    out = []
    for (check, size), links in sorted(samples.by_check.items()):
        if check not in titles or not links:
            continue
        by_node = len({r for pair in links for r in pair}) > MATRIX_RANKS
        title = "pair sendrecv busbw, each pair's slowest rail" if by_node else titles[check]
        values = link_medians(samples, links, by_node)
        nodes = {r: samples.names[r] for pair in values for r in pair}
        out.append(matrix_text(values, nodes, f"{title} at {size} B, GB/s"))
    return "\n\n".join(out)


# Which GPU and which NIC a finding is about, where the run can tell (the judge's
# ``singled_out``): the rank's GPU from its PCI address in its node's hardware facts
# (meta.json's ``hardware``), and for the pair checks the NIC that carries its traffic.
#
# The NIC: the one nearest the GPU on the PCI tree (hardware.node's ``closest_gpu``, the
# one NCCL's topology picks for that GPU's network traffic); on gloo, which sends through
# the host's sockets, the interface toward the coordinator (the route the ranks met by).
# Where neither holds, no NIC is named: a guess would send someone to reseat the wrong
# cable.
#: NIC kinds that carry no traffic between nodes.
LOCAL_KINDS = ("loopback", "virtual")


def attach(
    findings: Sequence[Finding],
    samples: Samples,
    hardware: Mapping[str, Any],
    backend: str | None,
) -> list[Finding]:
    """The findings with ``gpu`` and ``nic`` filled in where the run can tell."""
    out = []
    for f in findings:
        if not f.singled_out or f.rank is None:
            out.append(f)
            continue
        facts = hardware.get(f.node) or {}
        buses = samples.gpu_bus_ids
        index, gpu = _gpu(facts, buses[f.rank] if f.rank < len(buses) else None)
        nic = _nic(facts, index, backend) if f.check in LINK_CHECKS else None
        out.append(replace(f, gpu=gpu, nic=nic))
    return out


def _gpu(facts: Mapping[str, Any], bus_id: str | None) -> tuple[int | None, str | None]:
    """(NVML's index, the text) of the GPU at ``bus_id``; the address alone where the
    node's facts lack it (no NVML)."""
    if not bus_id:
        return None, None
    for gpu in facts.get("gpus") or []:
        if gpu.get("bus_id") and normal_bus_id(gpu["bus_id"]) == normal_bus_id(bus_id):
            return gpu["index"], f"GPU {gpu['index']} ({gpu['name']}, {bus_id})"
    return None, f"GPU {bus_id}"


def _nic(facts: Mapping[str, Any], gpu_index: int | None, backend: str | None) -> str | None:
    if gpu_index is not None:
        for nic in facts.get("nics") or []:
            if nic.get("closest_gpu") == gpu_index and nic.get("kind") not in LOCAL_KINDS:
                return str(nic["name"])
    if backend == "gloo" and facts.get("interface"):
        return str(facts["interface"])
    return None


def where_text(f: Finding) -> str:
    """``rank 3: GPU 1 (NVIDIA H100 80GB HBM3, 0000:8a:00.0), NIC mlx5_1``; or ``rank
    3`` alone, or "" where the run cannot tell a rank from its node."""
    if not f.singled_out or f.rank is None:
        return ""
    parts = [p for p in (f.gpu, f.nic and f"NIC {f.nic}") if p]
    return f"rank {f.rank}" + (": " + ", ".join(parts) if parts else "")
