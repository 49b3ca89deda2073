"""YAML suites: a sweep's options in a file (``colbench run configs/x.yaml``).

Keys are ``colbench sweep``'s long option names, values are what the flag takes (lists
may replace comma-separated strings), and ``variants`` maps environment variables to
their values like ``--env``. The schema is derived from colbench.config.options; :func:`load`
returns the values the same flags would give (option name -> value), so a suite means
exactly what the flags mean. Every error names the file, the line and the key.
"""

from __future__ import annotations

import difflib
import os
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from colbench import reading
from colbench.config import option_table, options, variants
from colbench.config.sizes import parse_size
from colbench.errors import UsageError


class _KeyError(Exception):
    """A bad value of one key: the message without file and line, which the caller adds."""


def _text_list(value: Any, key: str) -> str:
    """A string, a number or a list of them -> the comma list the flag takes."""
    items = value if isinstance(value, list) else [value]
    if not items or any(isinstance(i, bool) or not isinstance(i, str | int) for i in items):
        raise _KeyError(f"{key} must be a string or a list of strings, got {value!r}")
    return ",".join(str(i) for i in items)


def _typed(kind: type, wording: str, ok: Callable[[Any], bool]) -> Callable[[Any, str], Any]:
    """A converter that takes a value ``ok`` accepts, as ``kind``, and refuses the rest."""

    def convert(value: Any, key: str) -> Any:
        if not ok(value):
            raise _KeyError(f"{key} must be {wording}, got {value!r}")
        return kind(value)

    return convert


def _not_bool(*kinds: type) -> Callable[[Any], bool]:
    # YAML's true is an int to isinstance: a count or number given as true is a mistake.
    return lambda value: not isinstance(value, bool) and isinstance(value, kinds)


def _validated(convert: Callable[[Any, str], str], check: Callable[[str], Any]) -> Any:
    """A text converter followed by the CLI's own parser, so both agree on what is valid."""

    def run(value: Any, key: str) -> str:
        text = convert(value, key)
        check(text)
        return text

    return run


def _variants(value: Any, key: str) -> list[str]:
    """``{NCCL_ALGO: [Ring, Tree]}`` or ``["NCCL_ALGO=Ring,Tree"]`` -> --env strings."""
    if isinstance(value, dict):
        specs = []
        for name, values in value.items():
            items = values if isinstance(values, list) else [values]
            if not items or any(isinstance(i, bool | dict | list) or i is None for i in items):
                raise _KeyError(
                    f"{key}: {name} must map to a value or a list of values, got {values!r}"
                )
            specs.append(f"{name}={','.join(str(i) for i in items)}")
    elif isinstance(value, list) and all(isinstance(i, str) for i in value):
        specs = list(value)
    else:
        raise _KeyError(
            f"{key} must map variables to values, e.g. {{NCCL_ALGO: [Ring, Tree]}}, got {value!r}"
        )
    variants.parse_axes(specs)
    return specs


#: How a YAML value becomes the flag's text, by the option's ``yaml`` kind or, for ``auto``
#: (and no choices), by its type.
_CONVERTERS: dict[Any, Callable[[Any, str], Any]] = {
    "variants": _variants,
    "check": _typed(int, "true/false (or 1/0)", lambda value: value in (0, 1)),
    "size": _validated(_typed(str, "a size such as 64M or 1024", _not_bool(str, int)), parse_size),
    int: _typed(int, "an integer", _not_bool(int)),
    float: _typed(float, "a number", _not_bool(int, float)),
    bool: _typed(bool, "true or false", lambda value: isinstance(value, bool)),
    str: _typed(
        str, "a non-empty string", lambda value: isinstance(value, str) and bool(value.strip())
    ),
}


def _converter(opt: option_table.Option) -> Callable[[Any, str], Any]:
    """How a YAML value of ``opt`` becomes the value its flag would give."""
    spec = opt.spec
    if spec.yaml == "list":
        assert spec.parse is not None, f"option {opt.name}: a list needs its parser"
        return _validated(_text_list, spec.parse)
    if spec.yaml != "auto":
        return _CONVERTERS[spec.yaml]
    if spec.choices:
        allowed = f"one of {', '.join(spec.choices)}"
        return _typed(str, allowed, lambda value: value in spec.choices)
    (only,) = {t for t in typing.get_args(opt.type) if t is not type(None)} or {opt.type}
    return _CONVERTERS[only]


#: YAML key -> (sweep keyword, converter), from the options table (colbench.config.options).
SCHEMA: dict[str, tuple[str, Callable[[Any, str], Any]]] = {
    key: (opt.name, _converter(opt)) for opt in options.table() for key in opt.yaml_keys
}
#: Keys that document the suite and change nothing.
DOC_KEYS = ("description", "name")


def _unknown(key: str) -> str:
    known = sorted(set(SCHEMA) | set(DOC_KEYS))
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key {key!r}{hint}; known keys: {', '.join(known)}"


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a suite file into ``sweep`` keyword arguments (raises UsageError)."""
    file = Path(path)
    if not file.exists():
        raise UsageError(f"cannot read suite {file}: no such file")
    values = parse(reading.read_text(file, reading.SUITE), str(file))
    splits = values.get("splits")
    if isinstance(splits, str) and splits.startswith("file:"):
        # A suite names its traffic matrix as it lies beside it, wherever it is run from.
        matrix = Path(splits.removeprefix("file:"))
        if matrix.parts and not matrix.is_absolute():
            values["splits"] = f"file:{file.parent / matrix}"
    return values


def parse(text: str, source: str = "suite") -> dict[str, Any]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise UsageError(f"{source}{where}: not valid YAML: {problem}") from None
    if root is None:
        raise UsageError(f"{source}: the suite is empty; give at least op and sizes")
    if not isinstance(root, yaml.MappingNode):
        raise UsageError(
            f"{source} line {root.start_mark.line + 1}: a suite is a mapping of option: value"
        )
    values: dict[str, Any] = {}
    seen: dict[str, int] = {}
    constructor = yaml.SafeLoader("")
    for key_node, value_node in root.value:
        line = key_node.start_mark.line + 1
        key = str(key_node.value).replace("-", "_")
        if key in seen:
            raise UsageError(f"{source} line {line}: {key} is already set on line {seen[key]}")
        seen[key] = line
        if key in DOC_KEYS:
            continue
        if key not in SCHEMA:
            raise UsageError(f"{source} line {line}: {_unknown(key)}")
        target, convert = SCHEMA[key]
        if target in values:
            raise UsageError(f"{source} line {line}: give variants or env, not both")
        value_line = value_node.start_mark.line + 1
        try:
            # Safe construction only: a tag such as !!python/object is refused, never run.
            values[target] = convert(constructor.construct_object(value_node, deep=True), key)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise UsageError(f"{source} line {value_line}: {key}: {problem}") from None
        except _KeyError as exc:
            raise UsageError(f"{source} line {value_line}: {exc}") from None
        except UsageError as exc:
            raise UsageError(f"{source} line {value_line}: {key}: {exc}") from None
    return values
