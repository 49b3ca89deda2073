"""``colbench crosscheck``: one sweep through nccl-tests and through colbench, per size."""
