"""The statistics every verdict stands on, fed only by numpy and the standard library.

- ranks: the rank tests (Mann-Whitney, Wilcoxon signed-rank), medians and spread.
- holm: the one multiple-testing procedure (Holm's step-down, weighted).
- power: the one power simulation: the smallest shift a rank test finds at a level.
- noise: when noise could explain a figure; Student's t without scipy; the one robust
  relative least-squares fit (Huber, then Tukey's bisquare).
- drift: the between-run prediction test of a rolling baseline; levels: the defaults.
"""
