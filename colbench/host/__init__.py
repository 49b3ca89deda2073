"""The host: starts the ranks of any task, supervises them, and says how the run ended.

It knows tasks, not sweeps (:class:`~.job.RankTask`): the sweep (colbench.commands.sweep.task) and
p2p (colbench.commands.p2p.task) are two. :mod:`.world` settles launcher or spawn, backend,
world size and run directory; :mod:`.spawn` starts ranks (:mod:`.interpreter` in another
Python) and :mod:`.child` is a rank's life; :mod:`.job` what a rank is given and is doing;
:mod:`.supervise` keeps a run going and ends it; :mod:`.protocol` reads the verdict from
the ranks' reports; :mod:`.watchdog` catches hangs; :mod:`.pace` says how long a run takes;
:mod:`.turns` is the turn store interleaved worlds share.
"""
