"""Where ranks come from: a launcher already started us, or we spawn them ourselves
(:mod:`colbench.host.spawn`).

:mod:`.env` (a process's place in a job, its host's limits), :mod:`.detect` (which launcher
started it, refusing partial or contradictory environments), :mod:`.rendezvous` (every rank
meets the others through one TCPStore), :mod:`.preflight` (the network, checked before any
rank waits), :mod:`.gpus` and :mod:`.devices` (GPUs read without a CUDA context, emulated
nodes, which GPU each rank takes). Nothing here imports torch at import time:
``colbench/__init__`` uses :func:`.env.quiet_other_ranks` before torch loads.
"""
