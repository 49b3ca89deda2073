"""nccl-tests' JSON report (``-J FILE``), written as nccl-tests 2.19.6 writes it.

nccl-tests' ``src/util.cu`` writes the report by hand, with quirks that fleet tools and
nccl-tests' own ``tools/analyze_perf_json.py`` read: booleans are the strings "true" and
"false" (and ``average_bus_bandwidth.okay`` may be "unchecked"); ``root`` is the table's
6-wide padded text; ``nwrong`` is a float; every double is printed with six decimals
(``%lf``) and NaN as the string "nan"; strings are cut at the first character it cannot
escape; the document is one line. The writer here keeps all of that (docs/nccl-tests.md
lists the keys and what colbench puts in each), and computes the per-iteration summary as
nccl-tests' ``computeIterStats`` does, from the very times the file holds
(:func:`iter_stats`); colbench's own time_p50_us and time_p99_us interpolate (numpy's
default), so the two differ by up to one iteration's gap.

The reporter keeps the file a complete report of the rows measured so far after every
size: it rewrites only the tail (the last record's end, the footer), so a run that fails
part way leaves a readable file whose ``errors`` say it stopped early.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench.bench.ops.data import DTYPES
from colbench.config.min_bw import BusbwFloor
from colbench.results import tables
from colbench.results.reporters.stragglers import RankTimes
from colbench.results.reporters.stream import Reporter
from colbench.results.rows import STATUS_OK, Row

#: The report's ``version`` (nccl-tests' JSON_FILE_VERSION in 2.19.6).
JSON_FILE_VERSION = 3
#: ``errors`` of a report whose run has not reached its end (yet, or ever).
INCOMPLETE = "colbench: the run stopped before its last size; the results above are complete"
#: Environment variables whose values the report leaves out (nccl-tests writes every
#: one; a shared results file is no place for a credential).
_SECRET = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE", re.IGNORECASE)
REDACTED = "<redacted>"


def percentile_index(n: int, percentile: int) -> int:
    """nccl-tests' ``percentileIndex``: the nearest-rank index of a percentile of n
    sorted values (ceil(n * p / 100) - 1, at most n - 1)."""
    return min(n - 1, (n * percentile + 99) // 100 - 1)


@dataclass(frozen=True)
class IterStats:
    """One placement's per-iteration summary, as nccl-tests' ``computeIterStats``."""

    min_us: float
    max_us: float
    avg_us: float
    p50_us: float
    p95_us: float
    p99_us: float
    stdev_us: float
    cv_pct: float


def iter_stats(times_us: Sequence[float]) -> IterStats:
    """The summary of ``times_us``: p50 = sorted[n // 2] (the upper median of an even
    count), p95/p99 by :func:`percentile_index`, the population stdev, cv = stdev / avg
    in percent (0 when avg is 0); sums taken over the sorted values, as nccl-tests does."""
    if not times_us:
        raise ValueError("no iteration times to summarise")
    ordered = sorted(times_us)
    n = len(ordered)
    total = 0.0
    for value in ordered:
        total += value
    avg = total / n
    var = 0.0
    for value in ordered:
        var += (value - avg) ** 2
    stdev = math.sqrt(var / n)
    return IterStats(
        min_us=ordered[0],
        max_us=ordered[-1],
        avg_us=avg,
        p50_us=ordered[n // 2],
        p95_us=ordered[percentile_index(n, 95)],
        p99_us=ordered[percentile_index(n, 99)],
        stdev_us=stdev,
        cv_pct=stdev / avg * 100.0 if avg > 0 else 0.0,
    )


def as_written(value_us: float) -> float:
    """A time as the report holds it (six decimals): summaries are computed from these,
    so a reader recomputing them from ``times_us`` finds the same figures."""
    return float(f"{value_us:f}")


def text(value: str) -> str:
    """A JSON string as util.cu's ``sanitizeJson`` writes it: ", \\, /, tab and newline
    escaped; cut at the first other control or non-ASCII character."""
    escaped = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\t": "\\t", "\n": "\\n"}
    out = []
    for char in value:
        if char not in escaped and not 0x1F < ord(char) < 0x7F:
            break
        out.append(escaped.get(char, char))
    return '"' + "".join(out) + '"'


def double(value: float | None) -> str:
    """``jsonDouble``: six decimals (%lf), NaN as the string "nan"; None as null."""
    if value is None:
        return "null"
    if value != value:
        return '"nan"'
    return f"{value:f}"


def boolean(value: bool) -> str:
    """``jsonBool``: the strings "true" and "false"."""
    return text("true" if value else "false")


def obj(pairs: Sequence[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{text(key)}:{value}" for key, value in pairs) + "}"


def array(items: Sequence[str]) -> str:
    return "[" + ",".join(items) + "]"


@dataclass(frozen=True)
class Device:
    """One rank's line of ``config.devices``."""

    rank: int
    group: int
    pid: int
    hostname: str
    device: int
    device_hex: str
    device_info: str

    def json(self) -> str:
        # Fields in the report's order: text as JSON strings, numbers bare.
        fields = dataclasses.asdict(self).items()
        return obj([(k, text(v) if isinstance(v, str) else str(v)) for k, v in fields])


