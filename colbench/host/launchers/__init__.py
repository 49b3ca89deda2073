"""Where ranks come from: a launcher already started us, or we spawn them ourselves.

- :mod:`~colbench.host.launchers.env`: :class:`LaunchEnv`, one process's place in a job, and the
  env:// variables written from it, which ranks share a node; what this host's limits allow;
- :mod:`~colbench.host.launchers.detect`: which launcher (torchrun, Open MPI, MPICH, Slurm)
  started this process, refusing partial or contradictory environments; Slurm's compact
  host and task lists;
- :mod:`~colbench.host.launchers.rendezvous`: every rank meets the others through one TCPStore
  (who answers at its address asked first, in bounded time);
- :mod:`~colbench.host.launchers.preflight`: what a job's network allows, checked before any
  rank waits;
- :mod:`~colbench.host.launchers.gpus`, :mod:`~colbench.host.launchers.devices`: the GPUs
  (without a CUDA context), emulated nodes, and which GPU each rank takes.

Spawning our own ranks is :mod:`colbench.host.spawn`. Nothing here imports torch at
import time: ``colbench/__init__`` uses :func:`~.env.quiet_other_ranks` before torch loads.
"""
