"""A run placed against the published results for its hardware: its large rows beside the
references that match what is known of it, most telling fact first (docs/references.md
says how). A floor (a health check's pass threshold) is a lower bound, not a typical
figure: it is reported as above or below, never averaged with measurements.

The placement is one plain dict: meta.json's ``references`` holds it, :func:`lines` prints
it. Rows are mappings of results.csv's columns (csv.DictReader's text, or an importer's
Rows), so this module needs neither pandas nor torch.
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from colbench.commands.references.table import Reference, gpu_model, load
from colbench.config.sizes import format_size
from colbench.output import plural

#: The smallest size whose busbw is compared: smaller rows are latency-bound and every
#: published figure is a large-message one.
LARGE_BYTES = 256 * 1024**2
FIELD = "references"
PCIE = "PCIe"


def as_number(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _whole(text: Any) -> int | None:
    value = as_number(text)
    return int(value) if value is not None and value == int(value) else None


def _algorithm(variant: str, meta: Mapping[str, Any]) -> str | None:
    """NCCL_ALGO as the variant or the recorded environment set it."""
    for part in (variant or "").split(","):
        key, _, value = part.partition("=")
        if key.strip() == "NCCL_ALGO" and value:
            return value.strip()
    env = meta.get("env") or {}
    return env.get("NCCL_ALGO") if isinstance(env, dict) else None


def run_facts(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> dict[str, Any]:
    """What the run says of its hardware: GPU model, GPUs per node, nodes, emulated."""
    devices = [r.get("device") for r in rows if r.get("device")]
    devices += [d for d in meta.get("devices") or [] if isinstance(d, str)]
    device = devices[0] if devices else None
    nodes = next((_whole(r.get("nnodes")) for r in rows if _whole(r.get("nnodes"))), None)
    if nodes is None and isinstance(meta.get("nnodes"), int):
        nodes = meta["nnodes"]
    world = next((_whole(r.get("world_size")) for r in rows if _whole(r.get("world_size"))), None)
    per_gpu = max([_whole(r.get("ranks_per_gpu")) or 1 for r in rows] or [1])
    emulated = per_gpu > 1 or any(r.get("fabric") == "emulated" for r in rows)
    gpus_per_node = world // nodes if world and nodes and world % nodes == 0 else None
    return {
        "device": device,
        "gpu": None if device == "cpu" else gpu_model(device),
        # Only a PCIe card's name says its fabric ("NVIDIA H100 PCIe"); SXM parts' do not.
        "fabric": PCIE if device and "pcie" in device.lower() else None,
        "gpus_per_node": gpus_per_node,
        "nodes": nodes,
        "emulated": emulated,
    }


def _label(refs: Sequence[Reference]) -> str:
    """What the matched references share: "2 x 8 x H100 NVLink4 NVSwitch"."""
    per_node = {r.gpus_per_node for r in refs}
    nodes = {r.nodes for r in refs}
    fabric = {r.hardware.get("fabric") for r in refs}
    text = "/".join(sorted({r.gpu for r in refs if r.gpu}))
    if len(per_node) == 1 and None not in per_node:
        text = f"{per_node.pop()} x {text}"
    if len(nodes) == 1 and None not in nodes:
        count = nodes.pop()
        text = f"{count} x {text}" if count and count > 1 else text
    elif nodes:
        text += f" on {min(n or 1 for n in nodes)}-{max(n or 1 for n in nodes)} nodes"
    if len(fabric) == 1 and None not in fabric:
        text += f" {fabric.pop()}"
    return text


def _narrow(
    cands: list[Reference], facts: Mapping[str, Any], algorithm: str | None
) -> tuple[list[Reference], list[str], list[str]]:
    """Candidates narrowed by each known fact in turn; the facts missing, and those no
    candidate shares (kept looser)."""
    missing: list[str] = []
    looser: list[str] = []
    for name, value, key in (
        ("GPUs per node", facts.get("gpus_per_node"), lambda r: r.gpus_per_node),
        ("nodes", facts.get("nodes"), lambda r: r.nodes),
        ("algorithm", algorithm, lambda r: (r.algorithm or "").lower() or None),
    ):
        if value is None:
            if name != "algorithm":
                missing.append(name)
            continue
        wanted = value.lower() if isinstance(value, str) else value
        same = [r for r in cands if key(r) == wanted]
        if name == "algorithm":
            # A reference that does not say its algorithm ran NCCL's default: keep it
            # beside those that say the same one, only when none says it.
            same = same or cands
            if not any(key(r) == wanted for r in cands):
                looser.append(f"no reference names algorithm {value}")
        elif same:
            cands = same
            continue
        elif name == "nodes":
            # Single-node and multi-node figures differ most: keep that line at least.
            alike = [r for r in cands if ((r.nodes or 1) > 1) == (int(value) > 1)]
            looser.append(f"none at {value} node(s)")
            cands = alike or cands
            if not alike:
                looser.append("none on as many nodes")
            continue
        else:
            looser.append(f"none at {value} {name}")
        cands = same or cands
    fabrics = {str(r.hardware["fabric"]) for r in cands if r.hardware.get("fabric")}
    if facts.get("fabric") == PCIE:
        # A PCIe card of the same model moves a fraction of an NVLink system's bytes.
        same = [r for r in cands if str(r.hardware.get("fabric", "")).startswith(PCIE)]
        if same:
            cands = same
        else:
            looser.append(f"the run's GPUs are PCIe cards; published: {', '.join(sorted(fabrics))}")
    elif len(fabrics) > 1:
        missing.append(f"fabric (published: {', '.join(sorted(fabrics))})")
    nics = {str(r.hardware["nic"]) for r in cands if r.hardware.get("nic")}
    if len(nics) > 1:
        missing.append(f"NIC (published: {', '.join(sorted(nics))})")
    return cands, missing, looser


def _summarise(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], dict[int, float]]:
    """(variant, op) -> size -> the median busbw of its measured rows (placements,
    repeats): what one figure of the run at that size is."""
    found: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row.get("status", "ok") not in ("ok", ""):
            continue
        size, busbw = _whole(row.get("size_bytes")), as_number(row.get("busbw_gbps"))
        if size is None or busbw is None or busbw <= 0:
            continue
        found[(row.get("variant") or "", str(row.get("op")))][size].append(busbw)
    return {
        key: {size: statistics.median(v) for size, v in sorted(sizes.items())}
        for key, sizes in found.items()
    }


def _source(ref: Reference) -> dict[str, Any]:
    return {
        "id": ref.id,
        "kind": ref.kind,
        "cite": ref.cite(),
        "url": ref.url(),
        "hardware": ref.hardware_label(),
        "size_bytes": ref.size_bytes,
        "busbw_gbps": ref.busbw_gbps,
    }


def _at_size(
    size: int, busbw: float, cands: Sequence[Reference], head: dict[str, str], largest: bool
) -> dict[str, Any]:
    """One row (``head``: its variant and op) beside the references at its size; where none
    measured at that size, those at other large sizes (and peaks) stand in, and that is
    said. A floor at another size judges only the run's largest row: floors are set at the
    largest sizes."""
    large = [r for r in cands if r.size_bytes is None or r.size_bytes >= LARGE_BYTES]
    typical = [r for r in cands if r.kind != "floor" and r.size_bytes == size]
    other_sizes = not typical
    if other_sizes:
        typical = [r for r in large if r.kind != "floor"]
    floors = [r for r in cands if r.kind == "floor" and r.size_bytes == size]
    if not floors and largest:
        floors = [r for r in large if r.kind == "floor"]
    used = typical + floors
    out: dict[str, Any] = {
        **head,
        "size_bytes": size,
        "busbw_gbps": round(busbw, 2),
        "matched": _label(used),
        "published_at_other_sizes": other_sizes and bool(typical),
        "sources": [_source(r) for r in used],
    }
    if typical:
        values = [r.busbw_gbps for r in typical]
        median = statistics.median(values)
        out["published_gbps"] = {"low": min(values), "high": max(values), "median": median}
        out["pct_of_published"] = round(100 * busbw / median, 1)
    if floors:
        out["floors"] = [
            {"id": r.id, "busbw_gbps": r.busbw_gbps, "above": busbw >= r.busbw_gbps} for r in floors
        ]
    return out


def place(
    rows: Sequence[Mapping[str, Any]],
    meta: Mapping[str, Any],
    refs: Sequence[Reference],
    table: str = "published",
) -> dict[str, Any]:
    """The run's large rows against the references that match it (meta.json's
    ``references``)."""
    facts = run_facts(rows, meta)
    out: dict[str, Any] = {"table": table, "facts": facts, "rows": []}
    if facts["gpu"] is None:
        device = facts["device"] or "unknown device"
        out["none"] = f"no published result for this hardware ({device}: no GPU model)"
        return out
    if facts["emulated"]:
        out["none"] = "emulated nodes (ranks sharing a GPU): no published result applies"
        return out
    same_gpu = [r for r in refs if r.gpu == facts["gpu"]]
    if not same_gpu:
        out["none"] = f"no published result for this hardware ({facts['gpu']})"
        return out
    for (variant, op), sizes in _summarise(rows).items():
        cands = [r for r in same_gpu if r.op == op]
        head = {"variant": variant, "op": op}
        if not cands:
            out["rows"].append(head | {"none": f"no published {op} on {facts['gpu']}"})
            continue
        cands, missing, looser = _narrow(cands, facts, _algorithm(variant, meta))
        wanted = {r.size_bytes for r in cands if r.size_bytes} & set(sizes)
        largest = max(sizes)
        if largest >= LARGE_BYTES:
            wanted.add(largest)
        if not wanted:
            none = f"no row at a published size, none at {format_size(LARGE_BYTES)} or more"
            out["rows"].append(head | {"none": f"{none} (largest {format_size(largest)})"})
            continue
        for size in sorted(wanted):
            placed = _at_size(size, sizes[size], cands, head, size == largest)
            placed |= {"missing": missing, "looser": looser}
            out["rows"].append(placed)
    return out


def place_rows(
    rows: Iterable[Mapping[str, Any]], meta: Mapping[str, Any], references: str | Path | None = None
) -> dict[str, Any]:
    """:func:`place` for Row objects (an importer's, before any file is written: a Row is a
    mapping of its columns)."""
    name = "published" if references is None else str(references)
    return place(list(rows), meta, load(references), name)


def _gbps(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def lines(placement: Mapping[str, Any]) -> list[str]:
    """The placement as the terminal shows it, one line per placed row, then its sources."""
    if placement.get("none"):
        return [placement["none"]]
    out: list[str] = []
    for row in placement.get("rows", []):
        head = f"{row['op']}" + (f" [{row['variant']}]" if row.get("variant") else "")
        if row.get("none"):
            out.append(f"{head}: {row['none']}")
            continue
        text = f"{head} {format_size(row['size_bytes'])}: {_gbps(row['busbw_gbps'])} GB/s"
        pub = row.get("published_gbps")
        typical = [s for s in row["sources"] if s["kind"] != "floor"]
        if pub:
            spread = _gbps(pub["low"])
            if pub["high"] != pub["low"]:
                spread += f"-{_gbps(pub['high'])}"
            text += (
                f", {row['pct_of_published']:.0f}% of published {row['matched']} "
                f"({spread} GB/s, {plural(len(typical), 'source')})"
            )
        else:
            text += f", beside published {row['matched']}"
        for floor in row.get("floors", []):
            where = "above" if floor["above"] else "BELOW"
            text += f"; {where} the {floor['busbw_gbps']:g} GB/s floor ({floor['id']})"
        notes = list(row.get("looser", []))
        if row.get("published_at_other_sizes"):
            sizes = sorted(
                {format_size(s["size_bytes"]) if s["size_bytes"] else "peak" for s in typical}
            )
            notes.append(f"published at {', '.join(sizes)}")
        if row.get("missing"):
            notes.append(f"unknown here: {', '.join(row['missing'])}")
        if notes:
            text += f" [looser match: {'; '.join(notes)}]"
        out.append(text)
        out.append("  sources: " + "; ".join(s["cite"] for s in row["sources"]))
    return out


def read_rows(path: Path) -> list[dict[str, str]]:
    """results.csv's rows as text, without pandas."""
    from colbench import reading

    text = reading.read_text(path, reading.TABLE)
    return list(csv.DictReader(text.splitlines()))


