"""The shipped table of published results holds together, and its reader refuses what
its format does not hold (colbench/commands/references/table.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from colbench.bench import ops
from colbench.commands.references import table
from colbench.errors import UsageError

REFS = table.load()

# The shipped table's own consistency: a check of its data, which no command runs.
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def numbers_in(line: str) -> list[float]:
    """Every decimal number in a line, as written ("~480GB/s" -> 480, "830+" -> 830)."""
    return [float(n) for n in _NUMBER.findall(line)]


#: busbw against algbw times the op's bus factor: the sources print two decimals, and a
#: maintainer's rounded figures ("~480", "~275") agree within half a percent.
FACTOR_TOLERANCE = 0.01


def problems(ref: table.Reference) -> list[str]:
    """What does not hold together in one entry: its number absent from its quoted line,
    busbw that is not algbw times the op's bus factor at the entry's world size."""
    found: list[str] = []
    if ref.quote and ref.busbw_gbps not in numbers_in(ref.quote):
        found.append(f"{ref.id}: busbw {ref.busbw_gbps:g} is not in its quoted line")
    if ref.algbw_gbps is not None:
        line = ref.algbw_quote or ref.quote
        if line and ref.algbw_gbps not in numbers_in(line):
            found.append(f"{ref.id}: algbw {ref.algbw_gbps:g} is not in its quoted line")
        world = ref.world_size
        if world is None:
            found.append(f"{ref.id}: algbw given but no GPUs per node and nodes to check it")
        else:
            expected = ref.algbw_gbps * ops.get(ref.op).busbw_factor(world)
            if abs(expected - ref.busbw_gbps) > FACTOR_TOLERANCE * ref.busbw_gbps:
                found.append(
                    f"{ref.id}: busbw {ref.busbw_gbps:g} is not algbw {ref.algbw_gbps:g} x "
                    f"{ref.op}'s factor at {world} ranks ({expected:.2f})"
                )
    return found


def test_the_table_has_enough_entries_across_the_hardware_asked_for():
    assert len(REFS) >= 25
    models = {r.gpu for r in REFS}
    assert {"A100", "H100", "H200", "B200", "GB200"} <= models
    assert models & {"MI300X", "MI355X"}, "no AMD system"
    assert any((r.nodes or 1) == 1 for r in REFS)
    assert any((r.nodes or 1) > 1 for r in REFS)
    assert {r.kind for r in REFS} >= {"measurement", "floor"}


@pytest.mark.parametrize("ref", REFS, ids=lambda r: r.id)
def test_every_entry_holds_together(ref: table.Reference):
    assert problems(ref) == []
    # Every shipped entry is quoted and cited: a number without its line is not a source.
    assert ref.quote, "no quoted line"
    assert ref.cite() and ref.url().startswith("https://")
    s = ref.source
    if "path" in s:
        assert len(str(s["commit"])) == 40, "a file's source names the full commit"
    assert ref.op in ops.BY_NAME
    assert ref.gpu is not None and ref.gpus_per_node and ref.nodes
    # Units: GB/s, base 10. A number in bits or MB/s would be far outside this range.
    assert 1 < ref.busbw_gbps < 2000
    assert ref.size_bytes is None or ref.size_bytes >= 1024**2
    if ref.algbw_gbps is not None:
        assert ref.world_size is not None


def test_the_checks_catch_a_number_not_in_its_line_and_a_wrong_factor():
    ref = next(r for r in REFS if r.id == "aws-p5-2node-allreduce-8g")
    import dataclasses

    moved = dataclasses.replace(ref, busbw_gbps=479.29)
    assert any("not in its quoted line" in p for p in problems(moved))
    # The same numbers at 8 ranks (one node): all_reduce's factor 1.75, not 1.875.
    one_node = dataclasses.replace(ref, hardware={**ref.hardware, "nodes": 1})
    assert any("factor at 8 ranks" in p for p in problems(one_node))


def test_gpu_models_are_read_from_device_names():
    assert table.gpu_model("NVIDIA H100 80GB HBM3") == "H100"
    assert table.gpu_model("NVIDIA H200") == "H200"
    assert table.gpu_model("NVIDIA H20") == "H20"
    assert table.gpu_model("NVIDIA GB200") == "GB200"
    assert table.gpu_model("NVIDIA A100-SXM4-80GB") == "A100"
    assert table.gpu_model("AMD Instinct MI300X") == "MI300X"
    assert table.gpu_model("NVIDIA Graphics Device") is None
    assert table.gpu_model("cpu") is None


def test_select_filters_and_refuses_unknown_filters():
    h100 = table.select(REFS, gpu="h100", gpus_per_node=8)
    assert h100 and all(r.gpu == "H100" and r.gpus_per_node == 8 for r in h100)
    assert table.select(REFS, gpu="H100", nodes=2, kind="floor") == []
    with pytest.raises(UsageError, match="names no GPU model"):
        table.select(REFS, gpu="banana")
    with pytest.raises(UsageError, match="--kind"):
        table.select(REFS, kind="rumour")


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "golden.json"
    path.write_text(json.dumps(data))
    return path


def test_a_users_file_round_trips(tmp_path: Path):
    path = _write(tmp_path, table.dump(REFS[:3]))
    assert table.load(path) == REFS[:3]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda e: e.pop("source"), "no 'source'"),
        (lambda e: e.update(source={"repo": "a/b"}), "source must name"),
        (lambda e: e.update(kind="rumour"), "kind 'rumour'"),
        (lambda e: e.update(op="all_shuffle"), "unknown op"),
        (lambda e: e.update(busbw_gbps=-1), "positive"),
        (lambda e: e.update(busbw_gbps="fast"), "wrong type"),
        (lambda e: e.update(date="last year"), "YYYY-MM-DD"),
        (lambda e: e.update(colour="red"), "unknown field"),
    ],
)
def test_a_bad_entry_is_one_line(tmp_path: Path, change, message):
    entry = REFS[0].to_json()
    change(entry)
    path = _write(tmp_path, {"format_version": 1, "entries": [entry]})
    with pytest.raises(UsageError, match=message) as info:
        table.load(path)
    assert "\n" not in str(info.value)


def test_a_newer_format_and_a_non_table_are_refused(tmp_path: Path):
    with pytest.raises(UsageError, match="newer than this colbench"):
        table.load(_write(tmp_path, {"format_version": 99, "entries": []}))
    with pytest.raises(UsageError, match="not a references file"):
        table.load(_write(tmp_path, [1, 2]))
    bad = tmp_path / "bad.yaml"
    bad.write_text("entries: [\n")
    with pytest.raises(UsageError, match="not YAML"):
        table.load(bad)
