"""Error types and the exit codes the CLI maps them to (documented in docs/troubleshooting.md)."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Process exit status of every colbench command."""

    OK = 0
    #: The run completed but some result had wrong elements (or a gate failed, or the
    #: average busbw was below 0.9x NCCL_TESTS_MIN_BW: nccl-tests fails both alike).
    DATA_ERROR = 1
    #: Bad command line, config or input file: nothing was measured.
    USAGE = 2
    #: A rank failed (exception, signal) mid-run; rows measured before are kept.
    RANK_FAILURE = 3
    #: The process group timed out; rows measured before are kept.
    TIMEOUT = 4
    #: colbench gate --fail-inconclusive: it passed on correctness and presence only.
    INCONCLUSIVE = 5
    #: A file of the run could not be written (disk full, directory gone); what was
    #: already written stays readable.
    WRITE_FAILED = 6
    #: SIGINT / SIGTERM: 128 + signal number, like a shell.
    INTERRUPTED = 130
    #: stdout's reader closed it (``| head``): 128 + SIGPIPE, as a shell reports a
    #: process that pipe ended; not 1, which says the results were wrong.
    BROKEN_PIPE = 141


class UsageError(ValueError):
    """Bad user input. The CLI prints the message on one line and exits with 2."""

    exit_code: int = ExitCode.USAGE


class WriteFailed(RuntimeError):
    """A file could not be written; the message names it and the cause (exit 6)."""

    exit_code: int = ExitCode.WRITE_FAILED

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class RankFailure(RuntimeError):
    """A rank died or raised; the message names the rank and what it was doing."""

    #: The process's exit code for it (a start-up that never completed is a timeout).
    exit_code: int = ExitCode.RANK_FAILURE

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
