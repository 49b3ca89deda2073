"""Fake nccl4py (tests/fakenccl): the names colbench.direct.nccl4py uses, recorded."""
