"""Everything that reads two runs and says how they differ: one engine.

- engine: the one join. Each run's rows pool per key of the schema (results.KEY_COLUMNS),
  the repeats of a key being its samples; the keys of two runs pair up.
- verdict: the one verdict on a pair of pooled rows, given checks (verdicts, checks).
- compare: the engine with no checks: both values and their ratio per row, and a figure.
- gate: the engine with checks: a verdict per row and an exit code; baseline keeps it.
- series (rows -> curves) and fit (latency/bandwidth models); the statistics are stats/.
- links: the p2p verdict: which links and nodes of a pair matrix are slow beyond the noise
  of repeated passes (the gate's rank test, Holm over the questions).
"""
