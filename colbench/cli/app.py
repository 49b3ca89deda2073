"""The Typer app, the helpers that generate commands' parameters from the options tables, and
the entry point that turns every failure into one line and a documented exit code.

A command's parameters are built when it runs, not when the CLI is: ``colbench --help``
lists the commands from their names and help texts alone, and ``colbench sweep`` builds
sweep's parameters only. Building one means importing its options table (p2p's reads
its defaults from its judging code, numpy and all) and calling into it.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
import os
import sys
from collections.abc import Callable, Iterator, MutableMapping
from typing import Annotated, Any, NoReturn, TypeVar, cast

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo

from colbench import output
from colbench.errors import ExitCode, RankFailure, UsageError, WriteFailed

# Imported now: the handler of torch failing to load under ``ulimit -v`` has no address
# space left to import it then.
from colbench.host.launchers.env import guard_torch_import, torch_load_failure

#: ``colbench --help`` lists the commands under these headings, by what a user wants to do
#: (each command's ``rich_help_panel``), in this order.
MEASURE = "Measure"
JUDGE = "Compare and judge"
EXPLAIN = "Explain"
IMPORT = "Import"
PANELS = (MEASURE, JUDGE, EXPLAIN, IMPORT)


class CommandGroup(TyperGroup):
    """colbench's commands: listed under their panels (plain text, as the app sets no rich
    markup), each built from its function on first use when ``commands`` is lazy."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        listed: dict[str, list[tuple[str, str]]] = {panel: [] for panel in PANELS}
        # Built in full (typer.main.get_command), the commands are a plain dict.
        summary = getattr(self.commands, "summary", self.commands.get)
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)
        for name in names:
            cmd = summary(name)
            if cmd is None or cmd.hidden:
                continue
            panel = getattr(cmd, "rich_help_panel", None) or "Commands"
            listed.setdefault(panel, []).append((name, cmd.get_short_help_str(limit)))
        for panel, rows in listed.items():
            if rows:
                with formatter.section(panel):
                    formatter.write_dl(rows)

    def list_commands(self, ctx: Any) -> list[str]:
        # Typer's lists ``commands.items()``, which would build every command.
        return list(self.commands)


class LazyCommands(MutableMapping[str, Any]):
    """The app's commands by name, each made into a click command when first looked up."""

    def __init__(self, app: typer.Typer) -> None:
        self._app = app
        #: A command's CommandInfo until it is built, then the click command.
        self._commands: dict[str, Any] = {}
        for info in app.registered_commands:
            assert info.callback is not None
            self._commands[info.name or typer.main.get_command_name(info.callback.__name__)] = info

    def __getitem__(self, name: str) -> Any:
        command = self._commands[name]
        if isinstance(command, CommandInfo):
            command = self._commands[name] = typer.main.get_command_from_info(
                command,
                pretty_exceptions_short=self._app.pretty_exceptions_short,
                rich_markup_mode=self._app.rich_markup_mode,
            )
        return command

    def __setitem__(self, name: str, command: Any) -> None:
        self._commands[name] = command

    def __delitem__(self, name: str) -> None:
        del self._commands[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._commands)

    def __len__(self) -> int:
        return len(self._commands)

    def summary(self, name: str) -> TyperCommand | None:
        """A stand-in that knows the command's help and panel, and none of its parameters."""
        info = self._commands.get(name)
        if not isinstance(info, CommandInfo):
            return info
        # As Typer reads a command's help: given, else the function's docstring.
        text = info.help if info.help is not None else inspect.getdoc(info.callback)
        return TyperCommand(
            name=name,
            help=inspect.cleandoc(text or ""),
            hidden=info.hidden,
            rich_help_panel=info.rich_help_panel,
        )


app = typer.Typer(
    cls=CommandGroup,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Collective-communication benchmarks on torch.distributed with nccl-tests semantics.\n\n"
    "Sizes use binary units (1K = 1024 bytes); bandwidth is GB/s (1 GB/s = 1e9 bytes/s).\n\n"
    "Exit codes: 0 ok, 1 wrong results (or rows without memory, or an average busbw "
    "below 0.9x NCCL_TESTS_MIN_BW), a failed gate or "
    "predict --max-error, 2 usage error, 3 rank failure, 4 timeout, 5 a gate that passed "
    "on correctness only (--fail-inconclusive), 6 a file of the run could not be written "
    "(disk full, directory gone), 129/130/131/143 interrupted (SIGHUP/SIGINT/SIGQUIT/"
    "SIGTERM), 141 the reader of its output closed it (| head).",
)


def command_group() -> CommandGroup:
    """The app as click runs it, its commands built lazily (``typer.main.get_command(app)``
    builds every one: tests and the docs generator may afford that)."""
    shell = copy.copy(app)
    shell.registered_commands = []
    group = typer.main.get_group(shell)
    group.commands = LazyCommands(app)
    return cast(CommandGroup, group)


F = TypeVar("F", bound=Callable[..., Any])


class _Deferred:
    """A command function whose signature (its options) is made when Typer first reads it,
    building the command: :class:`LazyCommands` builds only the command that runs."""

    def __init__(self, func: Callable[..., Any], make: Callable[[], inspect.Signature]) -> None:
        functools.update_wrapper(self, func)
        self._make = make

    @functools.cached_property
    def __signature__(self) -> inspect.Signature:
        return self._make()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)  # type: ignore[attr-defined]


