"""Every reader colbench has, fed random and truncated files: how many end in a traceback.

Run: python benchmarks/fuzz_inputs.py [--cases N] [--seed S]

Target (issue #22): 0 tracebacks in at least 1000 cases; every refusal one line
(`colbench: error: ...`, exit 2).

Each case takes a valid file of one kind, mutates it (cut at a random byte, random bytes,
flipped bytes, a line dropped or doubled, a cell made odd, a non-UTF-8 byte, CR line
ends, a byte-order mark, a very long line, nothing) or replaces it by something that is
no file to read (/dev/zero, a FIFO, a directory, a file past the size limit), and hands
it to the code that reads that kind, the way a user would:

- suite: ``colbench run FILE``; a suite the reader accepts is counted as accepted (the
  run itself is replaced by a stand-in that starts no rank: not what is tested here);
- results CSV: ``fit``, ``plot``, ``compare``, ``gate`` (as the current run, as the
  baseline, and accepted into a baseline with ``--update-baseline``) and ``predict`` on
  a run whose results.csv is mutated;
- meta.json: ``compare`` and ``gate`` of a run whose meta.json is mutated;
- nccl-tests log: ``colbench import nccl-tests FILE``;
- p2p.csv: the p2p report of a run (colbench.commands.p2p.report.report);
- rank error reports and the turn log: the parent's verdict on a failed run
  (protocol.read_reports, protocol.diagnose) and interleaving's turn log reader.

A case passes when its command exits 0, 1 or 2 and prints no traceback, and an exit 2
prints exactly one ``colbench: error:`` line; anything else raised is a traceback. The
script prints the cases and outcomes per reader, every failure, and PASS or FAIL.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from colbench import reading
from colbench.cli import main
from colbench.commands.p2p.config import P2PConfig
from colbench.commands.p2p.report import report as p2p_report
from colbench.commands.p2p.results import P2P, P2PRow
from colbench.errors import UsageError
from colbench.host import protocol, turns
from colbench.results.tables import TableWriter
from tests.unit.nccl_logs import new_all_reduce_log, old_all_gather_log
from tests.unit.predict_runs import model_run

TARGET_CASES = 1000
ODD_CELLS = (
    "", "nan", "inf", "-inf", "-1", "1e999", "9" * 40, "²", "NaN", "None", "[", "{", '"', "1.5",
    "0x10", " ",
)  # fmt: skip
SPECIAL = ("/dev/zero", "fifo", "directory", "past the limit")


# -- mutations of a valid file ---------------------------------------------------------


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True) or [b""]


def mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One random mutation of ``data``: (its name, the mutated bytes)."""
    kind = rng.choice(
        ["cut", "cut", "cut", "random", "text", "flip", "drop line", "double line", "odd cell",
         "non-utf8", "cr", "bom", "long line", "empty", "header only", "shuffle"]
    )  # fmt: skip
    lines = _lines(data)
    if kind == "cut":
        return kind, data[: rng.randrange(len(data) + 1)]
    if kind == "random":
        return kind, rng.randbytes(rng.randrange(1, 5000))
    if kind == "text":
        alphabet = "abc,:-=# 0123456789.\n\t[]{}'\"!&*|>"
        return kind, "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 3000))).encode()
    if kind == "flip":
        out = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            if out:
                out[rng.randrange(len(out))] = rng.randrange(256)
        return kind, bytes(out)
    if kind in ("drop line", "double line", "shuffle"):
        i = rng.randrange(len(lines))
        if kind == "drop line":
            del lines[i]
        elif kind == "double line":
            lines.insert(i, lines[i])
        else:
            rng.shuffle(lines)
        return kind, b"".join(lines)
    if kind == "odd cell":
        i = rng.randrange(len(lines))
        parts = lines[i].split(b",") if b"," in lines[i] else lines[i].split(b":")
        parts[rng.randrange(len(parts))] = rng.choice(ODD_CELLS).encode()
        sep = b"," if b"," in lines[i] else b":"
        lines[i] = sep.join(parts)
        return kind, b"".join(lines)
    if kind == "non-utf8":
        at = rng.randrange(len(data) + 1)
        return kind, data[:at] + bytes([rng.choice((0x80, 0xC3, 0xFF, 0xFE))]) + data[at:]
    if kind == "cr":
        return kind, data.replace(b"\r\n", b"\n").replace(b"\n", b"\r")
    if kind == "bom":
        return kind, b"\xef\xbb\xbf" + data
    if kind == "long line":
        return kind, data + b"x" * rng.randrange(100_000, 300_000) + b"\n"
    if kind == "header only":
        return kind, lines[0]
    return kind, b""


