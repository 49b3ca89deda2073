"""The hardware of a node, as the facts that bound a collective's bandwidth: GPUs (NVML),
NICs and PCIe links (sysfs), CPU and NUMA; the ceiling they put on each row.

Read in the ranks (the first rank of each node), never in the parent: NVML needs no CUDA
context, but the parent must not even load the driver's libraries for a CPU-only run.
What a source does not report is None, never guessed (a virtual machine's NVML often
lacks PCIe and NVLink facts).
"""
