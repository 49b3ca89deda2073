"""colbench: collective-communication benchmarks on torch.distributed."""

from colbench.host.launchers.env import quiet_other_ranks as _quiet_other_ranks

__version__ = "0.1.0"

# Must run before anything imports torch (see the function).
_quiet_other_ranks()
