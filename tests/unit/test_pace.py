"""A run's forecast and what it says (colbench.host.pace), on a fake
clock: when the time is stated and what it says, the progress line, the cadence knob, the
word on an overrun and meta.json's record of it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from colbench.host import job
from colbench.host import pace as pacing
from colbench.host.pace import Forecast, Pace, duration, every_s


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _pace(clock: Clock, said: list[str], published: list[str], threshold_s: float = 30.0) -> Pace:
    return Pace(clock.now, said.append, published.append, threshold_s, clock)


def test_a_long_run_states_its_time_once_after_its_first_step() -> None:
    clock, said, published = Clock(), [], []
    pace = _pace(clock, said, published)
    clock.now += 5  # start-up
    pace.plan(units_total=10, weight_total=10.0)
    assert said == [] and pace.forecast is not None and pace.forecast.total_s() is None
    clock.now += 6  # the first step: 6 s for 1 of 10
    pace.step()
    pace.step()
    assert said == ["colbench: this run takes about 1 min 05 s in all (10 steps; forecast 11 s in)"]
    for _ in range(8):
        clock.now += 20  # much slower than forecast: said once, all the same
        pace.step()
    pace.end()
    assert len(said) == 1
    stated = Forecast.decode(published[-1])
    assert stated.stated_s == pytest.approx(65.0) and stated.units_done == 10


def test_a_short_run_says_nothing_and_a_model_states_before_any_step() -> None:
    clock, said = Clock(), []
    short = _pace(clock, said, [])
    short.plan(10, 10.0)
    clock.now += 0.1
    short.done(1.0)
    assert said == []  # 1 s in all: shorter than a progress line's gap
    modelled = _pace(clock, said, [])
    modelled.plan(60, 480.0, model_s=1.0, tail_s=3.0)
    assert said == ["colbench: this run takes about 8 min 03 s in all (60 steps; forecast 0 s in)"]


def test_a_task_that_said_its_time_itself_is_not_said_again() -> None:
    clock, said = Clock(), []
    pace = _pace(clock, said, [])
    pace.plan(100, 100.0, model_s=1.0, stated_s=104.0)
    assert said == [] and pace.forecast is not None and pace.forecast.stated_s == 104.0


def test_time_left_follows_the_measured_rate_and_never_goes_below_the_tail() -> None:
    f = Forecast(
        started_at=0, planned_at=10, updated_at=30, units_done=2, units_total=10,
        unit="steps", weight_done=2, weight_total=10, model_s=1.0, tail_s=3.0,
    )  # fmt: skip
    assert f.rate_s() == 10.0  # measured (20 s for 2) beats the model
    assert f.total_s() == 10 + 100 + 3
    assert f.left_s(now=35) == 80 - 5 + 3
    assert f.left_s(now=1000) == 3.0
    assert Forecast.decode(f.encode()) == f


def test_the_progress_line() -> None:
    f = Forecast(0, 0, 120, 14, 60, "steps", 14, 60, 0.0, 0.0)
    line = pacing.progress_line(f, elapsed_s=125, now=125, doing="pass 2/5 bandwidth step 3/6")
    assert line == (
        "colbench: progress: 14/60 steps, 2 min 05 s in, about 6 min 29 s left "
        "(pass 2/5 bandwidth step 3/6)"
    )
    assert pacing.progress_line(None, 35, 35, "") == "colbench: progress: 35 s in, starting"


def test_the_cadence_knob_only_shortens_the_gap() -> None:
    assert every_s({}) == pacing.EVERY_S == 30.0
    assert every_s({pacing.EVERY_ENV: "0.5"}) == 0.5
    assert every_s({pacing.EVERY_ENV: "600"}) == 30.0
    for bad in ("", "soon", "-1", "0", "nan", "inf"):
        assert every_s({pacing.EVERY_ENV: bad}) == 30.0


def test_durations_read_at_a_glance() -> None:
    assert [duration(s) for s in (0.4, 45, 60, 500, 3600, 3725)] == [
        "0 s", "45 s", "1 min 00 s", "8 min 20 s", "1 h 00 min", "1 h 02 min",
    ]  # fmt: skip


def test_lines_are_wanted_unless_silenced_or_a_bar_draws_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Terminal:
        def isatty(self) -> bool:
            return True

    assert pacing.lines_wanted(False, live_bar=False) is False
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert pacing.lines_wanted(None, live_bar=False) is True  # p2p, health: no bar to show
    assert pacing.lines_wanted(None, live_bar=True) is False  # a sweep's bar shows it
    monkeypatch.setattr(sys, "stderr", open(Path(__file__), encoding="utf-8"))  # noqa: SIM115
    assert pacing.lines_wanted(None, live_bar=True) is True


def test_lines_come_at_the_interval_and_a_failing_source_costs_only_numbers() -> None:
    written: list[str] = []

    def broken() -> tuple[Forecast | None, str]:
        raise RuntimeError("store gone")

    lines = pacing.ProgressLines(broken, started_at=0.0, interval_s=0.0, write=written.append)
    lines.tick()
    assert len(written) == 1 and written[0].endswith(" in, starting")
    slow = pacing.ProgressLines(broken, started_at=0.0, interval_s=3600, write=written.append)
    slow.tick()
    assert len(written) == 1


def _meta(run_dir: Path) -> dict[str, object]:
    run_dir.mkdir()
    (run_dir / "meta.json").write_text(json.dumps({"schema_version": 6, "status": "complete"}))
    return {}


def test_an_overrun_is_said_and_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _meta(tmp_path / "run")
    f = Forecast(0, 0, 0, 0, 1, "steps", 0, 1, stated_s=100.0, stated_at=12.0)
    pacing.check_overrun(tmp_path / "run", f, taken_s=151.0)
    assert capsys.readouterr().err == (
        "colbench: note: this run took 2 min 31 s, 51% more than the about 1 min 40 s it stated\n"
    )
    timing = json.loads((tmp_path / "run" / "meta.json").read_text())["timing"]
    assert timing == {"stated_s": 100.0, "stated_after_s": 12.0, "taken_s": 151.0, "overran": True}


def test_a_run_within_half_again_its_time_says_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _meta(tmp_path / "run")
    f = Forecast(0, 0, 0, 0, 1, "steps", 0, 1, stated_s=100.0, stated_at=5.0)
    pacing.check_overrun(tmp_path / "run", f, taken_s=149.0)
    pacing.check_overrun(tmp_path / "run", None, taken_s=1e6)  # stated nothing: nothing
    assert capsys.readouterr().err == ""
    timing = json.loads((tmp_path / "run" / "meta.json").read_text())["timing"]
    assert timing["overran"] is False and timing["taken_s"] == 149.0


def test_a_test_process_is_no_command_its_runs_count_from_now() -> None:
    import time

    assert abs(job.command_started_at() - time.time()) < 1.0
