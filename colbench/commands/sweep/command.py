"""``colbench sweep`` and ``colbench run`` as plain functions: options in, exit code out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from colbench.config import min_bw, options, suite, validate
from colbench.config.options import SweepOptions


def options_of(suite_file: str | None, given: Mapping[str, Any]) -> SweepOptions:
    """One path for flags, a suite, or both: defaults < the file < the flags given."""
    file_values = suite.load(suite_file) if suite_file is not None else {}
    return options.merge(file_values, given)


def run(opts: SweepOptions, command_line: tuple[str, ...] = ()) -> int:
    """Check the options, measure, report; the exit code (docs/troubleshooting.md)."""
    cfg = validate.from_options(opts, command_line)
    # Refused before any rank starts, not found wrong after the measuring.
    min_bw.from_environment()
    # Imported after the options are checked: the runner needs torch, whose import (1 s
    # on CPU, 5 s with a CUDA build) a usage error should not wait for.
    from colbench.commands.sweep.parent import run_sweep

    return run_sweep(cfg)
