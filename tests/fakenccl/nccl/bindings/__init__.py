"""Fake ``nccl.bindings``: see ``nccl.bindings.nccl``."""
