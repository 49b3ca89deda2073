"""Running a sweep, one module per role.

- :mod:`.parent`: the parent's orchestration: backend, world size, variants, plots.
- :mod:`.prepare`: what is decided before any rank starts (backend, world, run directory).
- :mod:`.spawn`: starting our own ranks, waiting for them, and the parent's verdict.
- :mod:`.launched`: joining a job an external launcher (torchrun, Slurm, MPI) started.
- :mod:`.job`: what a rank is given (:class:`~.job.RankJob`) and tells its peers; a
  :class:`~.job.RankTask` runs instead of the sweep (``colbench p2p``).
- :mod:`.rank`: a rank's life: join, agree on the plan, bench, leave.
- :mod:`.startup`: a rank's device, process group and hang watchdog.
- :mod:`.lead`: rank 0's share: its rows fed to the reporters (colbench.report.reporters).
- :mod:`.outcome`: how a run ends, in meta.json and on the terminal.
- :mod:`.protocol`: the parent<->rank protocol: progress in the rendezvous store,
  ``rankN.error.json`` reports, and the verdict read from them.
- :mod:`.supervise`: the parent waiting on its ranks' processes, and stop signals.
- :mod:`.watchdog`: the hang watchdog in every rank.
"""
