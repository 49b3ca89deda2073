"""The direct NCCL engine: NCCL called through nccl4py, beside torch.distributed, and
NCCL's newer knobs (their values, the releases that have them, buffer registration) that
colbench.bench.groups.knobbed checks before an engine measures."""
