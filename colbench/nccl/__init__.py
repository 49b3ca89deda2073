"""What NCCL does and says, read from NCCL's own rules and logs: pure functions of the
facts and text handed in (no process group, no GPU, no file)."""
