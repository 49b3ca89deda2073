"""colbench: collective-communication benchmarks on torch.distributed."""

__version__ = "0.1.0"
