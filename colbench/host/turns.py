"""Turn-taking between the worlds of an interleaved variant run.

With ``--interleave`` every variant's world is alive at once, and the worlds take turns
per (size, repeat), the order rotating each repeat, so the variants share the machine's
drift instead of one variant's whole sweep meeting another hour's load than the other's.

The parent serves a TCPStore for the turns (:func:`serve`). Turn ``k`` of world ``v`` is
the key ``go/v/k``: the world's ranks block in the store's ``wait`` on it (no CPU spent),
and rank 0 of the world that measured before sets it once its rows are on disk, to ``go``
(``stop`` when the parent ends the run). The protocol is versioned
(:data:`PROTOCOL_VERSION`, compared at every rank's handshake), so a rank of another
colbench (``--python`` runs another interpreter's install) is refused in one line instead
of waiting for keys it does not know.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench import reading
from colbench.errors import UsageError

#: Version of the key layout and values below. History:
#: 1: ``protocol``, ``hello/V`` (units of world V), ``go/V/K`` (``go`` or ``stop``).
PROTOCOL_VERSION = 1

_PREFIX = "colbench/turns/"
GO = b"go"
STOP = b"stop"
#: The watchdog leaves this phase alone: waiting for the other world is not a hang.
WAITING_PHASE = "waiting for its turn"
#: How long a rank waits for one key. The parent always ends a wait (``stop``) when a
#: world fails, and a rank dies with its parent, so this only bounds a lost store.
WAIT_TIMEOUT_S = 24 * 3600.0
#: One JSON line per turn, written by the rank 0 that measured it.
TURNS_FILE = "turns.jsonl"


def _key(*parts: object) -> str:
    return _PREFIX + "/".join(str(p) for p in parts)


@dataclass(frozen=True)
class TurnSpec:
    """Where a world's ranks find the turns, and which world they are (pickled to them)."""

    host: str
    port: int
    world: int
    worlds: int
    #: The variant's name, for the turn log.
    variant: str


def serve(host: str, listener_fd: int, port: int) -> Any:
    """The parent's turn store on an already listening socket; writes the protocol key."""
    import torch.distributed as dist

    store = dist.TCPStore(
        host,
        port,
        is_master=True,
        timeout=_dt.timedelta(seconds=60),
        wait_for_workers=False,
        master_listen_fd=listener_fd,
    )
    store.set(_key("protocol"), str(PROTOCOL_VERSION))
    return store


def stop_all(store: Any, worlds: int, turns_per_world: int) -> None:
    """Wake every waiting rank with ``stop`` (keys already ``go`` stay, nobody waits on
    them any more: the world that measured last has passed them)."""
    for world in range(worlds):
        # A world still in its handshake waits for the others' hellos.
        store.compare_set(_key("hello", world), "", STOP.decode())
        for turn in range(turns_per_world + 1):
            store.compare_set(_key("go", world, turn), "", STOP.decode())


def start(store: Any) -> None:
    """Let world 0 take its first turn."""
    store.set(_key("go", 0, 0), GO.decode())


class Turns:
    """A rank's side of the turns: block until its world's turn, pass it on after."""

    def __init__(self, spec: TurnSpec, rank: int, log_dir: str | None) -> None:
        import torch.distributed as dist

        self.spec = spec
        self.rank = rank
        self._log = Path(log_dir) / TURNS_FILE if log_dir is not None and rank == 0 else None
        self._store = dist.TCPStore(
            spec.host,
            spec.port,
            is_master=False,
            timeout=_dt.timedelta(seconds=WAIT_TIMEOUT_S),
        )
        self._next = 0
        self.units = 0
        self._per_repeat = 1
        #: Set when the run stopped before this world's first turn.
        self.stopped = False

    def handshake(self, units: int, per_repeat: int) -> None:
        """Check the protocol version, then that every world plans as many turns.

        ``per_repeat``: turns of one repeat; the worlds' order rotates each repeat.
        """
        theirs = self._store.get(_key("protocol")).decode()
        if theirs != str(PROTOCOL_VERSION):
            raise UsageError(
                f"interleaved variant {self.spec.variant!r}: its colbench speaks turn protocol "
                f"v{PROTOCOL_VERSION}, the parent's v{theirs}; install the same colbench "
                "version in every --python interpreter, or use --no-interleave"
            )
        if self.rank == 0:
            self._store.set(_key("hello", self.spec.world), str(units))
        hellos = [_key("hello", w) for w in range(self.spec.worlds)]
        self._store.wait(hellos)
        values = [v.decode() for v in self._store.multi_get(hellos)]
        if STOP.decode() in values:
            self.stopped = True  # another world failed before measuring anything
            return
        counts = [int(v) for v in values]
        if len(set(counts)) != 1:
            raise UsageError(
                f"interleaved variants planned different sweeps ({' vs '.join(map(str, counts))} "
                "turns; buffers that fit for one variant but not another?): use --no-interleave"
            )
        self.units = units
        self._per_repeat = max(1, per_repeat)

    @contextmanager
    def turn(self, in_flight: Any) -> Iterator[bool]:
        """Block until this world's next turn; yields False when the run is stopping.

        After the body (this world's rows are written by then), rank 0 passes the turn
        to the next world. A body that raises passes nothing: the parent sees the rank
        die and stops the other worlds.
        """
        if self.stopped:
            yield False
            return
        key = _key("go", self.spec.world, self._next)
        phase = in_flight.phase
        in_flight.phase = WAITING_PHASE
        wall0, cpu0 = time.monotonic(), time.process_time()
        self._store.wait([key])
        go = self._store.get(key) == GO
        waited = (time.monotonic() - wall0, time.process_time() - cpu0)
        in_flight.phase = phase
        started = time.time()
        yield go
        if not go:
            return
        if self.rank == 0:
            self._record(started, waited)
            self._pass_on()
        self._next += 1

    def order(self, unit: int) -> list[int]:
        """The worlds in the order they measure ``unit``: rotated by one each repeat, so
        each world measures first as often as second (an ABBA design) and what comes of
        measuring first or second cancels out of the pairs."""
        shift = unit // self._per_repeat
        return [(shift + i) % self.spec.worlds for i in range(self.spec.worlds)]

    def _pass_on(self) -> None:
        unit = self._next
        order = self.order(unit)
        place = order.index(self.spec.world)
        if place + 1 < len(order):
            following = order[place + 1]
        else:
            following, unit = self.order(unit + 1)[0], unit + 1
        # compare_set: a ``stop`` the parent wrote already is not overwritten.
        self._store.compare_set(_key("go", following, unit), "", GO.decode())

    def _record(self, started: float, waited: tuple[float, float]) -> None:
        if self._log is None:
            return
        record = {
            "turn": self._next * self.spec.worlds + self.order(self._next).index(self.spec.world),
            "world": self.spec.world,
            "variant": self.spec.variant,
            "start_unix": round(started, 6),
            "end_unix": round(time.time(), 6),
            "wait_s": round(waited[0], 6),
            "wait_cpu_s": round(waited[1], 6),
            "pid": os.getpid(),
        }
        with open(self._log, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def read_log(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The turn log of an interleaved run, in the order written ([] when none or not a
    turn log); a line that is not a record is skipped."""
    try:
        text = reading.read_text(Path(run_dir) / TURNS_FILE, reading.TURNS, strict=False)
    except UsageError:  # none, or not a file colbench reads
        return []
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # blank, or cut short by a killed world
            continue
        if isinstance(record, dict):
            records.append(record)
    return records
