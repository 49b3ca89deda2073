"""Help, explain, version and usage errors never import torch (1 s on CPU, 5 s with CUDA);
no command's help imports numpy, pandas or matplotlib either.

Each command runs in a process forked from one that has imported colbench's CLI (and
run `version`) without torch; it reports its exit code and whether torch got loaded.
Forking per command keeps the whole table to about one interpreter start.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import typer.main

from colbench.cli import app
from tests.conftest import REPO
from tests.unit.test_cli_errors import BAD

# These need the world size, which a launcher's environment (torchrun, SLURM) can set:
# they are not decidable from the arguments alone, and the runner checks them.
NEEDS_THE_WORLD = {
    "root outside the world",
    "sendrecv alone in a world of one",
    "mod split beside the world",
    "experts that do not split over the ranks",
    "contend chunk below 16 bytes",
}

COMMANDS = sorted(getattr(typer.main.get_command(app), "commands", {}))

CASES: list[tuple[list[str], int]] = [
    (["--help"], 0),
    *[([name, "--help"], 0) for name in COMMANDS],
    (["explain", "all_reduce"], 0),
    (["explain", "barrier"], 0),
    (["version"], 0),
    (["sweep", "--cuda-graph", "5", "--backend", "gloo"], 2),
    (["run", "configs/smoke-cpu.yaml", "--op", "all_scream"], 2),
    (["sweep", "--config", "configs/smoke-cpu.yaml", "--dtype", "float128"], 2),
    (["gate", "a", "b", "--check", "busbw_gbps"], 2),
    *[(argv, 2) for name, argv, _ in BAD if name not in NEEDS_THE_WORLD],
]

#: What the CLI must not import to list or parse its commands (numpy alone is 0.05 s).
HEAVY = ("numpy", "pandas", "matplotlib", "torch")


# Forks per command from a process that holds colbench.cli but not torch; the child
# runs the command as `python -m colbench` would and reports back on a pipe.
_HARNESS = textwrap.dedent(
    """
    import json, os, sys
    from colbench.cli import main

    HEAVY = json.loads(sys.argv[2])

    def quietly(argv):
        \"\"\"Exit code of `colbench ARGV`, its output discarded.\"\"\"
        saved = os.dup(1), os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
        return code

    # One command in the parent first loads what every command loads (typer's
    # converters), so each fork below costs milliseconds, not an import of pydantic.
    quietly(["version"])
    print(json.dumps({"argv": None, "torch": "torch" in sys.modules}), flush=True)
    for argv in json.loads(sys.argv[1]):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            code = quietly(argv)
            heavy = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
            report = {"argv": argv, "code": code, "torch": "torch" in sys.modules, "heavy": heavy}
            os.write(write_end, json.dumps(report).encode())
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            line = pipe.read()
        os.waitpid(pid, 0)
        print(line, flush=True)
    """
)


def run_harness(argvs: list[list[str]]) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", _HARNESS, json.dumps(argvs), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_help_explain_version_and_usage_errors_leave_torch_unloaded() -> None:
    reports = run_harness([argv for argv, _ in CASES])
    assert reports[0] == {"argv": None, "torch": False}, "colbench version loads torch"
    assert len(reports) == len(CASES) + 1
    for (argv, expected_code), report in zip(CASES, reports[1:], strict=True):
        assert report["argv"] == argv
        assert report["code"] == expected_code, report
        assert report["torch"] is False, f"colbench {' '.join(argv)} imported torch"
        if argv[-1] == "--help":
            assert report["heavy"] == [], f"colbench {' '.join(argv)} imported {report['heavy']}"


def test_the_harness_sees_torch_when_a_command_needs_it() -> None:
    """`colbench env` reports torch's build, so it must load torch: the check can fail."""
    (first, env) = run_harness([["env"]])
    assert first["torch"] is False
    assert env["code"] == 0 and env["torch"] is True


def test_help_as_the_user_runs_it_imports_nothing_heavy() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "colbench", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=True,
    )
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()]
    assert "colbench.cli" in imported
    heavy = [name for name in imported if name.split(".")[0] in HEAVY]
    assert heavy == [], f"colbench --help imported {heavy[:5]}"
    assert "Usage: colbench" in done.stdout
