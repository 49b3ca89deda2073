"""The hardware of a node (GPUs, NICs, PCIe links, CPU and NUMA) and the ceiling it puts
on each row. Read in the ranks, never in the parent, which must not even load the GPU
driver's libraries for a CPU-only run; what a source does not report is None, never
guessed (a virtual machine's NVML often lacks PCIe and NVLink facts).
"""
