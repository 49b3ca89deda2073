"""The host: starts the ranks of any task, supervises them, and says how the run ended.

It knows tasks, not sweeps (:class:`~.job.RankTask`): the sweep (colbench.commands.sweep.task) and
p2p (colbench.commands.p2p.task) are two.

- :mod:`.world`: launcher or spawn, backend, world size, run directory; a launched rank's run.
- :mod:`.spawn` (the parent's side) and :mod:`.child` (a rank's life, spawned or launched);
  :mod:`.interpreter` for ranks in another Python.
- :mod:`.job`: what a rank is given, what it is doing, what it tells its peers, how it failed.
- :mod:`.protocol`: the verdict read from ranks' reports and progress; :mod:`.outcome`: how a
  run ends, in meta.json and on the terminal.
- :mod:`.supervise`: the parent waiting on its ranks, stop signals, output that never stops a run.
- :mod:`.watchdog`: hangs; :mod:`.pace`: how long a run takes; :mod:`.turns`: the turn store
  interleaved worlds share.
"""
