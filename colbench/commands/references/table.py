"""The table of published results: its format, declared once, read and checked.

One entry is one number someone published for named hardware, with where it lives and the
source's own line that holds it, verbatim, so that anyone can find it again
(docs/references.md). The shipped table is ``published.yaml`` beside this module; a
fleet's own file has the same format. Units: ``size_bytes`` in bytes, bandwidths in GB/s
base 10, as nccl-tests prints them; a NIC's rate in Gb/s, as vendors state it.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colbench import reading
from colbench.errors import UsageError

#: The file's format version (1: the first, with the fields of _FIELDS).
FORMAT_VERSION = 1

PUBLISHED = Path(__file__).with_name("published.yaml")
FILE = reading.Kind("references file", 8 * 1024**2)

#: measurement: a run someone reported; floor: a pass threshold a health check enforces;
#: expectation: a figure a maintainer states. Floors are read apart: a floor is a lower
#: bound, not a typical figure.
KINDS = ("measurement", "floor", "expectation")
PLACEMENTS = ("out_of_place", "in_place")
LIBRARIES = ("nccl", "rccl")

#: The hardware an entry was measured on, each fact with its JSON type.
HARDWARE: dict[str, tuple[type, ...]] = {
    "gpu": (str,),
    "gpus_per_node": (int,),
    "nodes": (int,),
    "fabric": (str,),
    "nic": (str,),
    "nic_gbps": (int, float),
    "nics_per_node": (int,),
    "system": (str,),
}
#: Where a number lives: a file at a commit, an issue, a pull request, or an address.
SOURCE_FORMS = (("repo", "path", "commit"), ("repo", "issue"), ("repo", "pull"), ("url",))

# Longest names first, so that H200 is not read as H20, nor GB200 as B200.
_GPU = re.compile(
    r"(?<![A-Za-z0-9])(GB300|GB200|GH200|B300|B200|H200|H100|H800|H20|A100|A800|L40S|V100|"
    r"MI\d{3}[A-Z]?)(?![0-9])",
    re.IGNORECASE,
)


def gpu_model(name: str | None) -> str | None:
    """The GPU model a device name or a user's filter names ("NVIDIA H100 80GB HBM3" ->
    "H100", "a100" -> "A100"); None for a CPU or a name that says no model ("NVIDIA
    Graphics Device", which early GB200 drivers print)."""
    if not name:
        return None
    found = _GPU.search(name)
    return found.group(1).upper() if found else None


@dataclass(frozen=True, kw_only=True)
class Reference:
    """One published number, its hardware and its source; the fields in a file's order."""

    id: str
    source: Mapping[str, Any]
    date: str
    kind: str
    hardware: Mapping[str, Any] = field(default_factory=dict)
    library: str | None = None
    library_version: str | None = None
    algorithm: str | None = None
    op: str
    placement: str | None = None
    size_bytes: int | None = None
    busbw_gbps: float
    algbw_gbps: float | None = None
    quote: str = ""
    algbw_quote: str = ""
    note: str = ""

    @property
    def gpu(self) -> str | None:
        return gpu_model(self.hardware.get("gpu"))

    @property
    def gpus_per_node(self) -> int | None:
        return self.hardware.get("gpus_per_node")

    @property
    def nodes(self) -> int | None:
        return self.hardware.get("nodes")

    @property
    def world_size(self) -> int | None:
        if self.gpus_per_node and self.nodes:
            return int(self.gpus_per_node * self.nodes)
        return None

    def cite(self) -> str:
        """Short: ``repo path@commit``, ``repo#N`` or the address."""
        s = self.source
        if "path" in s:
            return f"{s['repo']} {s['path']}@{str(s['commit'])[:8]}"
        if "issue" in s or "pull" in s:
            return f"{s['repo']}#{s.get('issue', s.get('pull'))}"
        return str(s.get("url", ""))

    def url(self) -> str:
        s = self.source
        if "url" in s:
            return str(s["url"])
        if "path" in s:
            return f"https://github.com/{s['repo']}/blob/{s['commit']}/{s['path']}"
        if "issue" in s:
            return f"https://github.com/{s['repo']}/issues/{s['issue']}"
        if "pull" in s:
            return f"https://github.com/{s['repo']}/pull/{s['pull']}"
        return ""

    def hardware_label(self) -> str:
        """ "2 x 8 x H100 NVLink4 NVSwitch, EFA": nodes x GPUs per node x model, fabric, NIC."""
        hw = self.hardware
        gpus = f"{hw['gpus_per_node']} x {hw.get('gpu', '?')}" if "gpus_per_node" in hw else ""
        gpus = gpus or str(hw.get("gpu", "?"))
        if (self.nodes or 1) > 1:
            gpus = f"{self.nodes} x {gpus}"
        parts = [gpus + (f" {hw['fabric']}" if hw.get("fabric") else "")]
        if hw.get("nic"):
            nic = f"{hw['nics_per_node']} x {hw['nic']}" if hw.get("nics_per_node") else hw["nic"]
            parts.append(nic + (f" {hw['nic_gbps']:g} Gb/s" if hw.get("nic_gbps") else ""))
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """The entry as it is written to a references file (and meta.json): the required
        fields, and the others that hold something."""
        entry = dataclasses.asdict(self)
        return {k: v for k, v in entry.items() if k in _REQUIRED or v not in (None, "")}


_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "source": (dict,),
    "date": (str, _dt.date),
    "kind": (str,),
    "hardware": (dict,),
    "library": (str,),
    "library_version": (str, int, float),
    "algorithm": (str,),
    "op": (str,),
    "placement": (str,),
    "size_bytes": (int, type(None)),
    "busbw_gbps": (int, float),
    "algbw_gbps": (int, float, type(None)),
    "quote": (str,),
    "algbw_quote": (str,),
    "note": (str,),
}
_REQUIRED = ("id", "source", "date", "kind", "hardware", "op", "size_bytes", "busbw_gbps")