def record(
    run_dir: Path, references: str | Path | None = None, stream: TextIO | None = None
) -> dict[str, Any] | None:
    """Place a finished run (results.csv + meta.json) against the references, print it,
    and write it to meta.json's ``references``. Returns the placement (None when the run
    has no results.csv to read)."""
    from colbench.results.rundir import RunDir

    files = RunDir(run_dir)
    if not files.has_table():
        return None
    meta = files.read_meta()
    rows = read_rows(files.table_path())
    name = "published" if references is None else str(references)
    # The shipped table holds GPUs only: a CPU run is placed without reading it.
    cpu = references is None and run_facts(rows, meta)["device"] == "cpu"
    placement = place(rows, meta, () if cpu else load(references), name)
    out = stream or sys.stderr
    for line in lines(placement):
        print(f"colbench: reference: {line}", file=out)
    files.update_meta(**{FIELD: placement})
    return placement


def record_after_run(run_dir: Path) -> None:
    """:func:`record` at the end of a sweep: a finished run is not failed by what it is
    compared to, so a file it cannot read or write is one warning."""
    try:
        record(run_dir)
    except (OSError, ValueError) as exc:  # UsageError and WriteFailed are both
        print(f"colbench: warning: not placed against published results: {exc}", file=sys.stderr)