def _with_options(
    *leading: inspect.Parameter,
    rows: str | None = None,
    hidden: Callable[[], frozenset[str]] | None = None,
) -> Callable[[F], F]:
    """Give a command, once it is built, ``leading`` and then the options of sweep's table,
    or of the module named ``rows`` (``colbench.commands.p2p.options``). Sweep's come with
    the nccl-tests flags it refuses (hidden; :func:`_refuse_nccl_tests_flags`); those named in
    ``hidden()`` are parsed but left out of ``--help`` (the command refuses them)."""

    def wrap(func: F) -> F:
        def signature() -> inspect.Signature:
            ctx = inspect.Parameter(
                "ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context
            )
            table = importlib.import_module(rows or "colbench.config.options").table()
            unlisted = hidden() if hidden is not None else frozenset()
            options = [
                _param(
                    o.name,
                    o.type,
                    o.default,
                    typer.Option(*o.spec.flags, help=o.spec.help, hidden=o.name in unlisted),
                )
                for o in table
            ]
            refused = refused_parameters() if rows is None else []
            return inspect.Signature([ctx, *leading, *options, *refused])

        return cast(F, _Deferred(func, signature))

    return wrap


def _param(name: str, kind: Any, default: Any, info: Any) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, info]
    )


def _option(name: str, kind: Any, default: Any, flag: str, help: str) -> inspect.Parameter:
    return _param(name, kind, default, typer.Option(flag, help=help))


def _given(ctx: typer.Context, values: dict[str, Any]) -> dict[str, Any]:
    """The options given on the command line (not left at their defaults)."""
    source = ctx.get_parameter_source
    return {k: v for k, v in values.items() if getattr(source(k), "name", "") == "COMMANDLINE"}


def refused_parameters() -> list[inspect.Parameter]:
    """nccl-tests' flags that sweep does not take (colbench.config.nccl_flags.REFUSED), as
    hidden parameters: parsed like nccl-tests' (each takes a value), so the command can
    answer with the reason instead of click's "no such option"."""
    from colbench.config.nccl_flags import REFUSED

    return [
        _param(r.name, str | None, None, typer.Option(r.short, r.flag.long, hidden=True))
        for r in REFUSED
    ]


def _refuse_nccl_tests_flags(values: dict[str, Any]) -> None:
    """Take nccl-tests' refused flags (parsed into :attr:`Refusal.name`) out of ``values``;
    raise with the reason if one asks for what colbench does not do (``-g 1``, what
    colbench does anyway, passes)."""
    from colbench.config.nccl_flags import REFUSED

    for refusal in REFUSED:
        value = values.pop(refusal.name, None)
        if value is not None and (said := refusal.message(str(value))):
            raise UsageError(said)


def _exit(code: int) -> NoReturn:
    """Exit with ``code``; from a rank of a process group without the interpreter's teardown:
    torch's C++ teardown can abort a rank whose peers are gone ("terminate called without an
    active exception", SIGABRT), turning a one-line error into a crash."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _fail(message: str, code: int) -> NoReturn:
    """``message`` on one line of stderr, then :func:`_exit` with ``code``."""
    print(f"colbench: error: {message}", file=sys.stderr)
    _exit(int(code))


def _output_lost(exc: output.OutputLost) -> NoReturn:
    """A reader that stopped reading (``| head``) asked for no more: 141, as a shell
    reports SIGPIPE, without a word; stdout that cannot be written otherwise: one line."""
    output.silence()
    if exc.broken_pipe:
        _exit(int(ExitCode.BROKEN_PIPE))
    _fail(f"cannot write to standard output: {exc}", ExitCode.USAGE)


def contradictions(argv: list[str]) -> str | None:
    """The first on/off flag given both ways (``--table --no-table``), or None. Click lets
    the last one win without a word; a command line that says both was written by mistake
    (a script's default and an override), so it is refused."""
    flags = argv[: argv.index("--")] if "--" in argv else argv
    for token in flags:
        if token.startswith("--no-") and f"--{token[5:]}" in flags:
            return f"--{token[5:]}"
    return None


def main(argv: list[str] | None = None) -> None:
    """Entry point: every failure becomes one line on stderr and a documented exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    guard_torch_import()
    both = contradictions(argv)
    if both is not None:
        _fail(f"{both} and --no-{both[2:]} contradict each other: give one of them", ExitCode.USAGE)
    try:
        code = command_group()(args=argv, prog_name="colbench", standalone_mode=False)
        output.flush()
    except output.OutputLost as exc:
        _output_lost(exc)
    except (UsageError, RankFailure, WriteFailed) as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted", ExitCode.INTERRUPTED)
    except (ImportError, SystemError, MemoryError) as exc:
        said = torch_load_failure(exc)
        if said is None:
            raise
        _fail(said, ExitCode.USAGE)
    except Exception as exc:
        # Typer's parser errors (click's UsageError, vendored in newer typer) carry
        # their own exit code and message: keep the code, print the message on one line.
        exit_code = getattr(exc, "exit_code", None)
        format_message = getattr(exc, "format_message", None)
        if type(exc).__name__ == "Abort":
            _fail("interrupted", ExitCode.INTERRUPTED)
        if not isinstance(exit_code, int) or not callable(format_message):
            raise
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help(), file=sys.stderr)
            sys.exit(exit_code)
        _fail(" ".join(str(format_message()).split()), exit_code)
    sys.exit(int(code or 0))