def place(path: Path, data: bytes, special: str | None) -> None:
    """Put the case at ``path``: the mutated bytes, or something that is no file to read."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    if special is None:
        path.write_bytes(data)
    elif special == "/dev/zero":
        path.symlink_to("/dev/zero")
    elif special == "fifo":
        os.mkfifo(path)
    elif special == "directory":
        path.mkdir()
    else:  # sparse: no disk used, its size past every kind's limit
        with open(path, "wb") as f:
            f.truncate(reading.LOG.limit_bytes + 1)


# -- the readers, driven as a user drives them -----------------------------------------


class Outcome:
    def __init__(self, code: int | None, err: str, raised: str | None) -> None:
        self.code, self.err, self.raised = code, err, raised

    def failure(self) -> str | None:
        """What is wrong with this outcome (None: a pass)."""
        if self.raised is not None:
            return self.raised
        if "Traceback" in self.err:
            return "a traceback on stderr"
        if self.code not in (0, 1, 2):
            return f"exit {self.code}"
        errors = [line for line in self.err.splitlines() if line.startswith("colbench: error:")]
        if self.code == 2 and len(errors) != 1:
            return f"exit 2 with {len(errors)} error lines: {self.err[-300:]!r}"
        return None


def cli(*argv: str) -> Outcome:
    """``colbench ARGV`` in this process, its output captured."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return Outcome(code, err.getvalue(), None)
    except BaseException as exc:  # what the user would see as a traceback
        return Outcome(None, err.getvalue(), _raised(exc))
    return Outcome(0, err.getvalue(), None)


def call(func: Callable[[], object]) -> Outcome:
    """A reader called directly: a refusal (UsageError) is its one line."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            func()
    except UsageError as exc:
        return Outcome(2, f"colbench: error: {exc}\n", None)
    except BaseException as exc:
        return Outcome(None, err.getvalue(), _raised(exc))
    return Outcome(0, err.getvalue(), None)


def _raised(exc: BaseException) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}: {str(exc)[:160]} (at {Path(where.filename).name}:{where.lineno})"


class Seeds:
    """Valid files of every kind, written once; each case copies what it mutates."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.run2 = model_run(root / "seed2", 2)
        self.run3 = model_run(root / "seed3", 3)
        (self.run2 / "meta.json").write_text(json.dumps(_meta("seed2", 24), indent=2))
        self.results = (self.run2 / "results.csv").read_bytes()
        self.meta = (self.run2 / "meta.json").read_bytes()
        self.suite = (Path(__file__).resolve().parents[1] / "configs/smoke-cpu.yaml").read_bytes()
        self.logs = [new_all_reduce_log().encode(), old_all_gather_log().encode()]
        self.p2p = _p2p_csv(root / "p2pseed")
        report = protocol.make_report(
            1, "timed batch of all_reduce", "error", "RuntimeError: x", 1.0
        )
        self.report = json.dumps(report).encode()
        line = {"world": 0, "variant": "A", "turn": 1, "start_unix": 1.0, "end_unix": 2.0}
        self.turns = (json.dumps(line) + "\n").encode() * 4


