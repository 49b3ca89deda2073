"""colbench health's judging, floors and files, on samples built here (the fabric tests,
tests/dist/test_health_fabric.py, measure real ones)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from colbench.commands.health import floors as floor_files
from colbench.commands.health.config import LEVELS, estimate_s, steps
from colbench.commands.health.judge import (
    CRITICAL,
    OK,
    WARN,
    against_fleet,
    against_floors,
    samples_of,
)
from colbench.commands.health.report import table, write_prom
from colbench.errors import UsageError
from colbench.host.launchers.env import node_name

NAMES = [f"node{c}" for c in "ABCDEF"]


def _doc(scale: dict[int, float], passes: int = 4, seed: int = 1) -> dict[str, Any]:
    """health.samples.json of six one-rank nodes: node copies near 20 GB/s, links near
    0.05 GB/s, each rank's (or link's) figures times ``scale``, with 5% noise."""
    rng = random.Random(seed)
    samples = []

    def add(check: str, size: int, where: list[int], p: int, base: float) -> None:
        factor = min(scale.get(r, 1.0) for r in where)
        value = base * factor * rng.uniform(0.95, 1.05)
        samples.append(
            {
                "check": check,
                "size_bytes": size,
                "where": where,
                "pass_index": p,
                "busbw_gbps": value,
                "waits_us": [],
                "times_us": [],
            }
        )

    for p in range(passes):
        for r in range(6):
            add("node", 8 << 20, [r], p, 20.0)
        for a in range(6):
            for b in range(a + 1, 6):
                add("pair", 1 << 20, [a, b], p, 0.05)
    return {"version": 1, "names": NAMES, "node_of": list(range(6)), "samples": samples}


def _verdicts(findings: list[Any]) -> dict[tuple[str, str], str]:
    return {(f.node, f.check): f.verdict for f in findings}


def test_uniform_nodes_are_all_ok() -> None:
    verdicts = _verdicts(against_fleet(samples_of(_doc({}))))
    assert set(verdicts.values()) == {OK} and len(verdicts) == 12


def test_a_node_at_a_third_is_critical_and_its_peers_are_not() -> None:
    findings = against_fleet(samples_of(_doc({2: 1 / 3})))
    verdicts = _verdicts(findings)
    assert verdicts[("nodeC", "pair")] == CRITICAL and verdicts[("nodeC", "node")] == CRITICAL
    assert {v for (n, _), v in verdicts.items() if n != "nodeC"} == {OK}
    (pair,) = [f for f in findings if (f.node, f.check) == ("nodeC", "pair")]
    assert pair.fleet_gbps == pytest.approx(0.05, rel=0.06) and pair.p_value < 0.05


def test_a_node_a_third_below_is_a_warn_only() -> None:
    verdicts = _verdicts(against_fleet(samples_of(_doc({4: 0.62}))))
    assert verdicts[("nodeE", "node")] == WARN and verdicts[("nodeE", "pair")] == WARN


def test_one_slow_pass_names_nothing() -> None:
    doc = _doc({})
    for s in doc["samples"]:
        if s["check"] == "node" and s["where"] == [1] and s["pass_index"] == 0:
            s["busbw_gbps"] /= 10
    assert set(_verdicts(against_fleet(samples_of(doc))).values()) == {OK}


def _run(tmp_path: Path, index: int, scale: float, nics: str = "virtual 0.4 Gb/s") -> Path:
    run = tmp_path / f"run{index}"
    run.mkdir()
    meta = {
        "schema_version": 1,
        "machine": {"cpu_model": "x", "torch": "2"},
        "hardware": {
            n: {
                "interface": "eth0",
                "nics": [
                    {"name": "eth0", "kind": nics.split()[0], "rate_gbit_s": float(nics.split()[1])}
                ],
            }
            for n in NAMES
        },
    }
    (run / "meta.json").write_text(json.dumps(meta))
    rows = [
        {
            "node": n,
            "check": "pair",
            "size_bytes": 1 << 20,
            "verdict": OK,
            "busbw_gbps": 0.05 * scale * (1 + 0.02 * i),
        }
        for i, n in enumerate(NAMES)
    ]
    (run / "health.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_learn_floors_states_rates_and_version(tmp_path: Path) -> None:
    runs = [str(_run(tmp_path, i, 1 + 0.03 * (i % 3))) for i in range(10)]
    out = tmp_path / "floors.json"
    assert floor_files.learn(runs, str(out)) == 0
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == floor_files.SCHEMA_VERSION
    assert doc["fingerprint"]["nics"] == ["virtual 0.4 Gb/s"] and doc["fingerprint"]["nodes"] == 6
    (floor,) = doc["floors"]
    assert floor["critical_gbps"] < floor["warn_gbps"] < floor["typical_gbps"]
    assert (floor["warn_rate"], floor["critical_rate"]) == (0.01, 0.001)
    assert 0 < floor["warn_sees_pct"] < floor["critical_sees_pct"] < 100
    floors, _ = floor_files.load(str(out))
    findings = against_floors(samples_of(_doc({2: 1 / 3})), floors)
    verdicts = _verdicts(findings)
    assert verdicts[("nodeC", "pair")] == CRITICAL and verdicts[("nodeA", "pair")] == OK
    assert all(f.floor_gbps for f in findings if f.check == "pair")


def test_learn_refuses_too_few_runs_and_mixed_hardware(tmp_path: Path) -> None:
    runs = [str(_run(tmp_path, i, 1.0)) for i in range(9)]
    with pytest.raises(UsageError, match="at least 10 healthy runs"):
        floor_files.learn(runs, str(tmp_path / "f.json"))
    runs.append(str(_run(tmp_path, 9, 1.0, nics="virtual 10 Gb/s")))
    with pytest.raises(UsageError, match="other hardware"):
        floor_files.learn(runs, str(tmp_path / "f.json"))


def test_floors_of_a_newer_schema_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "floors.json"
    path.write_text(json.dumps({"kind": floor_files.KIND, "schema_version": 99, "floors": []}))
    with pytest.raises(UsageError, match="schema_version 99"):
        floor_files.load(str(path))
    path.write_text("{}")
    with pytest.raises(UsageError, match="not a floors file"):
        floor_files.load(str(path))


def test_prom_and_table(tmp_path: Path) -> None:
    findings = against_fleet(samples_of(_doc({2: 1 / 3})))
    write_prom(tmp_path / "health.prom", findings, "r1")
    prom = (tmp_path / "health.prom").read_text()
    assert 'colbench_health_verdict{node="nodeC",check="pair",size_bytes="1048576"} 2' in prom
    assert "# TYPE colbench_health_busbw_gbps gauge" in prom
    lines = table(findings).splitlines()
    assert lines[0].split() == [
        "node",
        "check",
        "size_bytes",
        "busbw_gbps",
        "fleet_gbps",
        "floor_gbps",
        "verdict",
    ]
    assert any(line.startswith("nodeC") and line.endswith("CRITICAL") for line in lines)


def test_levels_say_their_time() -> None:
    quick, standard, long = (estimate_s(LEVELS[n], 16, 8) for n in ("quick", "standard", "long"))
    # About 1, 5 and 15 minutes at 16 nodes.
    assert 20 < quick < 90 and 180 < standard < 420 and 600 < long < 1200
    assert steps(LEVELS["quick"], 6, 1)["intra"] == 0


def test_node_names_follow_the_launcher() -> None:
    assert node_name({"SLURMD_NODENAME": "gpu17", "NODE_NAME": "k8s-3"}) == "gpu17"
    assert node_name({"NODE_NAME": "k8s-3"}) == "k8s-3"
    assert node_name({}) != ""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--level", "forever"], "bad --level 'forever'"),
        (["learn"], "at least 10 healthy runs"),
        (["check"], "health takes no argument 'check'"),
        (["--floors", "/nonexistent/floors.json"], "cannot read floors file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "colbench", "health", *argv, "--out", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("colbench: error: ") and proc.stderr.count("\n") == 1
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_the_rank_the_others_wait_for_is_a_warn_of_its_node() -> None:
    doc = _doc({})
    for p in range(4):
        for r in range(6):
            # Rank 3 arrives last at every call's barrier: it waits least, the others 5 ms.
            waits = [50.0 if r == 3 else 5000.0 + 10 * r] * 4
            doc["samples"].append({"check": "world", "size_bytes": 4 << 20, "where": [r],
                                   "pass_index": p, "busbw_gbps": 0.04, "waits_us": waits,
                                   "times_us": [20000.0] * 4})  # fmt: skip
    findings = against_fleet(samples_of(doc))
    late = [f for f in findings if f.check == "world_straggler"]
    assert [(f.node, f.verdict, f.rank) for f in late] == [("nodeD", WARN, 3)]
    assert "in 16 of 16 calls" in late[0].evidence
    (fleet,) = [f for f in findings if f.check == "world"]
    assert fleet.node == "fleet" and fleet.busbw_gbps == pytest.approx(0.04)


def test_nodes_that_share_a_name_are_told_apart() -> None:
    from colbench.commands.health.task import names_of
    from colbench.commands.p2p.task import Member

    members = [Member("d", r, 1, node, "vm", "cpu") for r, node in enumerate("aabc")]
    assert names_of(members) == ["vm#0", "vm#0", "vm#1", "vm#2"]


def test_report_against_floors_of_other_hardware_warns_and_drains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from colbench.commands.health.config import HealthConfig
    from colbench.commands.health.report import report

    runs = [str(_run(tmp_path, i, 1 + 0.03 * (i % 3))) for i in range(10)]
    floor_files.learn(runs, str(tmp_path / "floors.json"))
    run = _run(tmp_path, 10, 1.0, nics="virtual 10 Gb/s")
    (run / "health.samples.json").write_text(json.dumps(_doc({2: 1 / 3})))
    drain = tmp_path / "drain.txt"
    cfg = HealthConfig(floors_path=str(tmp_path / "floors.json"), drain_list=str(drain))
    assert report(run, cfg) == 1
    err = capsys.readouterr().err
    assert "was learned on nics virtual 0.4 Gb/s, this run has virtual 10.0 Gb/s" in err
    assert drain.read_text() == "nodeC\n"
    rows = [json.loads(line) for line in (run / "health.jsonl").read_text().splitlines()]
    (slow,) = [r for r in rows if (r["node"], r["check"]) == ("nodeC", "pair")]
    assert slow["verdict"] == CRITICAL and slow["judged_by"].startswith("floors ")
    assert slow["floor_gbps"] < 0.05 and "false alarms 0.001" in slow["evidence"]


def _rails_doc(
    per_node: int, slow: dict[int, float], passes: int = 4, nodes: list[str] = NAMES
) -> dict[str, Any]:
    """health.samples.json (version 2) of six nodes of ``per_node`` GPU ranks each: the
    rail-by-rail sendrecv (local rank k of two nodes) and the pair all_reduce (keyed by
    the nodes' first ranks), a rank's links times ``slow`` (the worse end's)."""
    rng = random.Random(7)
    names = [n for n in nodes for _ in range(per_node)]
    samples = []
    for p in range(passes):
        for a in range(len(names)):
            for b in range(a + 1, len(names)):
                if names[a] == names[b] or a % per_node != b % per_node:
                    continue
                factor = min(slow.get(a, 1.0), slow.get(b, 1.0))
                value = 0.05 * factor * rng.uniform(0.95, 1.05)
                samples.append({"check": "pair", "size_bytes": 1 << 20, "where": [a, b],
                                "pass_index": p, "busbw_gbps": value, "waits_us": [],
                                "times_us": []})  # fmt: skip
        for a in range(0, len(names), per_node):
            for b in range(a + per_node, len(names), per_node):
                # A collective over both nodes runs at its slowest rank's pace.
                ranks = [*range(a, a + per_node), *range(b, b + per_node)]
                factor = min(slow.get(r, 1.0) for r in ranks)
                samples.append({"check": "pair_all_reduce", "size_bytes": 1 << 20,
                                "where": [a, b], "pass_index": p,
                                "busbw_gbps": 0.08 * factor * rng.uniform(0.95, 1.05),
                                "waits_us": [], "times_us": []})  # fmt: skip
    buses = [f"0000:{0x18 + 0x10 * (r % per_node):02x}:00.0" for r in range(len(names))]
    return {"version": 2, "names": names, "node_of": [r // per_node for r in range(len(names))],
            "gpu_bus_ids": buses, "samples": samples}  # fmt: skip


def _facts(per_node: int) -> dict[str, Any]:
    """Every node's hardware facts: GPU k at bus 0x18 + 0x10 k, NIC mlx5_k nearest it."""
    gpus = [
        {
            "index": k,
            "name": "NVIDIA H100 80GB HBM3",
            "bus_id": f"00000000:{0x18 + 0x10 * k:02X}:00.0",
        }
        for k in range(per_node)
    ]
    nics = [{"name": f"mlx5_{k}", "kind": "infiniband", "closest_gpu": k} for k in range(per_node)]
    nics.append({"name": "lo", "kind": "loopback", "closest_gpu": None})
    return {n: {"gpus": gpus, "nics": nics, "interface": "eth0"} for n in NAMES}


def test_one_slow_nic_of_eight_names_its_node_its_gpu_and_its_nic() -> None:
    from colbench.commands.health.report import attach, where_text

    # Node C's local rank 5 (rank 21): its rail at a third; the other 7 of C's rails
    # are healthy, so C's links pooled would hide it.
    samples = samples_of(_rails_doc(8, {21: 1 / 3}))
    findings = attach(against_fleet(samples), samples, _facts(8), "nccl")
    named = {(f.node, f.check): f for f in findings if f.verdict != OK}
    assert set(named) == {("nodeC", "pair"), ("nodeC", "pair_all_reduce")}
    pair = named[("nodeC", "pair")]
    assert pair.verdict == CRITICAL and pair.rank == 21 and pair.singled_out
    assert pair.gpu == "GPU 5 (NVIDIA H100 80GB HBM3, 0000:68:00.0)" and pair.nic == "mlx5_5"
    assert where_text(pair) == "rank 21: GPU 5 (NVIDIA H100 80GB HBM3, 0000:68:00.0), NIC mlx5_5"
    # The all_reduce over both nodes waits for its slowest rank: it tells no rank.
    reduce = named[("nodeC", "pair_all_reduce")]
    assert reduce.verdict == CRITICAL and not reduce.singled_out and reduce.nic is None
    # The peers of rank 21 have one slow link of five: not named.
    assert {f.node for f in findings if f.verdict != OK} == {"nodeC"}


def test_a_whole_slow_node_names_no_single_nic() -> None:
    from colbench.commands.health.report import attach, where_text

    samples = samples_of(_rails_doc(2, {4: 1 / 3, 5: 1 / 3}))
    findings = attach(against_fleet(samples), samples, _facts(2), "nccl")
    (pair,) = [f for f in findings if (f.node, f.check) == ("nodeC", "pair")]
    assert pair.verdict == CRITICAL and not pair.singled_out
    assert (pair.gpu, pair.nic, where_text(pair)) == (None, None, "")
    assert {f.node for f in findings if f.verdict != OK} == {"nodeC"}


def test_uniform_rails_name_nothing_and_old_sample_files_load() -> None:
    samples = samples_of(_rails_doc(4, {}))
    assert {f.verdict for f in against_fleet(samples)} == {OK}
    old = samples_of(_doc({}))  # version 1: no GPUs recorded
    assert old.gpu_bus_ids == [None] * 6
    one_rank = [f for f in against_fleet(old) if f.check == "pair"]
    assert all(f.singled_out and f.rank == NAMES.index(f.node) for f in one_rank)


def test_a_link_timed_at_both_ends_counts_once() -> None:
    """Version 1 files hold each link's sample from both of its ranks: one exchange."""
    doc = _doc({2: 0.6})
    twice = json.loads(json.dumps(doc))
    for s in doc["samples"]:
        if s["check"] == "pair":
            twice["samples"].append({**s, "busbw_gbps": s["busbw_gbps"] * 1.01})
    once, both = samples_of(doc), samples_of(twice)
    assert {k: len(v) for k, v in both.by_check[("pair", 1 << 20)].items()} == {
        k: 4 for k in once.by_check[("pair", 1 << 20)]
    }
    ask = {(f.node, f.check): f.p_value for f in against_fleet(once)}
    assert {(f.node, f.check): f.p_value for f in against_fleet(both)} == pytest.approx(ask)


def test_nodes_of_other_rank_counts_leave_the_pair_all_reduce_unjudged() -> None:
    doc = _rails_doc(2, {})
    doc["names"][11] = "nodeG"  # node F keeps one rank, G has one
    findings = against_fleet(samples_of(doc))
    assert {f.verdict for f in findings if f.check == "pair_all_reduce"} == {"not judged"}
    assert {f.verdict for f in findings if f.check == "pair"} == {OK}


def test_the_figure_the_verdict_and_the_gpu_are_one_ranks() -> None:
    import statistics

    from colbench.commands.health.report import _pair_matrix

    samples = samples_of(_rails_doc(8, {21: 1 / 3, 20: 0.9}))
    (pair,) = [f for f in against_fleet(samples) if (f.node, f.check) == ("nodeC", "pair")]
    links = [v for (a, b), vals in samples.by_check[("pair", 1 << 20)].items()
             if 21 in (a, b) for v in vals]  # fmt: skip
    assert pair.rank == 21 and pair.busbw_gbps == pytest.approx(statistics.median(links))
    # 48 ranks: the matrix is printed node by node (each pair's slowest rail).
    text = _pair_matrix(samples).split("\n\n")[0].splitlines()
    assert "slowest rail" in text[0] and len(text) == 2 + 6


def test_floors_of_another_health_version_warn_and_learn_does_not_mix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from colbench.commands.health.config import SAMPLES_VERSION, HealthConfig
    from colbench.commands.health.report import report

    runs = [str(_run(tmp_path, i, 1 + 0.03 * (i % 3))) for i in range(10)]
    floor_files.learn(runs, str(tmp_path / "floors.json"))
    learned = json.loads((tmp_path / "floors.json").read_text())
    assert (learned["schema_version"], learned["health_version"]) == (2, 1)
    run = _run(tmp_path, 10, 1.0)
    meta = json.loads((run / "meta.json").read_text())
    (run / "meta.json").write_text(json.dumps({**meta, "health_version": SAMPLES_VERSION}))
    (run / "health.samples.json").write_text(json.dumps(_doc({})))
    assert report(run, HealthConfig(floors_path=str(tmp_path / "floors.json"))) == 0
    err = capsys.readouterr().err
    assert f"learned on health_version 1, this run has {SAMPLES_VERSION}" in err
    with pytest.raises(UsageError, match="by another colbench health than"):
        floor_files.learn([*runs[:9], str(run)], str(tmp_path / "mixed.json"))


def test_pci_addresses_in_any_spelling() -> None:
    from colbench.host.launchers.gpus import normal_bus_id

    assert normal_bus_id("00000000:8A:00.0") == normal_bus_id("0000:8a:00.0") == "0000:8a:00.0"
    assert normal_bus_id(":8a:00.0") == ":8a:00.0"


def test_the_heatmap_shows_each_node_against_the_fleet(tmp_path: Path) -> None:
    from colbench.commands.health.heatmap import ratios, write_heatmap

    samples = samples_of(_doc({2: 1 / 3}))
    findings = against_fleet(samples)
    nodes, columns, cells = ratios(findings)
    assert nodes == NAMES and columns == ["node 8M", "pair 1M"]
    slow = cells[NAMES.index("nodeC")]
    assert all(0.25 < r < 0.42 for r in slow), slow
    assert all(0.85 < r < 1.15 for n, row in zip(nodes, cells, strict=True) if n != "nodeC"
               for r in row)  # fmt: skip
    path = write_heatmap(tmp_path / "health.png", findings, samples)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


class _RecordingDist:
    """What PairGroups asks of torch.distributed, recorded: NCCL cannot start here."""

    class GroupMember:
        NON_GROUP_MEMBER = object()

    def __init__(self, rank: int, bound: bool) -> None:
        self.rank, self.calls = rank, []
        self.group = type(
            "group", (), {"WORLD": type("pg", (), {"bound_device_id": 0 if bound else None})()}
        )

    def get_rank(self) -> int:
        return self.rank

    def split_group(self, split_ranks: list[list[int]]) -> Any:
        self.calls.append(("split_group", split_ranks))
        return next((("group", tuple(r)) for r in split_ranks if self.rank in r), None)

    def new_group(self, ranks: list[int]) -> Any:
        self.calls.append(("new_group", ranks))
        return ("group", tuple(ranks)) if self.rank in ranks else self.GroupMember.NON_GROUP_MEMBER

    def destroy_process_group(self, group: Any) -> None:
        self.calls.append(("destroy", group))


@pytest.mark.parametrize(("backend", "bound"), [("nccl", True), ("nccl", False), ("gloo", False)])
def test_pair_groups_one_split_per_round_on_an_eager_nccl_world(backend: str, bound: bool) -> None:
    from colbench.commands.health.checks import PairGroups, Placement

    # Five nodes (a bye each round), node 1 with two ranks: ranks 0 | 1 2 | 3 | 4 | 5.
    place = Placement((0, 1, 1, 2, 3, 4))
    dist = _RecordingDist(rank=2, bound=bound)
    groups = PairGroups(place, backend, dist=dist)
    rounds = place.node_rounds()
    assert len(rounds) == 5 and all(len(rnd) == 2 for rnd in rounds)
    for _ in range(3):  # passes: made once, then kept
        for rnd in rounds:
            groups.make_round(rnd)
    made = [c for c in dist.calls if c[0] != "destroy"]
    if backend == "nccl" and bound:
        assert made == [("split_group", [groups.ranks(p) for p in rnd]) for rnd in rounds]
    else:
        assert made == [("new_group", groups.ranks(p)) for rnd in rounds for p in rnd]
    # Rank 2 (node 1) is in the 4 pairs of node 1, one group each, destroyed once.
    assert {groups.made[p] for p in groups.made if 1 in p} == {
        ("group", tuple(groups.ranks(p))) for p in groups.made if 1 in p
    }
    groups.destroy()
    destroyed = [c[1] for c in dist.calls if c[0] == "destroy"]
    assert len(destroyed) == 4 and len(set(destroyed)) == 4


def test_a_fleet_of_16_nodes_of_8_ranks_is_judged() -> None:
    """--level long's passes at 16 nodes of 8 ranks: some 14,000 link samples against a
    rank's 150 (once a float overflow in the exact test's smallest p; its tie count,
    once quadratic, took 7 s here and now 0.2 s)."""
    from colbench.stats.rank_tests import smallest_one_sided_p

    assert smallest_one_sided_p(3, 3) == 1 / 20 and smallest_one_sided_p(600, 600) == 0.0
    nodes = [f"n{i:02d}" for i in range(16)]
    samples = samples_of(_rails_doc(8, {21: 1 / 3}, passes=10, nodes=nodes))
    findings = against_fleet(samples)
    named = {(f.node, f.check, f.rank, f.singled_out) for f in findings if f.verdict != OK}
    assert named == {("n02", "pair", 21, True), ("n02", "pair_all_reduce", None, False)}


def test_learn_writes_floors_json_into_its_out_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from colbench.commands.health import learn

    runs = [str(_run(tmp_path, i, 1 + 0.03 * (i % 3))) for i in range(10)]
    assert learn(runs, str(tmp_path / "floors")) == 0
    assert floor_files.load(str(tmp_path / "floors" / "floors.json"))[0]
    # --out is a directory for every command: a file name is refused with the way to say it.
    with pytest.raises(UsageError, match="--out is a directory"):
        learn(runs, str(tmp_path / "floors.json"))
    assert not (tmp_path / "floors.json").exists()


def test_two_nodes_of_several_ranks_are_figured_not_judged() -> None:
    """Two nodes' links all touch both: the rail-by-rail check has no other links to ask a
    node's against, so the report shows each node's figure and judges none."""
    samples = samples_of(_rails_doc(2, {}, nodes=NAMES[:2]))
    findings = against_fleet(samples)
    assert {(f.node, f.check) for f in findings} >= {("nodeA", "pair"), ("nodeB", "pair")}
    assert {f.verdict for f in findings if f.check != "world_straggler"} == {"not judged"}


def _stamp(run: Path, run_id: str, report_time: float) -> Path:
    """meta.json's run_id and report time, as a real run writes them."""
    meta = json.loads((run / "meta.json").read_text())
    (run / "meta.json").write_text(
        json.dumps({**meta, "run_id": run_id, "report_time": report_time})
    )
    return run


def test_learn_refuses_a_run_given_twice_or_a_copy(tmp_path: Path, capsys: Any) -> None:
    import shutil

    from tests.conftest import run_main

    runs = [
        str(_stamp(_run(tmp_path, i, 1 + 0.03 * (i % 3)), f"run{i}", 1e9 + i)) for i in range(10)
    ]
    out = str(tmp_path / "floors")
    # Ten times one run: floors of no spread, which name a healthy rerun CRITICAL.
    code, _, err = run_main(capsys, "health", "learn", *[runs[0]] * 10, "--out", out)
    assert code == 2 and err.count("\n") == 1
    assert f"{runs[0]} is given twice" in err and "count twice" in err
    code, _, err = run_main(capsys, "health", "learn", *runs[:2] * 5, "--out", out)
    assert code == 2 and f"{runs[0]} is given twice" in err
    code, _, err = run_main(
        capsys, "health", "learn", *runs[1:], f"{runs[1]}/health.jsonl", "--out", out
    )
    assert code == 2 and f"given twice (as {runs[1]})" in err
    copy = shutil.copytree(runs[3], tmp_path / "copy")
    code, _, err = run_main(capsys, "health", "learn", *runs[1:], str(copy), "--out", out)
    assert code == 2 and f"{copy} is a copy of {runs[3]} (run_id run3)" in err
    assert not (tmp_path / "floors").exists()
    # Another run in a directory of the same name is no copy: it was judged at another time.
    (tmp_path / "other").mkdir()
    other = _stamp(_run(tmp_path / "other", 0, 1.0), "run0", 2e9)
    code, _, err = run_main(capsys, "health", "learn", *runs[1:], str(other), "--out", out)
    assert code == 0, err


def test_learn_refuses_runs_that_share_no_check(tmp_path: Path, capsys: Any) -> None:
    from tests.conftest import run_main

    runs = []
    for i in range(10):
        run = _stamp(_run(tmp_path, i, 1.0), f"run{i}", 1e9 + i)
        meta = json.loads((run / "meta.json").read_text())
        level = "quick" if i % 2 else "standard"
        (run / "meta.json").write_text(json.dumps({**meta, "level": level}))
        if level == "standard":  # another level measures the pair check at another size
            rows = (
                (run / "health.jsonl")
                .read_text()
                .replace('"size_bytes": 1048576', '"size_bytes": 16777216')
            )
            (run / "health.jsonl").write_text(rows)
        runs.append(str(run))
    code, _, err = run_main(capsys, "health", "learn", *runs, "--out", str(tmp_path / "floors"))
    assert code == 2 and err.count("\n") == 1, err
    assert "no check is in 10 of the 10 runs" in err
    assert "pair 1048576 B in 5, pair 16777216 B in 5" in err and "quick 5, standard 5" in err
    assert not (tmp_path / "floors").exists()


def test_learn_names_a_path_that_is_no_health_run_before_counting(
    tmp_path: Path, capsys: Any
) -> None:
    from tests.conftest import run_main

    code, _, err = run_main(capsys, "health", "learn", str(tmp_path / "nonexistent"), "--out", "x")
    assert (
        code == 2 and f"{tmp_path / 'nonexistent'} does not exist" in err and "at least" not in err
    )
    code, _, err = run_main(capsys, "health", "learn", str(tmp_path), "--out", "x")
    assert code == 2 and "no health.jsonl" in err and "at least" not in err


def test_verdict_lines_say_a_floor_and_nothing_judged(tmp_path: Path) -> None:
    from dataclasses import replace

    from colbench.commands.health.judge import NOT_JUDGED
    from colbench.commands.health.report import verdict_lines

    runs = [str(_run(tmp_path, i, 1 + 0.03 * (i % 3))) for i in range(10)]
    floor_files.learn(runs, str(tmp_path / "floors.json"))
    floors, _ = floor_files.load(str(tmp_path / "floors.json"))
    pair = [f for f in against_floors(samples_of(_doc({2: 1 / 3})), floors) if f.check == "pair"]
    first = verdict_lines(pair, "floors f.json")[0]
    assert first.startswith("health: CRITICAL nodeC: 1 of 1 checks; pair ") and " - " not in first
    assert (
        "GB/s, below the CRITICAL floor " in first
        and "(false alarms 0.001); the fleet's 0.0" in first
    )
    # One node against floors: no fleet's figure to name beside the floor.
    (slow,) = [replace(f, fleet_gbps=None) for f in pair if f.node == "nodeC"]
    first = verdict_lines([slow], "floors f.json")[0]
    assert "fleet" not in first and first.endswith("(false alarms 0.001); rank 2")
    # One node alone has no fleet to judge against: its checks are not judged.
    alone = [
        replace(f, verdict=NOT_JUDGED, fleet_gbps=None, p_value=None)
        for f in against_fleet(samples_of(_doc({})))
        if f.node == "nodeA"
    ]
    lines = verdict_lines(alone, "the fleet's median")
    assert lines[0] == "health: no node named among 1 node (0 checks judged: fewer than 3 nodes)"
    assert lines[1].startswith("health: nothing to judge against: no --floors given")
