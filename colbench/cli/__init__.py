"""The command line: parses, converts, prints and sets exit codes. No measuring here.

``app`` is the Typer app; each module registers its commands on it when imported, in the
order ``colbench --help`` lists them: measuring first, then reading runs, then the rest.
"""

# isort: off
from colbench.cli import measure, analyse, info  # noqa: F401  (registers the commands)

# isort: on
from colbench.cli.app import app, main
from colbench.cli.measure import run, sweep

__all__ = ["app", "main", "run", "sweep"]