def _meta(run_id: str, rows: int) -> dict[str, object]:
    return {
        "schema_version": 4, "run_id": run_id, "status": "complete", "rows": rows,
        "rows_planned": rows, "versions": {"torch": "2.13.0+cpu"}, "backend": "gloo",
        "world_size": 2, "machine": {"cpu_model": "x", "cpu_cores": 2},
    }  # fmt: skip


def _p2p_csv(directory: Path) -> bytes:
    directory.mkdir()
    with TableWriter(directory / P2P.file_name, P2P) as writer:
        for src in range(4):
            for dst in range(4):
                if src != dst:
                    writer.write(_p2p_row(src, dst))
    return (directory / P2P.file_name).read_bytes()


def _p2p_row(src: int, dst: int) -> P2PRow:
    return P2PRow(
        run_id="p2pseed", backend="gloo", device="cpu", world_size=4, nnodes=1, mode="uni",
        src_rank=src, dst_rank=dst, src_node="vm", dst_node="vm", size_bytes=1 << 20,
        warmup=5, iters=20, time_us=100.0, time_min_us=90.0, time_p50_us=100.0,
        time_p99_us=120.0, time_max_us=130.0, bw_gbps=10.0, latency_bytes=8, latency_us=5.0,
        latency_p50_us=5.0, latency_p99_us=6.0, repeat=0,
    )  # fmt: skip


#: A case: the file to put the mutation at, and the command that reads it.
Case = tuple[Path, Callable[[Path], Outcome]]


def _run_copy(seeds: Seeds, case: Path) -> Path:
    run = case / "run"
    shutil.copytree(seeds.run2, run)
    return run


def _results_case(seeds: Seeds, case: Path, rng: random.Random) -> Case:
    run = _run_copy(seeds, case)
    fig = str(case / "f.png")
    r, base = str(run), str(seeds.run2)
    commands: list[Callable[[Path], Outcome]] = [
        lambda _: cli("fit", r),
        lambda _: cli("fit", str(run / "results.csv")),
        lambda _: cli("gate", base, r),
        lambda _: cli("gate", r, base),
        lambda _: cli("predict", r, str(seeds.run3), "--ranks", "8"),
        lambda _: cli("plot", r, "--out", fig),
        lambda _: cli("compare", r, base, "--out", fig),
        # Accepting the run into a baseline reads its lines as they are.
        lambda _: cli("gate", _baseline_copy(seeds, case), r, "--update-baseline", "--keep", "3"),
    ]
    # The figures cost a second each: one case in five draws one.
    weights = [3, 1, 3, 3, 2, 1, 1, 2]
    return run / "results.csv", rng.choices(commands, weights)[0]


def _baseline_copy(seeds: Seeds, case: Path) -> str:
    base = case / "baseline"
    shutil.copytree(seeds.run3, base)
    return str(base)


def _meta_case(seeds: Seeds, case: Path, rng: random.Random) -> Case:
    run = _run_copy(seeds, case)
    r, base = str(run), str(seeds.run2)
    command = rng.choice(
        [lambda _: cli("gate", base, r), lambda _: cli("gate", r, base), lambda _: cli("fit", r),
         lambda _: cli("compare", r, base, "--out", str(case / "f.png"))]
    )  # fmt: skip
    return run / "meta.json", command


def _suite_case(seeds: Seeds, case: Path, rng: random.Random) -> Case:
    return case / "suite.yaml", lambda p: cli("run", str(p), "--out", str(case / "out"))


def _log_case(seeds: Seeds, case: Path, rng: random.Random) -> Case:
    return case / "nccl.log", lambda p: cli(
        "import", "nccl-tests", str(p), "--out", str(case / "imp")
    )


def _p2p_case(seeds: Seeds, case: Path, rng: random.Random) -> Case:
    run = case / "p2p"
    run.mkdir()
    return run / P2P.file_name, lambda p: call(lambda: p2p_report(run, P2PConfig(plot=False)))


