"""The direct NCCL engine: NCCL called through nccl4py, beside torch.distributed.

``nccl4py.py`` is the one module that touches nccl4py; ``engine.py`` holds the two engines
the per-rank loop (colbench.bench.loop) measures through: torch's and NCCL's own.
NCCL's newer knobs: ``knobs.py`` their values and the releases that have them,
``register.py`` the direct engine's buffer registration (nccl-tests' -R), ``knobbed.py``
an engine refused, with the reason, where a knob cannot hold.
"""
