"""``colbench sweep`` and ``colbench run``: the sweep as a task of the run host, its
rank-side measurement (plan, loop, timers, groups, rows, skew) and its parent-side variants."""
