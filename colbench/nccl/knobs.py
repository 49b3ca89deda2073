"""NCCL's newer knobs: which NCCL has them, and what its log says it did with them.

Three knobs, as nccl-tests 2.19.6 (src/common.cu) and NCCL (tags v2.19.3-1 .. v2.30.7-1)
define them:

- user-buffer registration, nccl-tests' ``-R``: 1 registers each send and receive
  buffer with ``ncclCommRegister`` (NCCL 2.19+), 2 registers them as symmetric windows
  with ``ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC)`` (NCCL 2.27+). nccl-tests
  quietly registers locally when 2 is asked of an older NCCL; colbench refuses instead.
- ``NCCL_CTA_POLICY``, nccl-tests' ``-x`` (which sets ``ncclConfig_t.CTAPolicy``; the
  variable overrides it, src/init.cc): 0 default, 1 efficiency (NCCL 2.27+), 2 zero
  (NCCL 2.28+). Older releases have no such parameter and ignore the variable.
- ``NCCL_NVLS_ENABLE``: 0 off, 1 forced on, 2 (the default) where the GPUs support
  multicast (src/transport/nvls.cc).

What NCCL did is read from its INFO log (:func:`evidence`), in NCCL's own wording:
``NCCL_CTA_POLICY set by environment to 1.`` (src/misc/param.cc, 2.27-2.28),
``CTAPolicy 5 is not a valid value, set it to 0`` (src/init.cc), ``NVLS multicast support
is not available on dev 0 (NVLS_NCHANNELS 0)`` (src/transport/nvls.cc), ``register comm
0x... buffer 0x... size 1024`` and ``Skipping registration for buffer 0x... size 1024
(LocalRegister=0, P2pUsesMemcpy=0)`` (src/register/register.cc), and, per call, the
TUNING line of a symmetric kernel, ``AllReduce [Symmetric]: 1024 Bytes -> Kernel ...``
(src/scheduler/symmetric_sched.cc), which colbench.nccl.tuning reads as algorithm
``Symmetric``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from colbench.errors import UsageError
from colbench.nccl.names import Version, version_text

#: ``--register`` (nccl-tests' -R 0/1/2), in nccl-tests' order.
REGISTER_MODES = ("none", "local", "symmetric")
#: The first NCCL of each registration (nccl-tests gates -R on the same releases).
REGISTER_SINCE: dict[str, Version] = {"local": (2, 19, 0), "symmetric": (2, 27, 0)}
#: NCCL_CTA_POLICY's values (nccl.h's NCCL_CTA_POLICY_*), and the first NCCL of each.
CTA_POLICIES = {"0": "default", "1": "efficiency", "2": "zero"}
CTA_POLICY_SINCE: dict[str, Version] = {"0": (2, 27, 0), "1": (2, 27, 0), "2": (2, 28, 0)}
CTA_POLICY = "NCCL_CTA_POLICY"
NVLS_ENABLE = "NCCL_NVLS_ENABLE"

_SKIPPED = re.compile(r"^Skipping registration for buffer \S+ size \d+ \((?P<why>[^)]*)\)")
_REGISTERED = re.compile(r"^register comm \S+ buffer \S+ size \d+")
_INVALID_CTA = re.compile(r"^CTAPolicy -?\d+ is not a valid value, set it to \d+")
_NVLS = re.compile(r"^NVLS multicast support is (?P<not>not )?available.*$")


def parse_register(text: str) -> str:
    """``--register``: a mode's name, or nccl-tests' -R digit (0 none, 1 local, 2 symmetric)."""
    key = text.strip().lower()
    if key.isdigit() and int(key) < len(REGISTER_MODES):
        return REGISTER_MODES[int(key)]
    if key in REGISTER_MODES:
        return key
    raise UsageError(
        f"bad --register {text!r}: use none, local or symmetric (nccl-tests' -R 0, 1 or 2)"
    )


def parse_cta_policies(text: str) -> tuple[str, ...]:
    """``--cta-policy 0,1`` (nccl-tests' -x, by number or NCCL's name) -> ("0", "1")."""
    by_name = {name: digit for digit, name in CTA_POLICIES.items()}
    found: list[str] = []
    for part in (p.strip().lower() for p in text.split(",")):
        digit = part if part in CTA_POLICIES else by_name.get(part)
        if digit is None:
            raise UsageError(
                f"bad --cta-policy {text!r}: use 0 (default), 1 (efficiency) or 2 (zero), "
                "one or a list (nccl-tests' -x)"
            )
        if digit in found:
            raise UsageError(f"bad --cta-policy {text!r}: a policy is listed twice")
        found.append(digit)
    return tuple(found)


def refusal(register: str, env: Mapping[str, str], version: Version | None) -> str | None:
    """Why the NCCL in use cannot honour the knobs asked of it (one line), or None.

    ``env``: the rank's environment (its variant's NCCL_CTA_POLICY); ``version``: the
    libnccl the calls go to (None: unknown, nothing is refused on a guess)."""
    if version is None:
        return None
    since = REGISTER_SINCE.get(register)
    if since is not None and version < since:
        call = "ncclCommWindowRegister" if register == "symmetric" else "ncclCommRegister"
        return (
            f"--register {register} needs {call}, NCCL {version_text(since)}+; "
            f"this NCCL is {version_text(version)}"
        )
    policy = env.get(CTA_POLICY, "").strip()
    if policy in CTA_POLICY_SINCE and version < CTA_POLICY_SINCE[policy]:
        return (
            f"{CTA_POLICY}={policy} ({CTA_POLICIES[policy]}) needs NCCL "
            f"{version_text(CTA_POLICY_SINCE[policy])}+; this NCCL is "
            f"{version_text(version)}, which ignores the variable"
        )
    return None


def evidence(
    messages: list[str],
    env: Mapping[str, str],
    register: str,
    symmetric_calls: int,
    nvls_channels: list[int],
) -> tuple[list[str], str | None]:
    """What NCCL's INFO log (``messages``, its INFO/WARN lines) says it did with each knob
    asked of it, one phrase each, and NCCL's own line when it did not do what was asked.

    ``symmetric_calls``: the calls its TUNING lines ran on a symmetric kernel;
    ``nvls_channels``: the NVLS channel counts of its ``coll channels`` lines."""
    said: list[str] = []
    refused: str | None = None
    policy = env.get(CTA_POLICY)
    if policy is not None:
        invalid = next((m for m in messages if _INVALID_CTA.match(m)), None)
        read = _env_value(messages, CTA_POLICY)
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
            said.append(f"symmetric kernels in {symmetric_calls} call(s)")
        else:
            said.append(f"{registered} buffer(s) registered")
    return said, refused


def _env_value(messages: list[str], name: str) -> str | None:
    prefix = f"{name} set by environment to "
    for message in messages:
        if message.startswith(prefix):
            return message[len(prefix) :].rstrip(".")
    return None


def _channels_phrase(counts: list[int]) -> str:
    return f"{max(counts)} nvls channels" if counts else "its log does not say"
