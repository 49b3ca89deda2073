"""The world size of an nccl-tests log that lacks ``# Using devices`` rank lines.

A trimmed log can still say how many ranks ran, in three places:

- NCCL's own ``comm 0x... rank R nranks N`` lines (printed with ``NCCL_DEBUG=INFO``);
- nccl-tests' ``# nThread T nGpus G`` header (or ``-t``/``-g`` on its command line): each
  process drives T x G ranks, so the world is T x G x processes;
- the command line: ``mpirun -np P`` gives the processes, and a ``*_perf`` binary run
  bare in a log that names no launcher anywhere is one process.

Only a single, consistent answer is taken; otherwise the error says where to look.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NRANKS = re.compile(r"\bcomm 0x[0-9a-f]+ rank \d+ nranks (\d+)", re.IGNORECASE)
_THREADS_GPUS = re.compile(r"\bnThread\s+(\d+)\s+nGpus\s+(\d+)")
_PERF_BINARY = re.compile(r"(?:^|/)[a-z][a-z0-9_]*_perf(?:_mpi)?$")
_LAUNCHERS = ("mpirun", "mpiexec", "orterun", "prterun", "srun", "aprun", "jsrun", "flux")
#: Launcher options that give the number of processes.
_PROCESS_FLAGS = ("-np", "-n", "--np", "--n", "--ntasks")
_FLAG_VALUE = re.compile(r"^(-[-\w]+)=(\d+)$")


@dataclass
class WorldEvidence:
    """What one run's part of a log says about its world size."""

    nranks: set[int] = field(default_factory=set)
    header: tuple[int, int] | None = None
    #: (threads, gpus, processes) from the ``*_perf`` command line; None where not given.
    command: tuple[int | None, int | None, int | None] | None = None
    launcher_named: bool = False

    def observe(self, line: str) -> None:
        """Take what one log line (prefix already stripped) says."""
        if match := _NRANKS.search(line):
            self.nranks.add(int(match.group(1)))
            return
        if match := _THREADS_GPUS.search(line):
            self.header = (int(match.group(1)), int(match.group(2)))
        tokens = line.split()
        if line.startswith("#"):
            # nccl-tests' own comments name the binary ("Collective test starting: x_perf")
            # but are no command line.
            return
        if any(t.rsplit("/", 1)[-1] in _LAUNCHERS for t in tokens):
            self.launcher_named = True
        for index, token in enumerate(tokens):
            options_follow = any(t.startswith("-") for t in tokens[index + 1 :])
            if _PERF_BINARY.search(token) and options_follow:
                self.command = _command(tokens[:index], tokens[index + 1 :])
                return

    def infer(self) -> tuple[int, str] | None:
        """(world size, where the log says it), when the log says it one way only."""
        answers = {n: f"NCCL INFO 'nranks {n}' lines" for n in self.nranks}
        product = self._product()
        if product is not None:
            answers.setdefault(product[0], product[1])
        if len(answers) != 1:
            return None
        return next(iter(answers.items()))

    def where_to_look(self) -> str:
        """What the log says and lacks, for the error that asks for --world-size."""
        if len(self.nranks) > 1:
            values = ", ".join(str(n) for n in sorted(self.nranks))
            return f"its NCCL INFO lines show communicators of {values} ranks"
        product = self._product()
        if self.nranks and product is not None:
            return (
                f"its NCCL INFO lines say nranks {next(iter(self.nranks))} but its "
                f"{product[1]} give {product[0]}"
            )
        threads, gpus = self._threads_gpus()
        if self.header is not None or self.command is not None:
            where = "'# nThread T nGpus G' header" if self.header else "-t/-g options"
            return (
                f"its {where} gives nThread {threads} x nGpus {gpus} ranks per process but "
                "not how many processes ran (mpirun -np P)"
            )
        return (
            "no '# nThread T nGpus G' header with its mpirun command nor NCCL INFO "
            "'nranks N' lines (NCCL_DEBUG=INFO)"
        )

    def _threads_gpus(self) -> tuple[int, int]:
        # The header is what the binary used; the command line only what it was asked.
        if self.header is not None:
            return self.header
        threads, gpus, _ = self.command or (None, None, None)
        return threads or 1, gpus or 1

    def _product(self) -> tuple[int, str] | None:
        if self.command is None:
            return None
        processes = self.command[2]
        if processes is None and not self.launcher_named:
            processes = 1
        if processes is None:
            return None
        threads, gpus = self._threads_gpus()
        source = "'# nThread T nGpus G' header" if self.header else "-t/-g options"
        how = "one process" if self.command[2] is None else f"{processes} processes"
        return threads * gpus * processes, f"{source} and command line ({how})"


def _command(before: list[str], after: list[str]) -> tuple[int | None, int | None, int | None]:
    """(threads, gpus, processes) named on a ``*_perf`` command line."""
    options = _options(after)
    launched = any(t.rsplit("/", 1)[-1] in _LAUNCHERS for t in before)
    processes = None
    if launched:
        launcher = _options(before)
        processes = next((launcher[f] for f in _PROCESS_FLAGS if f in launcher), None)
    threads = options.get("-t", options.get("--nthreads"))
    gpus = options.get("-g", options.get("--ngpus"))
    return threads, gpus, processes


def _options(tokens: list[str]) -> dict[str, int]:
    """Integer-valued options, as ``-g 8`` or ``--ntasks=8``."""
    found: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if match := _FLAG_VALUE.match(token):
            found[match.group(1)] = int(match.group(2))
        elif token.startswith("-") and index + 1 < len(tokens) and tokens[index + 1].isdigit():
            found[token] = int(tokens[index + 1])
    return found
