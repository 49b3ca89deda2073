"""Ranks in another Python interpreter: a ``--python NAME=PATH`` variant.

A CPU CI job compares a pull request's stack with main's by giving each its own virtual
environment (another torch build, another gloo); the parent starts each variant's ranks
with that variant's interpreter running ``colbench.host.interpreter JOB RANK`` (as ``-m``
would, but never from the working directory: see ``_BOOT``). The job travels pickled in a
file of the run directory; the rank then lives as a forked one does (:func:`spawned_rank`).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from colbench import __version__
from colbench.errors import ExitCode
from colbench.host.child import spawned_rank
from colbench.host.job import RankJob
from colbench.host.supervise import JOB_FILE

#: Format of the job file; the rank refuses another before unpickling the job itself.
#: 2: the job carries a task (colbench.host.job.RankTask), the sweep's among them.
JOB_FILE_VERSION = 2
#: How a rank starts: like ``-m colbench.host.interpreter``, but without the working
#: directory at the head of sys.path (``-m`` and ``-c`` both put it there): started from
#: a checkout of another colbench, as a CI job in the pull request's checkout is, that
#: checkout's package would shadow the one installed in the variant's interpreter.
#: An interpreter whose colbench predates --python ranks says so in one line, not a
#: traceback.
_BOOT = (
    "import runpy, sys\n"
    "sys.path[:1] = [] if sys.path[:1] == [''] else sys.path[:1]\n"
    "try:\n"
    "    runpy.run_module('colbench.host.interpreter', run_name='__main__')\n"
    "except ImportError as exc:\n"
    "    print(f'colbench: error: {sys.executable} cannot run a colbench rank ({exc}): '\n"
    "          'install the same colbench in every --python interpreter', file=sys.stderr)\n"
    "    sys.exit(2)\n"
)


class _RankProcess:
    """A rank started with ``subprocess``, shaped like a multiprocessing.Process for
    :mod:`colbench.host.supervise` (exitcode, sentinel, terminate, kill, join)."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self.pid = popen.pid
        # Readable once the process has exited: the supervisor blocks on it.
        self.sentinel = os.pidfd_open(popen.pid)

    @property
    def exitcode(self) -> int | None:
        return self._popen.poll()

    def is_alive(self) -> bool:
        return self._popen.poll() is None

    # Popen's own signals go to a process not yet reaped only (it polls first).
    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()

    def join(self, timeout: float | None = None) -> None:
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return


@dataclass
class InterpreterRanks:
    """The ranks of one world started in another interpreter (like mp's context)."""

    processes: list[_RankProcess]

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]


def start_in_interpreter(python: str, job: RankJob) -> InterpreterRanks:
    """Start ``job.world_size`` ranks of ``job`` with the interpreter ``python``."""
    run_dir = Path(job.run_dir or ".")
    job_file = run_dir / JOB_FILE
    payload = {"version": JOB_FILE_VERSION, "colbench": __version__, "job": pickle.dumps(job)}
    job_file.write_bytes(pickle.dumps(payload))
    argv = [python, "-c", _BOOT, str(job_file)]
    ranks = range(job.world_size)
    return InterpreterRanks(
        [_RankProcess(subprocess.Popen([*argv, str(r)], stdin=subprocess.DEVNULL)) for r in ranks]
    )


def main(argv: list[str]) -> None:
    """``python -m colbench.host.interpreter JOB RANK``: one rank's life."""
    job_path, rank = argv[0], int(argv[1])
    try:
        payload = pickle.loads(Path(job_path).read_bytes())
        if payload.get("version") != JOB_FILE_VERSION:
            raise ValueError(f"job file version {payload.get('version')}, not {JOB_FILE_VERSION}")
        job: RankJob = pickle.loads(payload["job"])
    except Exception as exc:
        # Another colbench in this interpreter cannot read this one's job.
        print(
            f"colbench: {sys.executable} (colbench {__version__}) cannot read the parent's "
            f"rank job: {type(exc).__name__}: {exc}; install the same colbench in every "
            "--python interpreter",
            file=sys.stderr,
        )
        os._exit(int(ExitCode.USAGE))
    spawned_rank(rank, job)


if __name__ == "__main__":
    main(sys.argv[1:])