def device_hex(bus_id: str) -> str:
    """``0000:17:00.0`` (NCCL's PCI address) -> ``0000:17:00`` as nccl-tests prints it
    (``%04x:%02x:%02x``: domain, bus, device); "" when there is none (CPU ranks)."""
    parts = bus_id.replace(".", ":").split(":")
    try:
        domain, bus, dev = (int(p, 16) for p in parts[:3])
    except ValueError:
        return ""
    return f"{domain:04x}:{bus:02x}:{dev:02x}"


@dataclass(frozen=True)
class Header:
    """What the report says before its results: the run's command, environment and config."""

    args: Sequence[str]
    env: Sequence[str]
    nccl_version: int
    sizes_bytes: Sequence[int]
    warmup_iters: int
    iterations: int
    validation: int
    graph: int
    per_iter_timing: bool
    devices: Sequence[Device]

    def json(self, start_time: str) -> str:
        """The report up to its open ``results`` list."""
        low, high = min(self.sizes_bytes), max(self.sizes_bytes)
        step_key, step = _step(self.sizes_bytes)
        config = [
            # One process per rank, one device per process: nccl-tests' -t 1 -g 1.
            ("nthreads", "1"),
            ("ngpus", "1"),
            ("minimum_bytes", str(low)),
            ("maximum_bytes", str(high)),
            (step_key, str(step)),
            ("warmup_iters", str(self.warmup_iters)),
            ("iterations", str(self.iterations)),
            ("aggregated_iterations", "1"),
            ("validation", str(self.validation)),
            ("graph", str(self.graph)),
            # colbench times back-to-back calls, as nccl-tests without -z.
            ("blocking_collectives", boolean(False)),
            ("per_iter_timing", boolean(self.per_iter_timing)),
            ("per_iter_skip", "0"),
            ("parallel_init", boolean(False)),
            ("devices", array([d.json() for d in self.devices])),
        ]
        head = [
            ("version", str(JSON_FILE_VERSION)),
            ("start_time", text(start_time)),
            ("args", array([text(a) for a in self.args])),
            ("env", array([text(e) for e in self.env])),
            ("nccl_version", str(self.nccl_version)),
            ("config", obj(config)),
        ]
        return obj(head)[:-1] + ',"results":['


def _step(sizes: Sequence[int]) -> tuple[str, int]:
    """``step_factor`` when the sizes grow by one whole factor (or there is one size:
    colbench's default doubling), else ``step_bytes`` when they grow by one amount, else
    ``step_bytes`` 0 (a list of sizes nccl-tests cannot express)."""
    ordered = sorted(set(sizes))
    if len(ordered) < 2:
        return "step_factor", 2
    ratios = {b / a if a else math.inf for a, b in itertools.pairwise(ordered)}
    if len(ratios) == 1:
        ratio = ratios.pop()
        if math.isfinite(ratio) and ratio == int(ratio) and ratio > 1:
            return "step_factor", int(ratio)
    steps = {b - a for a, b in itertools.pairwise(ordered)}
    return "step_bytes", steps.pop() if len(steps) == 1 else 0


def per_iter_block(per_rank_us: Sequence[Sequence[float]]) -> str:
    """``*_per_iter``: the summary, ``times_us`` (per iteration, the slowest rank's time:
    nccl-tests' max over process rows) and, with more than one rank,
    ``per_process_max_times_us`` (each rank's own times; a rank is one process here)."""
    rows = [[as_written(t) for t in rank] for rank in per_rank_us]
    times = [max(column) for column in zip(*rows, strict=True)]
    stats = iter_stats(times)
    pairs = [
        ("skipped_iterations", "0"),
        # IterStats' fields are the report's keys, in its order.
        *((key, double(value)) for key, value in dataclasses.asdict(stats).items()),
        ("times_us", array([double(t) for t in times])),
    ]
    if len(rows) > 1:
        pairs.append(
            ("per_process_max_times_us", array([array([double(t) for t in r]) for r in rows]))
        )
    return obj(pairs)


def record(rows: Sequence[Row], iters_us: Mapping[int, Sequence[Sequence[float]]] | None) -> str:
    """One ``results`` entry: a size's out-of-place and in-place rows (either may be
    missing: null, as nccl-tests writes an out-of-place it did not run); with
    ``iters_us`` (each placement's per-rank iteration times) the per-iteration blocks."""
    first = rows[0]
    pairs = [
        ("size", str(first.size_bytes)),
        ("count", str(first.count)),
        ("type", text(DTYPES[first.dtype].nccl_name)),
        ("redop", text(first.redop)),
        # The table's text, nccl-tests' %6i.
        ("root", text(f"{first.root:6d}")),
    ]
    for in_place, name in ((0, "out_of_place"), (1, "in_place")):
        row = next((r for r in rows if r.in_place == in_place and r.status == STATUS_OK), None)
        if row is None:
            pairs.append((name, "null"))
            continue
        measured = [
            ("time", double(row.time_us)),
            ("alg_bw", double(row.algbw_gbps)),
            ("bus_bw", double(row.busbw_gbps)),
            ("nwrong", "null" if row.wrong is None else double(float(row.wrong))),
        ]
        pairs.append((name, obj(measured)))
        if iters_us is not None and in_place in iters_us:
            pairs.append((f"{name}_per_iter", per_iter_block(iters_us[in_place])))
    iters = next((r.iters for r in rows if r.status == STATUS_OK), None)
    pairs += [("actual_iterations", str(iters or 0)), ("experiment_name", text(""))]
    return obj(pairs)


