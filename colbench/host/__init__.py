"""The host: starts the ranks of any task, supervises them, and says how the run ended.

It knows tasks, not sweeps (:class:`~.job.RankTask`): the sweep (colbench.commands.sweep.task) and
p2p (colbench.commands.p2p.task) are two.

- :mod:`.start`: :func:`~.start.start`: launcher or spawn, backend, world size, run directory.
- :mod:`.prepare`: the host's choices before any rank starts.
- :mod:`.spawn` (the parent's side) and :mod:`.child` (a spawned rank's side);
  :mod:`.interpreter` for ranks in another Python.
- :mod:`.launched`: joining a job an external launcher (torchrun, Slurm, MPI) started.
- :mod:`.job`: what a rank is given (:class:`~.job.RankJob`) and tells its peers.
- :mod:`.rank`: a rank's life: join, run its task, leave; :mod:`.startup`: its device,
  process group and hang watchdog.
- :mod:`.outcome`: how a run ends, in meta.json and on the terminal.
- :mod:`.protocol`: the parent<->rank protocol: progress in the rendezvous store,
  ``rankN.error.json`` reports, and the verdict read from them.
- :mod:`.supervise`: the parent waiting on its ranks' processes, and stop signals.
- :mod:`.watchdog`, :mod:`.inflight`, :mod:`.faults`: hangs, what a rank is doing, and
  injected faults for the tests.
- :mod:`.turns`: the turn store interleaved worlds share.
"""
