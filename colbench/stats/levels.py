"""The levels every verdict is stated at, declared once; no imports, so that the option
tables the CLI builds can read them without loading numpy."""

#: Family-wise error rate of every test family (gate, p2p, health).
DEFAULT_ALPHA = 0.05
#: A row's samples are noisy beyond this coefficient of variation (gate ``--max-cv-pct``).
DEFAULT_MAX_CV = 0.10
#: Power the detectable-slowdown figures are stated at (colbench.stats.power).
DEFAULT_POWER = 0.80
