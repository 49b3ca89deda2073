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


def _plain_warn(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextmanager
def progress_bar(total: int, enabled: bool | None, label: str = "sweep") -> Iterator[ProgressHooks]:
    """Yield hooks to advance the bar and to print warnings above it.

    ``enabled=None`` means: only when stderr is a terminal. When stdout is the same
    terminal, rich redraws table lines above the bar instead of through it.
    """
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled or total <= 0:
        yield ProgressHooks(lambda n: None, _plain_warn)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(file=sys.stderr)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        redirect_stdout=sys.stdout.isatty(),
        redirect_stderr=False,
    ) as progress:
        task = progress.add_task(label, total=total)

        def advance(n: int) -> None:
            progress.advance(task, n)

        def warn(line: str) -> None:
            progress.console.print(line, markup=False, highlight=False)

        yield ProgressHooks(advance, warn)
