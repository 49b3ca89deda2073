"""What NCCL ran: a short-lived probe world that logs NCCL's choice for every call.

A ring-vs-tree comparison is true only if NCCL ran what was asked, which NCCL logs only
under TUNING, a file write that would skew rank 0's timed calls: so a probe world with
the same ranks, environment and plan runs every row once, untimed, with TUNING on, and
the measured rows carry its choice per (op, bytes). Why its choice is the measured
world's: docs/gpu.md ("Per call").
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from colbench.commands.sweep.task import Choices, SweepTask
from colbench.config.model import SweepConfig
from colbench.config.variants import Variant, environment
from colbench.errors import ExitCode
from colbench.nccl import log as nccl_log
from colbench.nccl.algo import CommFacts, check_table
from colbench.nccl.knobs import evidence
from colbench.nccl.tuning import TuningCall, per_rank_bytes
from colbench.results.rundir import RunDir

#: Where the probe worlds live inside the run directory.
PROBE_DIR = "nccl-probe"
#: NCCL's settings in a probe world: start-up facts, every call's choice, and what it did
#: with buffers it was asked to register (colbench.nccl.knobs).
PROBE_SUBSYS = "INIT,ENV,TUNING,REG"


@dataclass(frozen=True)
class Probed:
    """What a probe found: the choices, and a line for meta.json and the terminal."""

    choices: Choices
    note: str
    exit_code: int = int(ExitCode.OK)
    #: NCCL's own line where it did not do what a knob asked (colbench.nccl.knobs), which
    #: the variant's rows then say as unsupported; None: nothing refused.
    refused: str | None = None


def probe_config(cfg: SweepConfig, out_dir: Path) -> SweepConfig:
    """The sweep's plan, each row once: one untimed warm-up call NCCL always gets and one
    timed call, no check, no repeat, nothing shown."""
    return cfg.replace(
        iters=1, warmup=0, repeat=1, check=False, time_budget_s=None, rotate=1,
        out_dir=str(out_dir), table=False, progress=False, plot=False, per_rank=False,
    )  # fmt: skip


def probe_environment(out_dir: Path) -> dict[str, str]:
    # %h and %p: NCCL names each process's file (host, pid), as the probe's ranks share
    # these variables.
    return {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": PROBE_SUBSYS,
        "NCCL_DEBUG_FILE": str(out_dir / "nccl-%h-%p.log"),
    }


def run_probe(
    cfg: SweepConfig, world_size: int, run_dir: Path, variant: Variant | None, index: int
) -> Probed:
    """Run one variant's probe world and read NCCL's choices from its log."""
    from colbench.host.spawn import spawn_and_wait

    out_dir = RunDir.create(str(run_dir / PROBE_DIR / str(index)), run_dir).path
    env = {**dict(variant.env if variant else ()), **probe_environment(out_dir)}
    print(
        f"colbench: probing NCCL's choices{f' for {variant.name}' if variant else ''} "
        "(each row once, TUNING log on)",
        file=sys.stderr,
    )
    # torch's calls: NCCL logs its choice alike for either engine's call; registered
    # buffers (--register) only the direct engine has, and symmetric kernels only run on them.
    engine = "torch" if cfg.measure.register == "none" else "nccl"
    with environment(env):
        task = SweepTask(probe_config(cfg, out_dir), quiet=True, engine=engine)
        code = spawn_and_wait(task, "nccl", world_size, out_dir, variant)
    if code != ExitCode.OK:
        return Probed({}, f"the NCCL probe world failed (exit {code})", code)
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in out_dir.glob("nccl-*.log")]
    found = nccl_log.parse_log("".join(texts))
    choices = choices_of(found.calls, cfg.measure.ranks_per_group(world_size))
    if not choices:
        return Probed({}, "the NCCL probe's log holds no TUNING line")
    note = f"NCCL's choice recorded for {len(choices)} (op, size) calls by a probe world"
    asked = dict(variant.env if variant else ())
    said, refused = evidence(found, asked, cfg.measure.register)
    if said:
        note += "; NCCL's log: " + ", ".join(said)
    if refused is not None:
        note += f"; NOT as asked, so its rows are unsupported: {refused}"
    differ = rules_against_table(found, asked)
    if differ:
        note += "; NCCL's own tuning table disagrees with colbench's rules: " + "; ".join(differ)
    return Probed(choices, note, refused=refused)


def rules_against_table(found: nccl_log.NcclLog, env: dict[str, str]) -> list[str]:
    """Where NCCL's own tuning table (which algorithms it enabled per function, printed
    under TUNING at start-up) disagrees with colbench's prediction (colbench.nccl.algo)
    for the communicator the log describes."""
    comm = found.main
    if comm is None or comm.nranks is None or comm.nnodes is None or not found.tables:
        return []
    facts = CommFacts(
        ranks=comm.nranks, nodes=comm.nnodes, ranks_per_node=comm.local_ranks,
        version=found.version,
    )  # fmt: skip
    return check_table(facts, found.tables[0].available(), {**os.environ, **env})


def choices_of(calls: list[TuningCall], nranks: int) -> Choices:
    """The most frequent (algorithm, protocol) per (op, per-rank bytes)."""
    seen: dict[tuple[str, int], Counter[tuple[str, str]]] = {}
    for call in calls:
        if call.op is None:
            continue
        key = (call.op, per_rank_bytes(call, nranks))
        seen.setdefault(key, Counter())[(call.algo, call.proto)] += 1
    return {key: counts.most_common(1)[0][0] for key, counts in seen.items()}


def probe_variants(
    cfg: SweepConfig, backend: str, world_size: int, run_dir: Path, variants: tuple[Variant, ...]
) -> dict[str, Probed]:
    """Each variant's probe, by variant name, where NCCL has a choice to make (an NCCL
    world of 2 or more ranks per group); stops at the first that fails."""
    if not cfg.launch.nccl_probe or backend != "nccl":
        return {}
    if cfg.measure.ranks_per_group(world_size) < 2:
        return {}
    found: dict[str, Probed] = {}
    for index, variant in enumerate(variants):
        # NCCL's choice for a call depends neither on what else runs (a --contend world
        # takes its unloaded twin's) nor on the engine that makes it (the same libnccl:
        # --engine torch,nccl probes once): one probe per environment and interpreter.
        same = (variant.env, variant.interpreter)
        twin = next((v.name for v in variants[:index] if (v.env, v.interpreter) == same), None)
        if twin is not None:
            found[variant.name] = found[twin]
            continue
        probed = run_probe(cfg, world_size, run_dir, variant if variant.env else None, index)
        found[variant.name] = probed
        if probed.exit_code != ExitCode.OK:
            break
    return found
