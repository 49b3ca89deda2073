"""NCCL's newer knobs as colbench asks for them: the values, and which NCCL has each.

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
  multicast (src/transport/nvls.cc); every NCCL colbench runs on has it.

What NCCL did with them is read from its log (colbench.nccl.knobs).
"""

from __future__ import annotations

from collections.abc import Mapping

from colbench.errors import UsageError

#: An NCCL release as (major, minor, patch).
Version = tuple[int, int, int]

#: ``--register`` (nccl-tests' -R 0/1/2), in nccl-tests' order.
REGISTER_MODES = ("none", "local", "symmetric")
#: The first NCCL of each registration (nccl-tests gates -R on the same releases).
REGISTER_SINCE: dict[str, Version] = {"local": (2, 19, 0), "symmetric": (2, 27, 0)}
#: NCCL_CTA_POLICY's values (nccl.h's NCCL_CTA_POLICY_*), and the first NCCL of each.
CTA_POLICIES = {"0": "default", "1": "efficiency", "2": "zero"}
CTA_POLICY_SINCE: dict[str, Version] = {"0": (2, 27, 0), "1": (2, 27, 0), "2": (2, 28, 0)}
CTA_POLICY = "NCCL_CTA_POLICY"


def version_text(version: Version) -> str:
    """(2, 28, 9) as ``2.28.9``."""
    return ".".join(map(str, version))


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
