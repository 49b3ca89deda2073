"""The direct NCCL engine: NCCL called through nccl4py, beside torch.distributed.

``nccl4py.py`` is the one module that touches nccl4py; ``engine.py`` holds NCCL's own
engine, beside torch's (colbench.bench.groups), that the per-rank loop
(colbench.bench.loop) measures through. NCCL's newer knobs: ``knobs.py`` their values and
the releases that have them, ``register.py`` the direct engine's buffer registration
(nccl-tests' -R); colbench.bench.groups.knobbed refuses an engine, with the reason, where a knob
cannot hold.
"""
