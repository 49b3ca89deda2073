"""``python -m colbench``: the same command line as ``colbench``."""

from colbench.cli import main

main()
