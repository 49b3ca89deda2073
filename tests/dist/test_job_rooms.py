"""Rooms on the main job's way (issue 35): the colbench modules each process of a small gloo
sweep works in, counted by a profile hook in every process (benchmarks/job_rooms.py).

The bounds are what the code reaches now, so a change that sends the job through more
modules fails here and says which; the issue's targets are parent 30 and each rank 20
(met but for rank 0, which plays the lead: rows, files, table). The figures (parent 44,
ranks 51 and 37 before) fell as modules that are one idea became one (host/world.py,
host/child.py, bench/timing.py, hardware/links.py with the GPUs' links, the sweep command,
the emulation with the GPUs it shares, a run's file writing with its tables, what a rank
is given with what it is doing, a run's end with its supervision, a process's place in its
job with its host's limits, the element types with the data they describe)
and a run stopped entering what it does not use: CUDA timers, NCCL's start-up and knobs,
the direct engine, the load, rows other ranks would throw away (and their ceiling, and the
hardware facts only a node's first rank reads), NCCL_TESTS_MIN_BW's reading when it is
unset, a default's converter, GLOO_SOCKET_IFNAME's check when it is unset, the published
table on a CPU run.
"""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.conftest import REPO

#: Modules each process works in (calls made by imports not counted), at most.
REACHED = {"parent": 28, "rank 0": 30, "rank 1": 17}
#: What the CLI once called into, imports included, while parsing a sweep: other
#: commands' options and the judging behind them. (nccl.rules, also named in the issue, is
#: still imported: by the sweep's NCCL probe, after the parsing.)
NOT_ON_THE_WAY = (
    "colbench.commands.p2p.options",
    "colbench.commands.health.options",
    "colbench.commands.predict.options",
    "colbench.commands.gate.options",
    "colbench.commands.p2p.links",
    "colbench.commands.gate.paired",
)


def _job_rooms() -> ModuleType:
    spec = importlib.util.spec_from_file_location("job_rooms", REPO / "benchmarks/job_rooms.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sweep_goes_through_no_more_modules_than_it_did() -> None:
    job_rooms = _job_rooms()
    found = job_rooms.rooms(timeout_s=240)
    assert set(found) == set(REACHED), sorted(found)
    for role, bound in REACHED.items():
        worked = job_rooms.worked_in(found[role])
        assert len(worked) <= bound, f"{role} works in {len(worked)} modules: {worked}"
    entered = {line.split()[-1] for line in found["parent"]}
    assert not entered & set(NOT_ON_THE_WAY), sorted(entered & set(NOT_ON_THE_WAY))
    # The hook sees the job: the CLI, the host and the loop each in their process.
    assert "colbench.cli.app" in found["parent"]
    assert "colbench.bench.loop" in found["rank 0"] and "colbench.bench.loop" in found["rank 1"]
