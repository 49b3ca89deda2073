"""What a p2p run shows when it is done: the matrices, the heatmap, the verdict (last)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from colbench import text
from colbench.commands.p2p import results
from colbench.commands.p2p.budget import Plan
from colbench.commands.p2p.config import P2PConfig
from colbench.commands.p2p.links import Samples, Verdict, judge
from colbench.errors import ExitCode, UsageError
from colbench.results.rundir import RunDir
from colbench.text import Column

#: Exit status when --fail-below finds a link below its limit (as a failed gate).
FAIL_BELOW_EXIT = int(ExitCode.DATA_ERROR)


def matrices(frame: Any) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float]]:
    """(src, dst) -> bandwidth in GB/s, and -> latency in microseconds: with --repeat, the
    median over the passes (one pass that met a busy host does not make a pair slow)."""
    medians = frame.groupby(["src_rank", "dst_rank"])[["bw_gbps", "latency_us"]].median()
    bw = {(int(s), int(d)): float(v) for (s, d), v in medians["bw_gbps"].items()}
    lat = {(int(s), int(d)): float(v) for (s, d), v in medians["latency_us"].items()}
    return bw, lat


def samples_of(frame: Any) -> tuple[Samples, Samples]:
    """(src, dst) -> bandwidth in GB/s, and -> latency in microseconds: one value per
    pass, in pass order (what the verdict judges)."""
    bw: dict[tuple[int, int], list[float]] = {}
    lat: dict[tuple[int, int], list[float]] = {}
    for (src, dst), rows in frame.sort_values("repeat").groupby(["src_rank", "dst_rank"]):
        bw[(int(src), int(dst))] = [float(v) for v in rows["bw_gbps"]]
        lat[(int(src), int(dst))] = [float(v) for v in rows["latency_us"]]
    return bw, lat


def node_of(frame: Any) -> dict[int, str]:
    nodes = {int(r.src_rank): str(r.src_node) for r in frame.itertuples()}
    nodes.update({int(r.dst_rank): str(r.dst_node) for r in frame.itertuples()})
    return nodes


def verdict_of(frame: Any, cfg: P2PConfig) -> Verdict:
    bw, lat = samples_of(frame)
    return judge(bw, lat, node_of(frame), cfg.bw_pct, cfg.latency_pct, cfg.fail_below_pct)


def matrix_text(values: dict[tuple[int, int], float], nodes: dict[int, str], title: str) -> str:
    """A src x dst table; ``-`` where nothing was measured (the diagonal, idle pairs)."""
    ranks = sorted(nodes)
    # 4 significant digits fit in 9 characters ("0.0003988"), plus a space between.
    width = max(10, *(len(str(r)) + 1 for r in ranks))
    columns = [Column("src", width, gap=""), *(Column(str(r), width, gap="") for r in ranks)]
    columns.append(Column("node", gap="  "))
    lines = [f"# {title} (rows: src rank, columns: dst rank)"]
    lines.append(text.line([c.title for c in columns], columns, lead=""))
    for src in ranks:
        cells = [f"{values[(src, dst)]:.4g}" if (src, dst) in values else "-" for dst in ranks]
        lines.append(text.line([src, *cells, nodes[src]], columns, lead=""))
    return "\n".join(lines)


def report(run_dir: Path, cfg: P2PConfig) -> int:
    frame = results.load(run_dir)
    if frame.empty:
        raise UsageError(f"{run_dir / results.FILE_NAME} holds no rows: no pair was measured")
    bw, lat = matrices(frame)
    nodes = node_of(frame)
    verdict = verdict_of(frame, cfg)
    passes = int(frame["repeat"].max()) + 1 if len(frame) else 0
    print(
        f"colbench: {len(bw)} ordered pairs x {passes} pass(es) in {run_dir / results.FILE_NAME}",
        file=sys.stderr,
    )
    if cfg.plot:
        from colbench.commands.p2p.heatmap import write_heatmap

        path = write_heatmap(run_dir / "p2p.png", bw, lat, nodes, frame)
        print(f"colbench: heatmap: {path}", file=sys.stderr)
    sys.stderr.flush()
    size = int(frame["size_bytes"].iloc[0]) if len(frame) else 0
    small = int(frame["latency_bytes"].iloc[0]) if len(frame) else 0
    of = f", median of {passes} passes" if passes > 1 else ""
    print(matrix_text(bw, nodes, f"bandwidth at {size} B, GB/s{of}"))
    print(matrix_text(lat, nodes, f"latency at {small} B, us{of}"))
    lines = [*verdict.lines, *cut_lines(_meta(run_dir).get("plan"))]
    for line in lines:
        print(line)
    sys.stdout.flush()
    if verdict.per_link is not None:
        results.record_verdicts(run_dir, verdict.per_link)
    _record(run_dir, verdict, lines)
    return FAIL_BELOW_EXIT if verdict.failing else int(ExitCode.OK)


def cut_lines(plan: Any) -> list[str]:
    """The verdict's word on a plan cut to keep to --max-time (meta.json's ``plan``; none
    in files of runs before it, or when nothing was cut)."""
    if not isinstance(plan, dict) or not plan.get("cut"):
        return []
    asked, ran = Plan(**plan["asked"]), Plan(**plan["ran"])
    return [
        f"verdict: measured {ran.text()}, cut from {asked.text()} to keep to --max-time "
        f"{plan['max_time_s']:g} s ({', '.join(plan['cut'])}; meta.json's plan)"
    ]


def _meta(run_dir: Path) -> dict[str, Any]:
    try:
        return RunDir(run_dir).read_meta()
    except (OSError, ValueError):  # missing, or not JSON
        return {}


def _record(run_dir: Path, verdict: Verdict, lines: list[str]) -> None:
    try:
        meta = RunDir(run_dir).read_meta()
    except (OSError, ValueError):  # missing, or not JSON
        return
    meta["verdict"] = {
        "judged": verdict.judged,
        "lines": lines,
        "slow_nodes": list(verdict.slow_nodes),
        "slow_links": [list(pair) for pair in verdict.slow_links],
        "failing_links": [[link.low, link.high] for link in verdict.failing],
    }
    RunDir(run_dir).write_meta(meta)