def _report_case(seeds: Seeds, case: Path, rng: random.Random) -> Case:
    run = case / "failed"
    run.mkdir()

    def verdict(path: Path) -> Outcome:
        return call(
            lambda: protocol.diagnose({0: 3, 1: 3}, protocol.read_reports(run), {}, "vm", {}, 300.0)
        )

    return run / "rank1.error.json", verdict


def _turns_case(seeds: Seeds, case: Path, rng: random.Random) -> Case:
    run = case / "interleaved"
    run.mkdir()
    return run / turns.TURNS_FILE, lambda p: call(lambda: turns.read_log(run))


Maker = Callable[[Seeds, Path, random.Random], Case]
READERS: dict[str, tuple[Maker, Callable[[Seeds], bytes]]] = {
    "suite": (_suite_case, lambda s: s.suite),
    "results CSV": (_results_case, lambda s: s.results),
    "meta.json": (_meta_case, lambda s: s.meta),
    "nccl-tests log": (_log_case, lambda s: s.logs[0]),
    "p2p.csv": (_p2p_case, lambda s: s.p2p),
    "rank error report": (_report_case, lambda s: s.report),
    "turn log": (_turns_case, lambda s: s.turns),
}  # fmt: skip
#: Cases per reader in one round: the CLI readers, which users feed, get most.
SHARE = {"suite": 3, "results CSV": 6, "meta.json": 2, "nccl-tests log": 3, "p2p.csv": 1,
         "rank error report": 1, "turn log": 1}  # fmt: skip


def _stand_in_for_the_run() -> None:
    """A suite the reader accepts would start ranks: measuring is not what is fuzzed here."""
    import colbench.commands.sweep.command as command

    command.run_sweep = lambda cfg: 0  # type: ignore[assignment]


def main_fuzz(cases: int, seed: int) -> int:
    _stand_in_for_the_run()
    rng = random.Random(seed)
    outcomes: dict[str, Counter[str]] = {name: Counter() for name in READERS}
    failures: list[str] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="colbench-fuzz-") as tmp:
        root = Path(tmp)
        seeds = Seeds(root)
        order = [name for name, share in SHARE.items() for _ in range(share)]
        for index in range(cases):
            name = order[index % len(order)]
            make, seed_of = READERS[name]
            case = root / f"case{index}"
            case.mkdir()
            path, command = make(seeds, case, rng)
            data = seed_of(seeds) if name != "nccl-tests log" else rng.choice(seeds.logs)
            special = rng.choice(SPECIAL) if rng.random() < 0.06 else None
            kind, mutated = ("special", b"") if special else mutate(data, rng)
            place(path, mutated, special)
            outcome = command(path)
            wrong = outcome.failure()
            outcomes[name]["traceback" if wrong else f"exit {outcome.code}"] += 1
            if wrong:
                failures.append(f"case {index} ({name}, {special or kind}): {wrong}")
            shutil.rmtree(case, ignore_errors=True)
    took = time.monotonic() - started
    print(
        f"{'reader':<18} {'cases':>6} {'exit 0':>7} {'exit 1':>7} {'exit 2':>7} {'traceback':>10}"
    )
    for name, counts in outcomes.items():
        print(
            f"{name:<18} {sum(counts.values()):6d} {counts['exit 0']:7d} {counts['exit 1']:7d} "
            f"{counts['exit 2']:7d} {counts['traceback']:10d}"
        )
    for line in failures[:40]:
        print(f"  {line}")
    ok = not failures and cases >= TARGET_CASES
    print(
        f"tracebacks: {len(failures)} in {cases} cases, {took:.0f} s (target: 0 in >= "
        f"{TARGET_CASES}): {'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1200)
    parser.add_argument("--seed", type=int, default=22)
    args = parser.parse_args()
    raise SystemExit(main_fuzz(args.cases, args.seed))