def footer(
    bad_results: int,
    busbw_gbps: Sequence[float],
    floor: BusbwFloor | None,
    errors: Sequence[str],
    end_time: str,
) -> str:
    """The report after its ``results`` list. ``out_of_bounds.count``: results with wrong
    elements (nccl-tests counts once per process that saw some; colbench keeps only the
    sum over ranks, so once per result)."""
    average = sum(busbw_gbps) / len(busbw_gbps) if busbw_gbps else math.nan
    # NCCL_TESTS_MIN_BW's verdict (colbench.config.min_bw), "unchecked" when unset.
    okay = text("unchecked") if floor is None else boolean(floor.okay(average))
    pairs = [
        ("out_of_bounds", obj([("count", str(bad_results)), ("okay", boolean(bad_results == 0))])),
        ("average_bus_bandwidth", obj([("bandwidth", double(average)), ("okay", okay)])),
        ("errors", array([text(e) for e in errors])),
        ("end_time", text(end_time)),
    ]
    return "]," + obj(pairs)[1:]


def environment(environ: Mapping[str, str] | None = None) -> list[str]:
    """``env``: every variable as NAME=VALUE, as nccl-tests writes its process's; values of
    names that look like credentials (TOKEN, SECRET, PASSWORD, KEY...) left out."""
    env = os.environ if environ is None else environ
    return [f"{k}={REDACTED if _SECRET.search(k) else v}" for k, v in env.items()]


def now_text() -> str:
    """nccl-tests' time stamps: local time, ``%Y-%m-%d %H:%M:%S``."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())


def open_new(path: Path) -> tuple[Path, Any]:
    """nccl-tests never overwrites a report: FILE, else FILE.0, FILE.1..., the first that
    can be created (exclusively, as its ``fopen(path, "wx")``); (the path, the file)."""
    candidate, tries = path, 0
    while True:
        try:
            # Held open for the run; the caller closes it.
            return candidate, open(candidate, "xb")
        except FileExistsError:
            candidate = path.with_name(f"{path.name}.{tries}")
            tries += 1


class NcclTestsJsonReporter(Reporter):
    """``sweep -J FILE``: the rows as nccl-tests' JSON report, complete after every size.

    The file holds the header, the records so far and a footer; each size appends its
    record over the old footer and writes a new one (``errors`` says the run has not
    ended until :meth:`on_end` writes the last footer with nccl-tests' ``[""]``).
    """

    def __init__(
        self, path: Path, header: Header, floor: BusbwFloor | None, say: Callable[[str], None]
    ) -> None:
        self.path = path
        self._header = header
        self._floor = floor
        self._say = say
        self._file: Any = None
        self._records_end = 0
        self._records = 0
        self._busbw: list[float] = []
        self._bad = 0
        self._pending: dict[int, Sequence[Sequence[float]]] = {}

    def on_start(self, meta: Mapping[str, Any]) -> None:
        with tables.checked(self.path):
            self.path, self._file = open_new(self.path)
        self._say(f"# Writing JSON output to {self.path}")
        with tables.checked(self.path):
            head = self._header.json(now_text()).encode()
            self._file.write(head)
            self._records_end = len(head)
            self._write_footer([INCOMPLETE])

    def on_rank_times(self, row: Row, ranks: RankTimes) -> None:
        if self._header.per_iter_timing and ranks.iters_us:
            self._pending[row.in_place] = ranks.iters_us

    def on_rows(self, rows: Sequence[Row]) -> None:
        pending, self._pending = self._pending, {}
        measured = [r for r in rows if r.status == STATUS_OK]
        if not measured:
            return
        self._busbw += [r.busbw_gbps for r in measured if r.busbw_gbps is not None]
        self._bad += sum(bool(r.wrong) for r in measured)
        entry = record(rows, pending if self._header.per_iter_timing else None)
        data = (("," if self._records else "") + entry).encode()
        with tables.checked(self.path):
            self._file.seek(self._records_end)
            self._file.write(data)
            self._records_end += len(data)
            self._records += 1
            self._write_footer([INCOMPLETE])

    def on_end(self, duration_s: float) -> None:
        with tables.checked(self.path):
            # nccl-tests' errors hold NCCL's last error: "" after a clean run.
            self._write_footer([""])

    def _write_footer(self, errors: Sequence[str]) -> None:
        tail = footer(self._bad, self._busbw, self._floor, errors, now_text()).encode()
        self._file.seek(self._records_end)
        self._file.write(tail)
        self._file.truncate()
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            with tables.checked(self.path):
                self._file.close()
            self._file = None