def _check_fields(raw: dict[str, Any], here: str) -> None:
    """The entry's fields: none unknown, none missing, each of its type; source and kind."""
    unknown = sorted(set(raw) - set(_FIELDS))
    if unknown:
        raise UsageError(f"{here}: unknown field(s) {', '.join(unknown)}")
    for key in _REQUIRED:
        if key not in raw:
            raise UsageError(f"{here}: no {key!r}")
    for key, value in raw.items():
        bad_bool = isinstance(value, bool)
        if bad_bool or not isinstance(value, _FIELDS[key]):
            raise UsageError(f"{here}: {key!r} has the wrong type ({type(value).__name__})")
    source = raw["source"]
    if not any(set(form) <= set(source) for form in SOURCE_FORMS):
        forms = "; ".join(" + ".join(f) for f in SOURCE_FORMS)
        raise UsageError(f"{here}: source must name one of: {forms}")
    if raw["kind"] not in KINDS:
        raise UsageError(f"{here}: kind {raw['kind']!r} is not one of {', '.join(KINDS)}")


def _check_hardware(hardware: dict[str, Any], here: str) -> None:
    """The hardware facts: each known and of its type, the gpu named."""
    for key, value in hardware.items():
        if key not in HARDWARE:
            raise UsageError(f"{here}: unknown hardware fact {key!r}")
        if isinstance(value, bool) or not isinstance(value, HARDWARE[key]):
            raise UsageError(f"{here}: hardware {key!r} has the wrong type")
    if "gpu" not in hardware:
        raise UsageError(f"{here}: hardware names no gpu")


