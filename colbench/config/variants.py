"""Environment variants: ``--env KEY=V1,V2`` axes whose cartesian product multiplies a sweep.

A variant is a set of environment variables that must be in place before a rank's
process group exists (NCCL reads NCCL_ALGO, NCCL_PROTO... when it creates the
communicator), so every variant runs in freshly started ranks. Its name, e.g.
``NCCL_ALGO=Tree,NCCL_PROTO=LL``, is what the ``variant`` column of every row carries.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from colbench.direct.knobs import CTA_POLICY, parse_cta_policies
from colbench.errors import UsageError

#: POSIX-portable environment variable names.
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: The ``--contend`` axis in a variant's name (colbench.config.contend): ``contend=none``
#: and ``contend=LOAD``.
CONTEND_KEY = "contend"
CONTEND_NONE = "none"
#: The ``--engine torch,nccl`` axis in a variant's name (colbench.direct.engine).
ENGINE_KEY = "engine"

#: One axis: a variable and the values it takes, in the order given.
Axis = tuple[str, tuple[str, ...]]


@dataclass(frozen=True)
class Variant:
    """One point of the product: the variables to set and the name rows carry."""

    env: tuple[tuple[str, str], ...]
    #: Each None where the sweep has no such axis: ``--python``'s (name, interpreter path)
    #: the ranks run in, ``--contend``'s load label (or ``none``: the world without it), and
    #: ``--engine torch,nccl``'s engine the world's calls go through.
    interpreter: tuple[str, str] | None = None
    contend: str | None = None
    engine: str | None = None

    @property
    def name(self) -> str:
        python = self.interpreter[0] if self.interpreter is not None else None
        axes = (
            *self.env,
            ("python", python),
            (CONTEND_KEY, self.contend),
            (ENGINE_KEY, self.engine),
        )
        return ",".join(f"{key}={value}" for key, value in axes if value is not None)

    @property
    def loaded(self) -> bool:
        """Whether this world runs the --contend load."""
        return self.contend not in (None, CONTEND_NONE)

    @property
    def python(self) -> str | None:
        return self.interpreter[1] if self.interpreter is not None else None

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self.env)


def variant_env(variant: str) -> dict[str, str]:
    """A variant's name back to its variables: ``NCCL_ALGO=Ring,Tree,NCCL_PROTO=LL`` ->
    ``{"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "LL"}``; a piece without ``=`` continues
    the previous value (values may hold commas)."""
    env: dict[str, str] = {}
    last = None
    for piece in variant.split(","):
        key, sep, value = piece.partition("=")
        if sep:
            last = key.strip()
            env[last] = value
        elif last is not None:
            env[last] += "," + piece
    return env


def parse_axis(spec: str) -> Axis:
    """``"NCCL_ALGO=Ring,Tree"`` -> ``("NCCL_ALGO", ("Ring", "Tree"))``."""
    key, sep, values_text = spec.partition("=")
    key = key.strip()
    if not sep or not key:
        raise UsageError(
            f"bad --env {spec!r}: use KEY=VALUE or KEY=V1,V2 (e.g. NCCL_ALGO=Ring,Tree)"
        )
    if not _NAME_RE.match(key):
        raise UsageError(f"bad --env {spec!r}: {key!r} is not an environment variable name")
    values = tuple(v.strip() for v in values_text.split(","))
    if any(not v for v in values):
        raise UsageError(f"bad --env {spec!r}: empty value (values are separated by commas)")
    if len(set(values)) != len(values):
        raise UsageError(f"bad --env {spec!r}: a value is listed twice")
    return key, values


def parse_axes(specs: Sequence[str]) -> tuple[Axis, ...]:
    """Several ``--env`` options; one variable may be given only once."""
    axes: list[Axis] = []
    for spec in specs:
        axis = parse_axis(spec)
        if any(axis[0] == key for key, _ in axes):
            raise UsageError(f"--env {axis[0]} is given twice; list its values once: KEY=V1,V2")
        axes.append(axis)
    return tuple(axes)


def merge_axes(base: Sequence[Axis], override: Sequence[Axis]) -> tuple[Axis, ...]:
    """``override``'s axes replace ``base``'s axes of the same variable; others are kept."""
    replaced = dict(override)
    merged = [(key, replaced.pop(key, values)) for key, values in base]
    merged += [(key, values) for key, values in override if key in replaced]
    return tuple(merged)


def parse_interpreters(spec: str | None) -> tuple[tuple[str, str], ...]:
    """``"A=/venv-a/bin/python,B=/venv-b/bin/python"`` -> ((name, path), ...)."""
    if not spec:
        return ()
    found: list[tuple[str, str]] = []
    for part in spec.split(","):
        name, sep, path = (x.strip() for x in part.partition("="))
        if not sep or not name or not path:
            raise UsageError(
                f"bad --python {spec!r}: use NAME=PATH,NAME=PATH "
                "(e.g. main=/ci/venv-main/bin/python,pr=/ci/venv-pr/bin/python)"
            )
        if not _NAME_RE.match(name):
            raise UsageError(f"bad --python {spec!r}: name {name!r} must be a word")
        if any(name == seen for seen, _ in found):
            raise UsageError(f"bad --python {spec!r}: name {name!r} is given twice")
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise UsageError(f"bad --python {spec!r}: {path} is not an executable file")
        if any(path == seen for _, seen in found):
            found.append((name, path))
            continue
        why = _cannot_run_ranks(path)
        if why is not None:
            raise UsageError(f"bad --python {spec!r}: {path} {why}")
        found.append((name, path))
    return tuple(found)


#: Whether an interpreter holds the module its ranks run (colbench.host.interpreter), found
#: as a rank finds it: without the working directory on sys.path.
_FINDS_RANKS = (
    "import importlib.util, sys\n"
    "sys.path[:1] = [] if sys.path[:1] == [''] else sys.path[:1]\n"
    "found = importlib.util.find_spec('colbench.host.interpreter')\n"
    "print('colbench ranks' if found else 'none')\n"
)


def _cannot_run_ranks(path: str) -> str | None:
    """Why ``path`` cannot run a --python variant's ranks (None: it can), asked before any
    rank starts: else the first variant's ranks run and the next one's fail as ranks."""
    import subprocess

    try:
        done = subprocess.run(
            [path, "-c", _FINDS_RANKS], capture_output=True, timeout=60, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot be started ({exc})"
    # The answer, not the exit status: any program that exits 0 would pass on that.
    if done.returncode != 0 or done.stdout.strip() != b"colbench ranks":
        return (
            "has no colbench that runs ranks: install the same colbench in every --python "
            "interpreter"
        )
    return None


def expand(
    axes: Sequence[Axis],
    interpreters: Sequence[tuple[str, str]] = (),
    contend: str | None = None,
    engines: Sequence[str] = (),
) -> tuple[Variant, ...]:
    """Cartesian product of the axes (first axis slowest), then of the interpreters, then
    without and with the ``contend`` load (its label; None: no such axis), then of the
    ``engines`` when there are two or more (one is no axis); none of them -> one empty
    variant."""
    keys = [key for key, _ in axes]
    envs = [
        tuple(zip(keys, combo, strict=True))
        for combo in itertools.product(*(values for _, values in axes))
    ]
    pythons: Sequence[tuple[str, str] | None] = tuple(interpreters) or (None,)
    loads: Sequence[str | None] = (None,) if contend is None else (CONTEND_NONE, contend)
    each: Sequence[str | None] = tuple(engines) if len(engines) > 1 else (None,)
    return tuple(
        Variant(env, python, load, engine)
        for env in envs
        for python in pythons
        for load in loads
        for engine in each
    )


def ignored_by_backend(axes: Sequence[Axis], backend: str) -> list[str]:
    """Variables of the axes that the backend never reads (NCCL_* on gloo)."""
    return [] if backend == "nccl" else [key for key, _ in axes if key.startswith("NCCL_")]


@contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """Set variables for processes started inside the block, then restore the old values."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def cta_policy_axis(axes: tuple[Axis, ...], text: str) -> tuple[Axis, ...]:
    """``--cta-policy`` (nccl-tests' -x) is the NCCL_CTA_POLICY variant axis: NCCL reads
    the variable when a communicator starts, for torch's and the direct engine's alike
    (it overrides ncclConfig_t.CTAPolicy, which nccl-tests sets)."""
    if any(key == CTA_POLICY for key, _ in axes):
        raise UsageError(f"give --cta-policy or --env {CTA_POLICY}=..., not both")
    return (*axes, (CTA_POLICY, parse_cta_policies(text)))
