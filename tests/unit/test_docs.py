"""Every command says what it does and shows an example (sqlite-utils' test_docs idea)."""

from __future__ import annotations

from pathlib import Path

import pytest

from colbench.cli import main

COMMANDS = ["sweep", "run", "plot", "compare", "import", "crosscheck", "fit", "explain", "env"]
README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert "Example" in out and f"colbench {command}" in out


@pytest.mark.parametrize(
    "command", ["run", "plot", "compare", "import nccl-tests", "crosscheck", "fit"]
)
def test_readme_documents_the_command(command: str) -> None:
    assert f"colbench {command} " in README.read_text()
