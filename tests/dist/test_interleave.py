"""Interleaved variants: two real gloo worlds alive at once, taking turns through the
parent's turn store; what the turn log and results.csv prove, and how failures end."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from colbench.host import turns
from colbench.results.rows import load
from tests.conftest import call_colbench

PROBE = ["COLBENCH_PROBE=a", "COLBENCH_PROBE=b"]


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("interleave") / "run"
    proc = call_colbench(
        "sweep", "--op", "all_reduce", "--sizes", "64K,1M", "--repeat", "3", "--iters", "20",
        "--warmup", "2", "--backend", "gloo", "--env", "COLBENCH_PROBE=a,b", "--no-table",
        "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "interleaved" in proc.stderr
    return out


def test_rows_and_turns_alternate_between_the_variants(interleaved: Path) -> None:
    frame = load(interleaved)
    # Turn by turn: a's size, then b's same size and repeat, then a's next size...; each
    # repeat the other variant goes first.
    flipped = PROBE[::-1]
    assert list(frame["variant"]) == PROBE * 2 + flipped * 2 + PROBE * 2
    assert list(frame["size_bytes"]) == [65536, 65536, 1048576, 1048576] * 3
    assert list(frame["repeat"]) == [0] * 4 + [1] * 4 + [2] * 4
    log = turns.read_log(interleaved)
    assert [t["turn"] for t in log] == list(range(12))
    assert [t["variant"] for t in log] == PROBE * 2 + flipped * 2 + PROBE * 2
    # Never two worlds measuring at once: each turn starts after the previous one ended.
    for before, after in itertools.pairwise(log):
        assert after["start_unix"] >= before["end_unix"]
    meta = json.loads((interleaved / "meta.json").read_text())
    assert meta["interleaved"] is True and meta["turns"] == 12 and meta["rows"] == 12
    assert [v["env_seen_by_rank"] for v in meta["variants"]] == [
        [{"COLBENCH_PROBE": "a"}] * 2,
        [{"COLBENCH_PROBE": "b"}] * 2,
    ]
    # Two worlds: four distinct rank processes.
    pids = [json.loads((interleaved / "variants" / i / "meta.json").read_text())["rank_pids"]
            for i in ("0", "1")]  # fmt: skip
    assert len(set(pids[0]) | set(pids[1])) == 4


def test_the_waiting_world_blocks_instead_of_spinning(interleaved: Path) -> None:
    log = turns.read_log(interleaved)
    waited = [t for t in log if t["turn"] > 0]
    wall_s = sum(t["wait_s"] for t in waited)
    cpu_s = sum(t["wait_cpu_s"] for t in waited)
    # The other world's 1 MiB batches take tens of ms each; a spinning waiter would burn
    # about as much CPU as it waited. Blocked in a socket read, it burns next to none.
    assert wall_s > 0.05
    assert cpu_s < 0.1 * wall_s, (cpu_s, wall_s)


def test_a_failing_world_keeps_what_was_measured_and_stops_the_other(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # Variant 1's rank 1 fails at its 4th timed batch (repeat 1, first size); variant
    # 2's value names a rank that does not exist, so it never fails.
    proc = call_colbench(
        "sweep", "--op", "all_reduce", "--sizes", "1K,64K,1M", "--repeat", "3", "--iters", "3",
        "--warmup", "1", "--backend", "gloo", "--env", "COLBENCH_FAULT=1:4,9:9", "--no-table",
        "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "rank 1" in proc.stderr and "fault injected by COLBENCH_FAULT" in proc.stderr
    # Repeat 0 of both, then repeat 1's first size of variant 2, which goes first there.
    assert "7 rows measured before the failure" in proc.stderr
    frame = load(out)
    failing, healthy = "COLBENCH_FAULT=1:4", "COLBENCH_FAULT=9:9"
    assert list(frame["variant"]) == [failing, healthy] * 3 + [healthy]
    assert list(frame["repeat"]) == [0] * 6 + [1]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "failed"
    # The healthy world ended on its own, cleanly (exit 0), at its next turn.
    assert [v["status"] for v in meta["variants"]] == ["failed", "stopped"]
    assert [v["rows"] for v in meta["variants"]] == [3, 4]
    assert json.loads((out / "variants" / "1" / "meta.json").read_text())["status"] == "complete"


def _second_venv(where: Path) -> Path:
    """A real second virtual environment (own prefix and interpreter) that sees this
    one's packages through a .pth file, the way two CI venvs would each hold a stack."""
    import venv

    venv.EnvBuilder(with_pip=False, symlinks=True).create(where)
    python = where / "bin" / "python"
    purelib = Path(sysconfig.get_paths()["purelib"])
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = where / "lib" / version / "site-packages"
    (site / "parent-venv.pth").write_text(f"{purelib}\n{Path(__file__).parents[2]}\n")
    return python


