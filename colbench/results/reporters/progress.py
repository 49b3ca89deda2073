"""A progress bar on stderr that never garbles the table on stdout."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class ProgressHooks:
    advance: Callable[[int], None]
    warn: Callable[[str], None]
    echo: Callable[[str], None]


def _plain_warn(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _plain_echo(line: str) -> None:
    print(line, file=sys.stdout, flush=True)


@contextmanager
def progress_bar(total: int, enabled: bool | None, label: str = "sweep") -> Iterator[ProgressHooks]:
    """Yield hooks to advance the bar and to print warnings above it.

    ``enabled=None`` means: only when stderr is a terminal. When stdout is the same
    terminal, rich redraws table lines above the bar instead of through it. ``echo``
    prints a table line: as it is, however narrow the terminal.
    """
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled or total <= 0:
        yield ProgressHooks(lambda n: None, _plain_warn, _plain_echo)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(file=sys.stderr)
    # Same terminal: table lines go through the bar's console, which clears the bar,
    # prints the line and draws the bar again below it.
    same_terminal = sys.stdout.isatty()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        redirect_stdout=same_terminal,
        redirect_stderr=False,
    ) as progress:
        task = progress.add_task(label, total=total)

        def advance(n: int) -> None:
            progress.advance(task, n)

        def warn(line: str) -> None:
            progress.console.print(line, markup=False, highlight=False)

        def echo(line: str) -> None:
            # soft_wrap: rich would otherwise break a line wider than the terminal with
            # a newline of its own, splitting one table row into two (the terminal's own
            # wrap keeps it one line, as without the bar).
            progress.console.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)

        yield ProgressHooks(advance, warn, echo if same_terminal else _plain_echo)
