"""What NCCL's INFO log says it did with the newer knobs asked of it (their rules, and
which release has each: colbench.direct.knobs).

Read in NCCL's own wording (tags v2.27.3-1 .. v2.30.7-1), the patterns below: the CTA
policy from src/misc/param.cc (2.27-2.28) and src/init.cc, NVLS from src/transport/nvls.cc
and init.cc's ``coll channels`` line, registration from src/register/register.cc (under
NCCL_DEBUG_SUBSYS=REG), and a symmetric kernel's TUNING line
(src/scheduler/symmetric_sched.cc), which colbench.nccl.tuning reads as algorithm
``Symmetric``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from colbench.nccl.log import NcclLog
from colbench.nccl.tuning import SYMMETRIC

#: The variables whose effect is read here, as NCCL names them.
CTA_POLICY = "NCCL_CTA_POLICY"
NVLS_ENABLE = "NCCL_NVLS_ENABLE"

_SKIPPED = re.compile(r"^Skipping registration for buffer \S+ size \d+ \((?P<why>[^)]*)\)")
_REGISTERED = re.compile(r"^register comm \S+ buffer \S+ size \d+")
_INVALID_CTA = re.compile(r"^CTAPolicy -?\d+ is not a valid value, set it to \d+")
_NVLS = re.compile(r"^NVLS multicast support is (?P<not>not )?available.*$")


def evidence(log: NcclLog, env: Mapping[str, str], register: str) -> tuple[list[str], str | None]:
    """What NCCL's INFO log says it did with each knob asked of it (``env``, ``register``),
    one phrase each, and NCCL's own line when it did not do what was asked."""
    messages = [line.message for line in log.lines if line.level]
    nvls_channels = log.nvls_channels
    said: list[str] = []
    refused: str | None = None
    policy = env.get(CTA_POLICY)
    if policy is not None:
        invalid = next((m for m in messages if _INVALID_CTA.match(m)), None)
        read = log.env.get(CTA_POLICY)
        if invalid is not None:
            refused = f"NCCL says: {invalid}"
        elif read is not None:
            said.append(f"{CTA_POLICY}={read} (NCCL read it)")
        else:
            said.append(f"{CTA_POLICY}={policy} asked (NCCL's log has no line for it)")
    nvls = env.get(NVLS_ENABLE)
    if nvls is not None:
        line = next((m for m in messages if _NVLS.match(m)), None)
        on = bool(nvls_channels) and max(nvls_channels) > 0
        said.append(f"NVLS {'on' if on else 'off'} ({line or _channels_phrase(nvls_channels)})")
        if nvls.strip() == "1" and nvls_channels and not on:
            refused = refused or (
                f"{NVLS_ENABLE}=1 asked, and NCCL made no NVLS channels: "
                f"{line or _channels_phrase(nvls_channels)}"
            )
    if register != "none":
        skipped = next((m for m in messages if _SKIPPED.match(m)), None)
        registered = sum(1 for m in messages if _REGISTERED.match(m))
        if skipped is not None:
            refused = refused or f"NCCL skipped the registration: {skipped}"
        elif register == "symmetric":
            symmetric_calls = sum(1 for call in log.calls if call.algo == SYMMETRIC)
            said.append(f"symmetric kernels in {symmetric_calls} call(s)")
        else:
            said.append(f"{registered} buffer(s) registered")
    return said, refused


def _channels_phrase(counts: list[int]) -> str:
    return f"{max(counts)} nvls channels" if counts else "its log does not say"