@pytest.fixture(scope="module")
def python_variants(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """One run of two --python variants (each rank an interpreter start and a torch
    import), started from a checkout whose colbench cannot be imported: (the run, its
    directory, the second venv's interpreter)."""
    where = tmp_path_factory.mktemp("python-variants")
    other = _second_venv(where / "venv-b")
    # CI runs in the pull request's checkout while the base's ranks must load the base's
    # installed colbench: `-m` would put the working directory first on sys.path. The
    # ranks are interpreters of their own whether the parent is a process or this one.
    checkout = where / "checkout"
    (checkout / "colbench").mkdir(parents=True)
    (checkout / "colbench" / "__init__.py").write_text(
        "raise ImportError('the colbench of the working directory')\n"
    )
    out = where / "run"
    proc = call_colbench(
        "sweep", "--op", "all_reduce", "--sizes", "64K", "--repeat", "2", "--iters", "3",
        "--warmup", "1", "--backend", "gloo", "--out", str(out),
        "--python", f"main={sys.executable},pr={other}", cwd=checkout,
    )  # fmt: skip
    return proc, out, other


def test_python_variants_run_in_their_own_interpreters(
    python_variants: tuple[subprocess.CompletedProcess[str], Path, Path],
) -> None:
    proc, out, other = python_variants
    assert proc.returncode == 0, proc.stderr
    # Into a pipe each line comes as it is measured, tagged with its world's variant:
    # each variant's lines are its whole table.
    for name in ("python=main", "python=pr"):
        tag = f"[{name}] "
        table = [line[len(tag) :] for line in proc.stdout.splitlines() if line.startswith(tag)]
        assert table[0] == f"# variant {name}"
        assert sum(line.startswith("# Wrong elements") for line in table) == 1
    frame = load(out)
    assert list(frame["variant"]) == ["python=main", "python=pr", "python=pr", "python=main"]
    meta = json.loads((out / "meta.json").read_text())
    seen = [v["python_executable"] for v in meta["variants"]]
    assert seen == [sys.executable, str(other)]
    assert not list(out.rglob(".rank-job.pickle"))  # the ranks' job file is tidied away


def test_python_variant_ranks_never_import_the_working_directorys_colbench(
    python_variants: tuple[subprocess.CompletedProcess[str], Path, Path],
) -> None:
    proc, out, _ = python_variants
    assert proc.returncode == 0, proc.stderr
    assert "working directory" not in proc.stderr
    assert sorted(set(load(out)["variant"])) == ["python=main", "python=pr"]


def test_an_interpreter_without_python_ranks_is_one_clear_error(tmp_path: Path) -> None:
    # Variant pr's interpreter finds a colbench that predates --python ranks (no
    # colbench.host.interpreter), as an older checkout's environment would.
    old = tmp_path / "old"
    (old / "colbench" / "host").mkdir(parents=True)
    (old / "colbench" / "__init__.py").write_text("")
    (old / "colbench" / "host" / "__init__.py").write_text("")
    wrapper = tmp_path / "python-old"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={old} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    # One rank a variant: each is an interpreter start (and torch's import); the error is
    # the same from one rank as from two.
    proc = call_colbench(
        "sweep", "--op", "all_reduce", "--sizes", "1K", "--iters", "2", "--backend", "gloo",
        "--nprocs", "1",
        "--no-table", "--out", str(tmp_path / "run"),
        "--python", f"main={sys.executable},pr={wrapper}",
    )  # fmt: skip
    # Refused as the options are read, before variant main's ranks ran.
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert f"{wrapper} has no colbench that runs ranks: install the same colbench" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_turn_protocol_mismatch_is_one_clear_error(tmp_path: Path) -> None:
    # Variant pr's interpreter loads a colbench that speaks another turn protocol, as a
    # venv with another colbench version would.
    patch = tmp_path / "patch"
    patch.mkdir()
    (patch / "sitecustomize.py").write_text(
        "import colbench.host.turns as t\nt.PROTOCOL_VERSION = 99\n"
    )
    wrapper = tmp_path / "python-other"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={patch} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    out = tmp_path / "run"
    # One rank a variant, as above.
    proc = call_colbench(
        "sweep", "--op", "all_reduce", "--sizes", "1K", "--iters", "2", "--backend", "gloo",
        "--nprocs", "1",
        "--no-table", "--out", str(out), "--python", f"main={sys.executable},pr={wrapper}",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("colbench: error")]
    assert len(errors) == 1
    assert "turn protocol v99" in errors[0] and "parent's v1" in errors[0]
    assert "Traceback" not in proc.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert [v["status"] for v in meta["variants"]] == ["stopped", "failed"]


def test_a_log_file_gets_each_row_as_it_is_measured(tmp_path: Path) -> None:
    # `colbench sweep --env ... > log` once printed nothing until the last turn: the
    # worlds' tables waited to be printed whole. Into a file each line now arrives as it
    # is measured, tagged with its variant; the run is still going when both variants'
    # first rows are there (hundreds of turns remain). stdout stays block-buffered, as
    # a user's redirect leaves it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    log = tmp_path / "log.txt"
    row = re.compile(r"\[COLBENCH_PROBE=([ab])\] +\d+ +\d+ ")
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "colbench", "sweep", "--op", "all_reduce", "--sizes", "1K-1M",
             "--repeat", "20", "-n", "5", "-w", "1", "--backend", "gloo",
             "--env", "COLBENCH_PROBE=a,b", "--out", str(tmp_path / "run")],
            stdout=out, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        seen: set[str] = set()
        while time.monotonic() < deadline and proc.poll() is None and len(seen) < 2:
            seen = {m[1] for line in log.read_text().splitlines() if (m := row.match(line))}
            time.sleep(0.1)
        still_running = proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert seen == {"a", "b"}, log.read_text()[-2000:]
    assert still_running, "the rows reached the log only when the run had ended"


def test_on_a_terminal_each_table_is_printed_whole(tmp_path: Path) -> None:
    # A terminal has world 0's bar meanwhile; the tables come at the end, one after the
    # other and untagged, rather than two tables interleaved line by line.
    from tests.dist.test_progress_terminal import _ANSI, _run_in_terminal

    raw = _run_in_terminal(
        ["sweep", "--op", "all_reduce", "--sizes", "64K", "--repeat", "2", "-n", "3", "-w", "1",
         "--backend", "gloo", "--env", "COLBENCH_PROBE=a,b", "--out", str(tmp_path / "run")],
        columns=200,
    )  # fmt: skip
    text = _ANSI.sub("", raw)
    assert "[COLBENCH_PROBE=" not in text
    first, second = (
        text.index("# variant COLBENCH_PROBE=a"),
        text.index("# variant COLBENCH_PROBE=b"),
    )
    assert first < text.index("# Wrong elements", first) < second
