"""One package per command: its options, ``run(...) -> int`` and its text; the CLI
(:mod:`colbench.cli`) declares the commands from them."""
