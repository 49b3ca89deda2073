"""``colbench health``: every node checked in one launched job, the bad one named.
:func:`run` and :func:`learn` are what the CLI calls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from colbench.errors import UsageError


def run(values: Mapping[str, Any], command_line: tuple[str, ...] = ()) -> int:
    """Check the options (every row of colbench.commands.health.options.table()), run the checks in
    spawned or launched ranks, judge; the exit code."""
    from colbench.commands.health.config import from_options

    cfg = from_options(values, command_line)
    if cfg.floors_path is not None:
        from colbench.commands.health.floors import load

        load(cfg.floors_path)  # a bad floors file is refused before any rank starts
    # Imported after the options are checked: the host imports torch.
    from colbench.commands.health.report import start_drain_list
    from colbench.commands.health.task import HealthTask
    from colbench.host.launchers.detect import join_or_spawn
    from colbench.host.world import start

    found, _ = join_or_spawn(cfg.launch.nprocs)
    if found is None or found.rank == 0:
        start_drain_list(cfg)  # one writer: the parent, or a launched job's rank 0
    return start(HealthTask(cfg))


#: The file ``health learn`` writes into its --out directory.
FLOORS_FILE = "floors.json"


def learn(runs: Sequence[str], out: str | None) -> int:
    """Floors from healthy runs (colbench.commands.health.floors) into ``out``/floors.json
    (``--out`` is a directory, as for every command); the exit code."""
    if not out:
        raise UsageError(f"health learn writes {FLOORS_FILE} into --out DIR (e.g. --out floors)")
    if Path(out).suffix.lower() == ".json":
        raise UsageError(
            f"--out {out}: --out is a directory (for every command); health learn writes "
            f"{FLOORS_FILE} into it, e.g. --out {Path(out).with_suffix('')}"
        )
    from colbench.commands.health.floors import learn as learn_floors

    return learn_floors(runs, str(Path(out) / FLOORS_FILE))
