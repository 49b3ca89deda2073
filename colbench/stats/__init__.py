"""The statistics every verdict stands on, fed only by numpy and the standard library.

- ranks: the rank tests (Mann-Whitney, Wilcoxon signed-rank), medians and spread.
- holm: the one multiple-testing procedure (Holm's step-down, weighted).
- power: the one power simulation: the smallest shift a rank test finds at a level.
- noise: when noise could explain a figure; Student's t without scipy; the one robust
  relative least-squares fit (Huber, then Tukey's bisquare).
- drift: the between-run prediction test of a rolling baseline.

The levels every verdict is stated at are declared here, with no imports, so that the
option tables the CLI builds read them without loading numpy.
"""

#: Family-wise error rate of every test family (gate, p2p, health).
DEFAULT_ALPHA = 0.05
#: A row's samples are noisy beyond this coefficient of variation (gate ``--max-cv-pct``).
DEFAULT_MAX_CV = 0.10
#: Power the detectable-slowdown figures are stated at (colbench.stats.power).
DEFAULT_POWER = 0.80
