"""The direct NCCL engine: NCCL called through nccl4py, beside torch.distributed.

``nccl4py.py`` is the one module that touches nccl4py; ``engine.py`` holds the two engines
the per-rank loop (colbench.bench.loop) measures through: torch's and NCCL's own.
"""
