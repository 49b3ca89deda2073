"""An engine under NCCL's newer knobs: refused, with the reason, where they cannot hold.

A variant's NCCL_CTA_POLICY is read by NCCL when the communicator starts; a release
older than the policy ignores it without a word, and the rows would carry the variant's
name without its policy. ``--register`` is the direct engine's alone. Either way the
engine is wrapped (colbench.bench.groups.Refused) and every row of the world says
``unsupported`` and why (colbench.direct.knobs.refusal).
"""

from __future__ import annotations

import os
from typing import Any

from colbench.bench.groups import Engine, Refused
from colbench.direct.engine import DIRECT, TORCH_CANNOT_REGISTER
from colbench.direct.knobs import Version, refusal


def knobbed(engine: Engine, register: str, version: Version | None) -> Engine:
    """``engine``, or a refused one; ``register``: what this engine is asked to register
    that it has not already answered for itself (the direct engine answers in its own
    start-up: pass ``none``), ``version``: the libnccl its calls go to."""
    if register != "none" and engine.name != DIRECT:
        return Refused(engine, TORCH_CANNOT_REGISTER)
    why = refusal("none", os.environ, version)
    return engine if why is None else Refused(engine, why)


def torch_nccl_version(device: Any) -> Version | None:
    """The NCCL torch loaded, on a GPU (None on a CPU: no NCCL, no knob to refuse)."""
    if device.type != "cuda":
        return None
    import torch

    raw = torch.cuda.nccl.version()
    return (int(raw[0]), int(raw[1]), int(raw[2])) if isinstance(raw, tuple) else None
