"""The README's and docs' console examples, run for real (docs/development.md, "Docs
that run"): each block's commands in order, in a fresh empty directory, on gloo ranks.
Each must exit 0 and print output of the shape the page shows."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import call_colbench
from tests.docs_examples import Block, all_blocks, console_examples, shape_mismatch, where

# A console example is a few seconds of gloo; one that takes minutes is a hang.
COMMAND_TIMEOUT_S = 120

CONSOLE_BLOCKS = [block for block in all_blocks() if block.language == "console"]


def _run(argv: tuple[str, ...], cwd: Path) -> subprocess.CompletedProcess[str]:
    # One stream for stdout and stderr: lines arrive in the order a terminal shows them,
    # which is how the pages show them.
    return call_colbench(*argv[1:], timeout=COMMAND_TIMEOUT_S, cwd=cwd, merged=True)


def _block_problem(block: Block, cwd: Path) -> str | None:
    """What is wrong with running ``block``'s commands in ``cwd``: None when each exits 0
    and prints output of the page's shape."""
    cwd.mkdir()
    for example in console_examples(block):
        place = f"{where(example.path, example.line)}: {' '.join(example.argv)}"
        proc = _run(example.argv, cwd)
        if proc.returncode != 0:
            return f"{place}: exit {proc.returncode}\n{proc.stdout}"
        if example.output:
            mismatch = shape_mismatch(example.output, proc.stdout.splitlines())
            if mismatch is not None:
                return f"{place}: {mismatch}\n{proc.stdout}"
    return None


@pytest.mark.parametrize("block", CONSOLE_BLOCKS, ids=lambda b: where(b.path, b.line))
def test_console_example_runs_as_shown(block: Block, tmp_path: Path) -> None:
    # A block measures this machine as the page's reader would, so a fit over a few noisy
    # gloo runs can refuse or a figure can fall outside its shape on a busy machine (the
    # pages say how often). Such a block is measured once more, whole, in a fresh
    # directory: a page that is wrong fails both times; noise rarely does twice.
    first = _block_problem(block, tmp_path / "first")
    if first is None:
        return
    again = _block_problem(block, tmp_path / "again")
    assert again is None, f"failed twice; first:\n{first}\nagain:\n{again}"


def test_there_are_console_examples() -> None:
    # The README's size sweep and gate, and explain in semantics.md: losing them to a
    # fence typo would leave this file testing nothing.
    assert len(CONSOLE_BLOCKS) >= 3
