"""Many ranks on a small host: refused before they start when the limits cannot hold them,
said at once when they are many per core, counted as they join."""

from __future__ import annotations

import resource
import time

import pytest

from colbench.errors import UsageError
from colbench.host import supervise
from colbench.host.launchers import env as limits


def test_each_rank_needs_a_few_files_per_peer() -> None:
    # Measured: 24 + 3 per peer (69 at 16 ranks, 213 at 64); the table holds more.
    assert limits.files_per_rank(16) >= 69 and limits.files_per_rank(64) >= 213
    assert limits.files_per_rank(1000) < 5000


def test_ranks_beyond_the_hard_open_file_limit_are_refused_by_name() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard open-file limit here")
    too_many = (hard // limits.FILES_PER_PEER) + 2
    with pytest.raises(UsageError, match=rf"--nprocs {too_many}: .* the {hard} this host allows"):
        limits.check_spawn(too_many, too_many, f"--nprocs {too_many}")


def test_the_soft_limit_is_raised_where_the_hard_one_allows() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ranks = 200
    needed = limits.PARENT_BASE_FILES + limits.PARENT_FILES_PER_RANK * ranks
    if hard != resource.RLIM_INFINITY and needed > hard:
        pytest.skip("hard limit too low to try")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        limits.check_spawn(ranks, 8, f"--nprocs {ranks}")
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= needed
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_more_threads_than_the_kernel_allows_are_refused() -> None:
    room = limits.thread_room()
    if room is None:
        pytest.skip("the kernel says nothing of its thread limits here")
    ranks = room[0] // limits.THREADS_PER_RANK + 10
    # Within the open-file limit, so that the thread check is the one that speaks.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and limits.PARENT_FILES_PER_RANK * ranks + 64 > hard:
        pytest.skip("the open-file limit is the lower one here")
    with pytest.raises(UsageError, match=rf"{ranks} ranks start about .* threads"):
        limits.check_spawn(ranks, 2, f"--nprocs {ranks}")


def test_crowded_ranks_are_announced_before_they_start() -> None:
    assert limits.crowded_note(8, cores=2) is None
    note = limits.crowded_note(1000, cores=2)
    assert note is not None and note.startswith("starting 1000 ranks on 2 CPU core(s)")
    assert "--init-timeout" in note


def test_joining_ranks_are_counted_on_a_terminal_and_cleared(
    capsys: pytest.CaptureFixture[str],
) -> None:
    arrived: list[int] = []
    counter = supervise.JoinCounter(terminal=True)
    watch = supervise.StartupWatch(
        deadline=time.monotonic() + 60, arrived=lambda: arrived, world_size=4, counter=counter
    )
    watch.show_progress()  # the first second: a quick start shows nothing
    assert capsys.readouterr().err == ""
    counter._next = 0.0
    arrived += [0, 2]
    watch.show_progress()
    err = capsys.readouterr().err
    assert err.startswith("\rcolbench: ranks joined 2/4 (") and err.endswith("\033[K")
    counter._next = 0.0
    arrived += [1, 3]
    watch.show_progress()
    assert capsys.readouterr().err == "\r\033[K" and counter.finished


def test_joining_ranks_are_logged_now_and_then_off_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    counter = supervise.JoinCounter(terminal=False)
    assert not counter.due()  # the first line after LOG_EVERY_S, not at once
    counter.show(37, 1000)
    assert capsys.readouterr().err.startswith("colbench: ranks joined 37/1000 (")
    assert not counter.due()
