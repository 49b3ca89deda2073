"""NCCL's choices per call, from a probe world's TUNING log to the rows' nccl_algo and
nccl_proto: the log lines are NCCL's own forms (2.24+ per-rank bytes, and the older
total-bytes form), the rows are make_row's."""

from __future__ import annotations

from pathlib import Path

from colbench.bench.plan import RunInfo, plan
from colbench.bench.rowmaker import make_row
from colbench.commands.sweep.probe import choices_of, probe_config, probe_environment
from colbench.config.model import SweepConfig
from colbench.nccl.log import parse_log
from tests.datadir import NCCL_DEBUG_LOGS as LOGS

HEADER = "vm:101:101 [0] NCCL INFO "
#: rank 0 of 4 ranks, NCCL 2.28: all_gather's bytes are one rank's share.
NEW_FORM = [
    "NCCL version 2.28.9+cuda12.9",
    "AllGather: 256 Bytes -> Algo PAT proto SIMPLE channel{Lo..Hi}={0..0}",
    "AllGather: 256 Bytes -> Algo PAT proto SIMPLE channel{Lo..Hi}={0..0}",
    "AllReduce: 1024 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..1}",
    "AllReduce: 4 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}",
]


def _log(lines: list[str]) -> str:
    return "".join(HEADER + line + "\n" for line in lines)


def _row(op: str, size: int, choices: dict, dtype: str = "float32") -> dict:
    cfg = SweepConfig.of(ops=(op,), sizes_bytes=(size,), dtypes=(dtype,))
    (work,) = plan(cfg, 4, "nccl")
    info = RunInfo("r", "nccl", "gpu", world_size=4, nnodes=4, nccl_choices=choices)
    times = dict.fromkeys(("time_us", "time_min_us", "time_p50_us", "time_p99_us",
                           "time_max_us"), 10.0)  # fmt: skip
    row = make_row(info, cfg, work, size, work.layouts[0], False, times, 0)
    return {"algo": row.nccl_algo, "proto": row.nccl_proto}


def test_rows_carry_what_the_probe_logged() -> None:
    choices = choices_of(parse_log(_log(NEW_FORM)).calls, 4)
    assert choices[("all_gather", 256)] == ("PAT", "Simple")
    # all_gather of 1K on 4 ranks: 256 B per rank, the bytes NCCL prints.
    assert _row("all_gather", 1024, choices) == {"algo": "PAT", "proto": "Simple"}
    assert _row("all_reduce", 1024, choices) == {"algo": "Tree", "proto": "LL"}
    # barrier: NCCL's all_reduce of one float32, whatever the sweep's dtype.
    assert _row("barrier", 0, choices, dtype="float64") == {"algo": "Ring", "proto": "LL"}
    # A size the probe did not log, and ops NCCL runs as sends and receives: empty.
    assert _row("all_reduce", 4096, choices) == {"algo": "", "proto": ""}
    assert _row("all_to_all", 1024, choices) == {"algo": "", "proto": ""}
    assert _row("all_reduce", 1024, {}) == {"algo": "", "proto": ""}


def test_older_nccl_prints_all_gathers_total() -> None:
    """NCCL 2.23 prints the total bytes, with the enum's numbers for algorithm and
    protocol (6: PAT, 2: Simple)."""
    old = ["NCCL version 2.23.4+cuda12.6", "AllGather: 1024 Bytes -> Algo 6 proto 2 time 12.5"]
    choices = choices_of(parse_log(_log(old)).calls, 4)
    assert choices == {("all_gather", 256): ("PAT", "Simple")}


def test_the_most_frequent_choice_wins() -> None:
    ring = "AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}"
    lines = [*NEW_FORM[:1], ring, ring, ring, NEW_FORM[3]]
    assert choices_of(parse_log(_log(lines)).calls, 4)[("all_reduce", 1024)] == ("Ring", "LL")


