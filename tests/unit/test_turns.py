"""The turn protocol against a real TCPStore (no ranks): version check, rotation, stop;
and the parent's memory check before it keeps two worlds alive at once."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from colbench.bench import memory
from colbench.bench.ops.data import DTYPES
from colbench.bench.plan import plan
from colbench.commands.sweep.interleave import memory_note
from colbench.config.model import SweepConfig
from colbench.errors import UsageError
from colbench.host import turns
from colbench.host.job import InFlight


@pytest.fixture
def store() -> Any:
    """The parent's turn store on a free port, as run_interleaved serves it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    yield turns.serve("127.0.0.1", sock.fileno(), port), port
    sock.close()


def _turns(port: int, world: int, worlds: int = 2) -> turns.Turns:
    return turns.Turns(turns.TurnSpec("127.0.0.1", port, world, worlds, f"v{world}"), 1, None)


def test_a_rank_of_another_protocol_version_is_refused(store: Any) -> None:
    served, port = store
    served.set("colbench/turns/protocol", "7")
    with pytest.raises(UsageError, match="turn protocol v1, the parent's v7"):
        _turns(port, 0).handshake(4, 2)


def test_worlds_planning_different_sweeps_are_refused(store: Any) -> None:
    served, port = store
    served.set("colbench/turns/hello/1", "6")
    first = _turns(port, 0)
    first.rank = 0  # rank 0 says hello for its world
    with pytest.raises(UsageError, match="4 vs 6 turns"):
        first.handshake(4, 2)


def test_order_rotates_each_repeat_and_stop_ends_the_wait(store: Any) -> None:
    served, port = store
    served.set("colbench/turns/hello/0", "4")
    served.set("colbench/turns/hello/1", "4")
    one = _turns(port, 1)
    one.handshake(4, 2)
    assert [one.order(u) for u in range(4)] == [[0, 1], [0, 1], [1, 0], [1, 0]]
    turns.stop_all(served, 2, 4)
    with one.turn(InFlight()) as go:
        assert go is False


def test_stop_before_the_first_turn_is_seen_in_the_handshake(store: Any) -> None:
    served, port = store
    served.set("colbench/turns/hello/0", "4")
    turns.stop_all(served, 2, 4)
    waiting = _turns(port, 0)
    waiting.handshake(4, 2)
    assert waiting.stopped
    with waiting.turn(InFlight()) as go:
        assert go is False


def test_two_live_worlds_that_do_not_fit_run_one_after_the_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = SweepConfig.of(ops=("all_reduce",), sizes_bytes=(1 << 26,), backend="gloo")
    item = plan(cfg, 2, "gloo")[0]
    need = memory.buffer_bytes(
        item.coll, item.layouts[0], DTYPES[item.dtype].elem_bytes, item.placements
    )
    # Enough host memory for one world's two ranks, not for two worlds' four.
    host = int(need * 3 / memory.USABLE_FRACTION)
    monkeypatch.setattr(memory, "host_available_bytes", lambda: host)
    assert memory_note(cfg, "gloo", 2, 1) is None
    note = memory_note(cfg, "gloo", 2, 2)
    assert note is not None and "one after the other" in note
    assert memory_note(cfg.replace(memory_check="off"), "gloo", 2, 2) is None
