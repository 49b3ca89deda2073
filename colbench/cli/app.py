"""The Typer app, the helpers that generate commands' parameters from the options table, and
the entry point that turns every failure into one line and a documented exit code."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from colbench import output
from colbench.config import option_table, options
from colbench.errors import ExitCode, RankFailure, UsageError, WriteFailed

# Imported now: the handler of torch failing to load under ``ulimit -v`` has no address
# space left to import it then.
from colbench.launch.limits import guard_torch_import, torch_load_failure

app = typer.Typer(
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


F = TypeVar("F", bound=Callable[..., Any])


def _with_options(
    *leading: inspect.Parameter,
    rows: tuple[option_table.Option, ...] | None = None,
    hidden: frozenset[str] = frozenset(),
) -> Callable[[F], F]:
    """Give a command ``leading`` and then every option of the table (colbench.config.options),
    or the rows of another command's table. With sweep's table come nccl-tests' flags that
    sweep refuses (parsed, hidden, answered by :func:`_refuse_nccl_tests_flags`); options
    named in ``hidden`` are parsed but left out of ``--help`` (the command refuses them)."""

    def wrap(func: F) -> F:
        ctx = inspect.Parameter(
            "ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context
        )
        refused = options.refused_parameters() if rows is None else []
        parameters = [ctx, *leading, *options.typer_parameters(rows, hidden), *refused]
        setattr(func, "__signature__", inspect.Signature(parameters))  # noqa: B010
        return func

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


def _refuse_nccl_tests_flags(values: dict[str, Any]) -> None:
    """Take nccl-tests' refused flags out of ``values``; raise with the reason if one asks for
    what colbench does not do (``-g 1``, what colbench does anyway, passes)."""
    given = {r.name: values.pop(r.name, None) for r in options.REFUSED}
    said = options.refusal_message(given)
    if said:
        raise UsageError(said)


def _error(message: str) -> None:
    print(f"colbench: error: {message}", file=sys.stderr)


def _exit(code: int) -> NoReturn:
    """Exit with ``code``; once this process is a rank of a process group, without the
    interpreter's teardown: torch's C++ teardown at exit can abort a rank whose peers are
    gone ("terminate called without an active exception", SIGABRT), turning a one-line
    error into a crash (a launched rank refused for a different plan, say)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _output_lost(exc: output.OutputLost) -> NoReturn:
    """A reader that stopped reading (``| head``) asked for no more: 141, as a shell
    reports SIGPIPE, without a word; stdout that cannot be written otherwise: one line."""
    output.silence()
    if exc.broken_pipe:
        _exit(int(ExitCode.BROKEN_PIPE))
    _error(f"cannot write to standard output: {exc}")
    _exit(int(ExitCode.USAGE))


def contradictions(argv: list[str]) -> str | None:
    """The first on/off flag given both ways (``--table --no-table``), or None.

    Click lets the last one win without a word; a command line that says both was
    written by mistake (a script's default and an override), so it is refused.
    """
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
        _error(f"{both} and --no-{both[2:]} contradict each other: give one of them")
        sys.exit(int(ExitCode.USAGE))
    try:
        code = app(args=argv, prog_name="colbench", standalone_mode=False)
        output.flush()
    except output.OutputLost as exc:
        _output_lost(exc)
    except UsageError as exc:
        _error(str(exc))
        _exit(int(ExitCode.USAGE))
    except (RankFailure, WriteFailed) as exc:
        _error(str(exc))
        _exit(int(exc.exit_code))
    except KeyboardInterrupt:
        _error("interrupted")
        _exit(int(ExitCode.INTERRUPTED))
    except (ImportError, SystemError, MemoryError) as exc:
        said = torch_load_failure(exc)
        if said is None:
            raise
        _error(said)
        sys.exit(int(ExitCode.USAGE))
    except Exception as exc:
        # Typer's parser errors (click's UsageError, vendored in newer typer) carry
        # their own exit code and message: keep the code, print the message on one line.
        exit_code = getattr(exc, "exit_code", None)
        format_message = getattr(exc, "format_message", None)
        if type(exc).__name__ == "Abort":
            _error("interrupted")
            sys.exit(int(ExitCode.INTERRUPTED))
        if not isinstance(exit_code, int) or not callable(format_message):
            raise
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help(), file=sys.stderr)
        else:
            _error(" ".join(str(format_message()).split()))
        sys.exit(exit_code)
    sys.exit(int(code or 0))