def _entry(raw: Any, where: str) -> Reference:
    from colbench.bench import ops

    if not isinstance(raw, dict):
        raise UsageError(f"{where}: an entry must be a mapping, got {type(raw).__name__}")
    name = raw.get("id", "?")
    here = f"{where}: entry {name!r}"
    _check_fields(raw, here)
    try:
        op = ops.get(raw["op"]).name
    except (KeyError, ValueError, UsageError):
        raise UsageError(f"{here}: unknown op {raw['op']!r}") from None
    hardware = raw["hardware"]
    _check_hardware(hardware, here)
    for key, allowed in (("placement", PLACEMENTS), ("library", LIBRARIES)):
        if key in raw and raw[key] not in allowed:
            raise UsageError(f"{here}: {key} {raw[key]!r} is not one of {', '.join(allowed)}")
    busbw = float(raw["busbw_gbps"])
    if not (math.isfinite(busbw) and busbw > 0):
        raise UsageError(f"{here}: busbw_gbps must be a positive number of GB/s")
    size = raw["size_bytes"]
    if size is not None and size <= 0:
        raise UsageError(f"{here}: size_bytes must be positive (or null: a peak)")
    date = raw["date"]
    date = date.isoformat() if isinstance(date, _dt.date) else date
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        raise UsageError(f"{here}: date {date!r} is not YYYY-MM-DD")
    # Every field of the file is one of Reference's (_check_fields): those read as given
    # are passed on as they are, the others as normalised above.
    fields = dict(raw, id=str(name), source=dict(raw["source"]), date=date, op=op)
    fields.update(busbw_gbps=busbw, hardware=dict(hardware))
    if raw.get("algbw_gbps") is not None:
        fields["algbw_gbps"] = float(raw["algbw_gbps"])
    if "library_version" in raw:
        fields["library_version"] = str(raw["library_version"])
    return Reference(**fields)


def parse(data: Any, where: str) -> list[Reference]:
    """A references file's parsed YAML or JSON -> its entries; one-line UsageError on
    anything this format does not hold."""
    if not isinstance(data, dict) or "entries" not in data:
        raise UsageError(f"{where}: not a references file (no 'entries')")
    version = data.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise UsageError(f"{where}: no whole-number format_version")
    if version > FORMAT_VERSION:
        raise UsageError(
            f"{where}: format version {version} is newer than this colbench reads "
            f"(1 to {FORMAT_VERSION}): upgrade colbench to read it"
        )
    entries = data["entries"]
    if not isinstance(entries, list):
        raise UsageError(f"{where}: 'entries' must be a list")
    refs = [_entry(raw, where) for raw in entries]
    counts = Counter(ref.id for ref in refs)
    for twice in (ref.id for ref in refs if counts[ref.id] > 1):
        raise UsageError(f"{where}: entry id {twice!r} appears twice")
    return refs


def load(path: str | Path | None = None) -> list[Reference]:
    """The shipped table, or a user's file in its format (YAML or JSON)."""
    import yaml

    target = PUBLISHED if path is None else Path(path)
    if not target.exists():
        raise UsageError(f"cannot read {target}: no such file")
    text = reading.read_text(target, FILE)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise UsageError(f"{target}: not YAML or JSON{at}") from None
    return parse(data, str(target))


def dump(refs: Iterable[Reference]) -> dict[str, Any]:
    """A references file's content (JSON is YAML: either reader takes it)."""
    return {"format_version": FORMAT_VERSION, "entries": [r.to_json() for r in refs]}


def select(
    refs: Iterable[Reference],
    *,
    gpu: str | None = None,
    gpus_per_node: int | None = None,
    nodes: int | None = None,
    op: str | None = None,
    kind: str | None = None,
) -> list[Reference]:
    """The entries that match every filter given (a GPU by model: "h100" matches "H100")."""
    model = gpu_model(gpu) if gpu else None
    if gpu and model is None:
        raise UsageError(f"--gpu {gpu!r} names no GPU model colbench knows (e.g. H100, MI300X)")
    if kind is not None and kind not in KINDS:
        raise UsageError(f"--kind {kind!r} is not one of {', '.join(KINDS)}")
    if op is not None:
        from colbench.bench import ops

        try:
            op = ops.get(op).name
        except (KeyError, ValueError, UsageError):
            raise UsageError(f"--op {op!r} is no collective colbench knows") from None
    return [
        r
        for r in refs
        if (model is None or r.gpu == model)
        and (gpus_per_node is None or r.gpus_per_node == gpus_per_node)
        and (nodes is None or r.nodes == nodes)
        and (op is None or r.op == op)
        and (kind is None or r.kind == kind)
    ]
