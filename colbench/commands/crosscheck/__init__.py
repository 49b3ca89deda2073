"""``colbench crosscheck``: one sweep through nccl-tests and through colbench, per size.

The names of sweep's options it takes live here, where the CLI can read them without
importing the cross-check itself.
"""

#: sweep options that crosscheck maps onto nccl-tests flags (or uses itself).
MAPPED = frozenset(
    (
        *("op", "sizes", "minbytes", "maxbytes", "factor", "step", "dtype", "redop", "root"),
        *("placement", "iters", "warmup", "check", "average", "backend", "nprocs", "cuda_graph"),
        *("parallel_init", "out", "results_dir", "ranks_per_gpu", "engine", "register"),
        "cta_policy",
    )
)
#: sweep options that leave what is measured alone: passed to colbench's side as given.
FORWARDED = ("timeout", "init_timeout", "seed", "progress", "memory_check", "memory_limit")