def test_the_probe_runs_each_row_once_with_tuning_on(tmp_path: Path) -> None:
    cfg = SweepConfig.of(sizes_bytes=(1024,), iters=50, warmup=9, repeat=3, time_budget_s=2.0,
                         rotate=4, check=True, table=True)  # fmt: skip
    probe = probe_config(cfg, tmp_path)
    assert (probe.measure.iters, probe.measure.warmup, probe.measure.repeat) == (1, 0, 1)
    assert probe.measure.time_budget_s is None and not probe.measure.check
    assert probe.measure.rotate == 1 and not probe.output.table
    assert probe.measure.sizes_bytes == cfg.measure.sizes_bytes
    env = probe_environment(tmp_path)
    assert env["NCCL_DEBUG_SUBSYS"].split(",") == ["INIT", "ENV", "TUNING", "REG"]
    assert env["NCCL_DEBUG_FILE"].endswith("nccl-%h-%p.log")


def test_compare_says_whether_each_variant_ran_what_it_asked(tmp_path: Path) -> None:
    from colbench.commands.compare.pairs import ran_lines
    from colbench.results.rows import load
    from tests.unit.rows import row, write_run

    def rows(variant: str, ran: list[str]) -> list[dict]:
        return [{**row("all_reduce", 1024 << i, 10.0, variant=variant), "nccl_algo": algo,
                 "nccl_proto": "Simple"} for i, algo in enumerate(ran)]  # fmt: skip

    every = rows("NCCL_ALGO=Tree", ["Tree", "Tree", "Ring"]) + rows("NCCL_ALGO=Ring", ["Ring"] * 3)
    run = write_run(tmp_path / "r", every + rows("", ["Tree", "Ring", "Ring"]))

    assert ran_lines("A", load(run)) == [
        "A NCCL_ALGO=Tree: all_reduce ran Tree in 2, Ring in 1 of 3 rows: NOT Tree as asked in 1",
        "A NCCL_ALGO=Ring: all_reduce ran Ring in 3 of 3 rows, as asked",
        "A (no variant): all_reduce ran Ring in 2, Tree in 1 of 3 rows (its variant sets no "
        "NCCL_ALGO)",
    ]


def test_a_runs_nccl_logs_are_summed_up_in_meta(tmp_path: Path) -> None:
    """Real start-up logs (two ranks of one process each, sockets between pods) as a
    run's nccl-rank*.log: meta.json says what NCCL chose."""
    import json

    from colbench.host.supervise import record_nccl_log
    from colbench.results.rundir import RunDir

    run = RunDir.create(str(tmp_path / "run"), tmp_path)
    run.write_meta({"run_id": "run", "status": "complete"})
    text = (LOGS / "nccl1781-k8s-pods-nohostid-socket.log").read_text()
    run.nccl_log(0).write_text(text)
    record_nccl_log(run.path)
    nccl = json.loads((run.path / "meta.json").read_text())["nccl"]
    assert nccl["logs"] == ["nccl-rank0.log"]
    assert nccl["nranks"] == 2 and nccl["nnodes"] == 2 and nccl["channels"] == 2
    assert nccl["transports"] == ["NET/Socket"]
    assert "algorithms" not in nccl


def test_nccls_own_tuning_table_checks_the_rules() -> None:
    """A 2.29 log of two ranks on one GPU with their own NCCL_HOSTID (emulated nodes,
    as --ranks-per-gpu makes): NCCL's table enables PAT, which only one GPU per node
    allows; read as one node, the rules would disagree."""
    from colbench.commands.sweep.probe import rules_against_table
    from colbench.nccl.log import Communicator, parse_log

    found = parse_log((LOGS / "ncclebpf-rtx5090-hostid-2ranks-1gpu-tuning-2.29.log").read_text())
    assert found.tables
    found.communicators = [Communicator("c", nranks=2, nnodes=2, local_ranks=1)]
    assert rules_against_table(found, {}) == []
    found.communicators = [Communicator("c", nranks=2, nnodes=1, local_ranks=2)]
    assert any("PAT" in line for line in rules_against_table(found, {}))
