"""What NCCL does and says, read from NCCL's own rules and logs.

``algo`` predicts which algorithms NCCL can run for a collective (its ``unsupported``
rows); ``log`` reads NCCL's INFO/WARN logs into typed facts. Both are pure: no process
group, no GPU, no file is needed beyond the text handed in.
"""
