"""p2p's judging defaults, apart from the judging (colbench.commands.p2p.links, which needs
numpy): p2p's options table, and so ``colbench p2p --help``, needs nothing heavy."""

#: Passes p2p measures by default. At 3 a link of 4 ranks can just be named, when all 3
#: of its samples lie beyond all 15 of the others' (1/816 against the 0.0025 Holm asks
#: over 20 tests); at 5 the best p is 7e-06, and a link is still named when one of its
#: samples lands in the middle of the others' (p = 0.0014), a node of 4 whatever one of
#: its 15 samples does (docs/p2p.md).
DEFAULT_PASSES = 5
DEFAULT_BW_PCT = 25.0
#: Small-message latency on a busy host varies more than large-message bandwidth.
DEFAULT_LATENCY_PCT = 100.0
