"""A CPU quota on chosen processes: a cgroup of our own, made and removed by the test.

cgroup v2 (``cpu.max``) where /sys/fs/cgroup is the unified hierarchy with the cpu
controller; otherwise the v1 cpu controller (``cpu.cfs_quota_us``), the same CFS
bandwidth control under its older name. The group is named after the test's pid, so
parallel tests never share one, and it is removed on exit after its processes are
moved back out.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_ROOT = Path("/sys/fs/cgroup")


def _v2() -> bool:
    controllers = _ROOT / "cgroup.controllers"
    return controllers.is_file() and "cpu" in controllers.read_text().split()


def unavailable() -> str | None:
    """Why a CPU quota cannot be set here, or None when it can."""
    if os.geteuid() != 0:
        return "cgroups need root"
    parent = _ROOT if _v2() else _ROOT / "cpu"
    if not (parent / "cgroup.procs").is_file():
        return f"no cgroup v2 cpu controller and no v1 cpu hierarchy at {parent}"
    if not os.access(parent, os.W_OK):
        return f"{parent} is not writable"
    return None


@dataclass(frozen=True)
class CpuGroup:
    path: Path
    v2: bool

    @property
    def procs(self) -> Path:
        """Write a pid here to move that process (and the threads it starts) in."""
        return self.path / "cgroup.procs"

    def weigh(self, times_default: int) -> None:
        """Give the group ``times_default`` times a default group's share of a busy CPU
        (its quota, if any, still caps it)."""
        if self.v2:
            (self.path / "cpu.weight").write_text(str(100 * times_default))
        else:
            (self.path / "cpu.shares").write_text(str(1024 * times_default))

    def limit(self, quota_us: int | None, period_us: int = 10_000) -> None:
        """Let the group run ``quota_us`` of every ``period_us``; None: no limit."""
        if self.v2:
            quota = "max" if quota_us is None else str(quota_us)
            (self.path / "cpu.max").write_text(f"{quota} {period_us}")
            return
        (self.path / "cpu.cfs_quota_us").write_text("-1")
        (self.path / "cpu.cfs_period_us").write_text(str(period_us))
        if quota_us is not None:
            (self.path / "cpu.cfs_quota_us").write_text(str(quota_us))


@contextlib.contextmanager
def cpu_group(tag: str = "") -> Iterator[CpuGroup]:
    """A fresh cgroup with the cpu controller, removed on exit (also after a failure)."""
    v2 = _v2()
    parent = _ROOT if v2 else _ROOT / "cpu"
    path = parent / f"colbench-test-{os.getpid()}{tag}"
    path.mkdir()
    try:
        yield CpuGroup(path, v2)
    finally:
        # A group can only be removed once empty: move what is left back to the parent.
        for pid in (path / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (parent / "cgroup.procs").write_text(pid)
        for _ in range(50):
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)
