"""The machinery of colbench's options tables: one declaration per option.

A command's options are the fields of a frozen dataclass (sweep's
:class:`colbench.config.options.SweepOptions`, p2p's, gate's, predict's): the field's type
and default are the option's, :func:`option` attaches the rest. Their :class:`Option` rows
make the Typer parameters (colbench.cli.app), suite schemas and docs/options.md.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from colbench.errors import UsageError

#: How a YAML value becomes the flag's text: ``auto`` goes by the field's type (and
#: choices); ``list`` takes a string or a list joined by commas; ``size`` a size such as
#: 64M; ``check`` true/false or 1/0; ``variants`` a mapping of variable to values.
YamlKind = Literal["auto", "list", "size", "check", "variants"]
#: The concern an option belongs to (the config dataclass it feeds; the docs' sections);
#: ``judge`` (how a measurement is judged) is for p2p, gate and predict, never sweep.
Concern = Literal["measure", "launch", "output", "judge"]
CONCERNS: dict[Concern, str] = {
    "measure": "What to measure",
    "launch": "How to launch",
    "output": "What to write",
}


@dataclass(frozen=True)
class Spec:
    """Everything about one option besides its type and default."""

    flags: tuple[str, ...]
    """Command-line names: the long flag first, then aliases (nccl-tests' short ones)."""
    help: str
    concern: Concern
    yaml: YamlKind = "auto"
    parse: Callable[[str], Any] | None = None
    """The parser the text must pass, from a flag or a file alike."""
    choices: tuple[str, ...] = ()
    yaml_keys: tuple[str, ...] = ()
    """Keys in a suite file; empty means the option's name."""
    nccl_tests: str = ""
    """The nccl-tests flag (or variable) that means the same, for the docs."""
    to: str | None = ""
    """The config field this option's value becomes (empty: the option's own name; None:
    none by itself, the command combines it with others, as sweep's sizes)."""
    convert: Callable[[Any], Any] | None = None
    """Given value -> config value (a unit, a parsed list, a checked choice), called on
    every value, an unset None too; None keeps the value."""
    settled: bool = False
    """The default is already its config value (``convert(default) == default``, a test
    holds it): left unconverted, so a run that keeps it never calls into the converter's
    module (a gloo sweep need not read NCCL's knobs to keep --register none)."""


def option(default: Any, *flags: str, help: str, concern: Concern, **spec: Any) -> Any:
    """A field of an options dataclass carrying its :class:`Spec` (``spec``: the rest of
    its fields, by name; a name Spec lacks fails as the table is declared)."""
    return field(default=default, metadata={"spec": Spec(flags, help, concern, **spec)})


#: :func:`option` of one concern: a table's row names its concern by the call it makes.
measure = functools.partial(option, concern="measure")
launch = functools.partial(option, concern="launch")
output = functools.partial(option, concern="output")
judge = functools.partial(option, concern="judge")


@dataclass(frozen=True)
class Option:
    """One row of the table, resolved: name, type, default and spec."""

    name: str
    type: Any
    default: Any
    spec: Spec

    @property
    def flag(self) -> str:
        """The long flag that error messages name (``--progress`` for ``--progress/--no-...``)."""
        return self.spec.flags[0].split("/")[0]

    @property
    def yaml_keys(self) -> tuple[str, ...]:
        return self.spec.yaml_keys or (self.name,)


def rows_of(options_type: type) -> tuple[Option, ...]:
    """The rows of a dataclass of :func:`option` fields (SweepOptions, P2POptions), each
    with its default (:func:`option` takes one)."""
    hints = typing.get_type_hints(options_type)
    return tuple(
        Option(f.name, hints[f.name], f.default, f.metadata["spec"]) for f in fields(options_type)
    )


def config_values(rows: tuple[Option, ...], values: Mapping[str, Any]) -> dict[str, Any]:
    """The one step from options to config: each option's value, converted, under the
    config field it declares (``to``). Adding an option that feeds one config field is
    then one row of its table and the field itself."""
    out: dict[str, Any] = {}
    for opt in rows:
        if opt.spec.to is None:
            continue
        value = values[opt.name]
        if opt.spec.convert is not None and not (opt.spec.settled and value == opt.default):
            value = opt.spec.convert(value)
        out[opt.spec.to or opt.name] = value
    return out


def one_of(flag: str, allowed: tuple[str, ...]) -> Callable[[str], Any]:
    """A converter that refuses a value outside ``allowed``, naming ``flag``."""

    def checked(value: str) -> Any:
        if value not in allowed:
            raise UsageError(f"bad {flag} {value!r}: use {', '.join(allowed)}")
        return value

    return checked


def optional(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``convert``, passing an unset (None) value through."""
    return lambda value: None if value is None else convert(value)
