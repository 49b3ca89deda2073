"""The p2p verdict on hand-made passes: slow nodes and links named only beyond the noise,
how sure it is, too few ranks or passes."""

from __future__ import annotations

import itertools
import random
import re

from colbench.commands.p2p.link_tests import link_samples, metrics, passes_needed
from colbench.commands.p2p.links import Samples, judge
from colbench.commands.p2p.options import DEFAULT_PASSES

Pair = tuple[int, int]


def _passes(
    n: int,
    passes: int = DEFAULT_PASSES,
    bw: float = 10.0,
    lat: float = 20.0,
    slow: dict[Pair, float] | None = None,
    spread: float = 0.05,
    seed: int = 1,
) -> tuple[Samples, Samples]:
    """Every ordered pair at ``bw`` GB/s and ``lat`` us per pass, each pass off by up to
    ``spread`` (a fixed seed), except ``slow``: pair -> its bandwidth's factor."""
    rng = random.Random(seed)

    def noisy(value: float) -> list[float]:
        return [value * rng.uniform(1 - spread, 1 + spread) for _ in range(passes)]

    pairs = list(itertools.permutations(range(n), 2))
    bw_gbps = {p: noisy(bw * (slow or {}).get(p, 1.0)) for p in pairs}
    return bw_gbps, {p: noisy(lat) for p in pairs}


def _labels(n: int, per_node: int = 1) -> dict[int, str]:
    return {r: f"node{chr(ord('A') + r // per_node)}" for r in range(n)}


def _both(pairs: list[Pair], factor: float) -> dict[Pair, float]:
    return {q: factor for p in pairs for q in (p, p[::-1])}


def test_uniform_passes_name_nothing_and_say_what_they_could_see() -> None:
    bw, lat = _passes(6)
    verdict = judge(bw, lat, _labels(6))
    assert verdict.judged and not verdict.slow_nodes and not verdict.slow_links
    first, second = verdict.lines
    # 6 nodes and 15 links, each asked of bandwidth and latency: Holm over 42 questions.
    assert first == (
        "verdict: no slow link or node among 15 links over 5 passes: none holds 25% below "
        "the others' bandwidth or 100% above their latency beyond their spread (lowest p = 1 "
        "after Holm over 42 tests)"
    )
    # Medians of the worse direction; with 5% of noise the test sees a little past 25%.
    seen = re.fullmatch(
        r"verdict: median of the 15 links' worse directions \(the lower bandwidth, the higher "
        r"latency\): 9\.\d+ GB/s, 2\d\.\d us; of every direction, as the matrices show them: "
        r"\d+\.?\d* GB/s, \d+\.?\d* us; a link (\d+)% below "
        r"the others' bandwidth would be named 80% of the time",
        second,
    )
    assert seen and 25 < int(seen[1]) < 35, second
    assert set(verdict.per_link.values()) == {("ok", 1.0)}


def test_the_all_clear_medians_say_which_statistic_they_are() -> None:
    # Every link's one direction at 10 GB/s and 100 us, the other at 8 GB/s and 300 us:
    # the verdict judges the worse direction (8 GB/s, 300 us), while the printed matrices
    # hold both, whose median is halfway (9 GB/s, 200 us). Both are said, each named.
    bw = {(s, d): [10.0 if s < d else 8.0] * DEFAULT_PASSES for s in range(6) for d in range(6)
          if s != d}  # fmt: skip
    lat = {p: [100.0 if p[0] < p[1] else 300.0] * DEFAULT_PASSES for p in bw}
    second = judge(bw, lat, _labels(6)).lines[1]
    assert second.startswith(
        "verdict: median of the 15 links' worse directions (the lower bandwidth, the higher "
        "latency): 8 GB/s, 300 us; of every direction, as the matrices show them: 9 GB/s, 200 us"
    ), second


def test_a_node_of_slow_links_is_named_with_its_p_value_and_its_links_not_listed() -> None:
    # 4 nodes of 2 ranks; every link of node B's ranks to other nodes at 0.4.
    slow = _both([(a, b) for a in (2, 3) for b in (0, 1, 4, 5, 6, 7)], 0.4)
    bw, lat = _passes(8, slow=slow)
    verdict = judge(bw, lat, _labels(8, per_node=2))
    assert verdict.slow_nodes == ("nodeB",) and verdict.slow_links == ()
    (line,) = verdict.lines
    assert line.startswith(
        "slow node nodeB (ranks 2,3): 12 of 12 links slow, bandwidth 60% below the others' "
        "median (p = "
    )
    # 4 nodes and 28 links, two questions each.
    assert line.endswith("); 5 passes, Holm over 64 tests")
    per_link = verdict.per_link or {}
    assert per_link[(2, 4)][0] == "slow node" and per_link[(2, 3)][0] == "ok"
    assert per_link[(2, 4)][1] is not None and per_link[(2, 4)][1] <= 1e-6


def test_one_node_slow_among_four_is_named_alone() -> None:
    # Half the links are slow: only asked against the links among the other nodes does
    # node A stand out, and none of the rest does.
    bw, lat = _passes(4, slow=_both([(0, 1), (0, 2), (0, 3)], 0.25))
    verdict = judge(bw, lat, _labels(4), fail_below_pct=30)
    assert verdict.slow_nodes == ("nodeA",) and verdict.slow_links == ()
    assert verdict.lines[0].startswith("slow node nodeA (ranks 0): 3 of 3 links slow, ")
    # --fail-below asks each of node A's links against the links without node A.
    assert sorted((x.low, x.high) for x in verdict.failing) == [(0, 1), (0, 2), (0, 3)]
    assert verdict.lines[1].startswith(
        "verdict: FAIL: 3 link(s) more than 30% below the others' bandwidth (worst 0 <-> "
    )


def test_one_slow_direction_makes_the_link_slow() -> None:
    bw, lat = _passes(5, slow={(0, 4): 0.2})
    verdict = judge(bw, lat, _labels(5))
    assert verdict.slow_links == ((0, 4),) and verdict.slow_nodes == ()
    (line,) = verdict.lines
    assert re.match(
        r"slow link 0 <-> 4 \(nodeA <-> nodeE\): bandwidth (79|80|81)% below the others' "
        r"median \(p = .*\); 5 passes, Holm over 30 tests$",
        line,
    ), line
    assert (verdict.per_link or {})[(0, 4)][0] == "slow link"


def test_a_single_slow_link_does_not_blame_its_nodes() -> None:
    bw, lat = _passes(4, slow={(1, 2): 0.3, (2, 1): 0.35})
    verdict = judge(bw, lat, _labels(4))
    assert verdict.slow_nodes == () and verdict.slow_links == ((1, 2),)


def test_a_link_slow_in_one_pass_only_is_noise() -> None:
    bw, lat = _passes(4)
    # One pass met a busy host: 70% below in that pass, normal in the other four.
    bw[(1, 3)][2] *= 0.3
    bw[(3, 1)][2] *= 0.3
    verdict = judge(bw, lat, _labels(4))
    assert verdict.slow_links == () and verdict.lines[0].startswith("verdict: no slow link")


def test_latency_that_jumps_between_passes_names_nothing() -> None:
    # An 8-byte ping-pong on a busy 2-core host: 40 us or 2 ms, whichever link meets it;
    # one link meets it in 3 of its 5 passes.
    bw, lat = _passes(4)
    rng = random.Random(7)
    for pair in lat:
        lat[pair] = [rng.choice([40.0, 2000.0]) for _ in range(DEFAULT_PASSES)]
    lat[(0, 2)] = [2000.0, 2000.0, 40.0, 2000.0, 40.0]
    verdict = judge(bw, lat, _labels(4))
    assert verdict.slow_links == () and verdict.slow_nodes == ()


def test_latency_slow_in_every_pass_is_named_against_its_own_threshold() -> None:
    bw, lat = _passes(4)
    lat[(3, 0)] = [v * 2.5 for v in lat[(3, 0)]]  # 150% above the others
    verdict = judge(bw, lat, _labels(4))
    assert verdict.slow_links == ((0, 3),)
    assert re.search(r": latency 1[45]\d% above the others' median \(p = ", verdict.lines[0])
    bw, lat = _passes(4)
    lat[(2, 1)] = [v * 1.75 for v in lat[(2, 1)]]  # 75%: within the default 100%
    assert judge(bw, lat, _labels(4)).slow_links == ()
    assert judge(bw, lat, _labels(4), latency_pct=50).slow_links == ((1, 2),)


def test_fewer_than_four_ranks_are_not_judged() -> None:
    bw, lat = _passes(3, slow={(0, 1): 0.1})
    verdict = judge(bw, lat, _labels(3), fail_below_pct=10)
    assert not verdict.judged and verdict.failing == ()
    assert set((verdict.per_link or {}).values()) == {("not judged", None)}
    assert verdict.lines == (
        "verdict: not judged: telling a slow link from the others needs at least 4 ranks "
        "(nodes with --per-node); this matrix has 3",
    )


def test_too_few_passes_judge_nothing_and_say_how_many_would() -> None:
    bw, lat = _passes(4, passes=1, slow=_both([(0, 1), (0, 2), (0, 3)], 0.1))
    verdict = judge(bw, lat, _labels(4))
    assert not verdict.judged and verdict.slow_nodes == ()
    assert verdict.lines == (
        "verdict: not judged: 1 pass(es) cannot show a link slower than the others beyond "
        "their spread (the rank test's best p, 0.17, is above the 0.0025 that Holm over 20 "
        "tests needs); measure with --repeat 3 or more",
    )
    assert set((verdict.per_link or {}).values()) == {("not judged", None)}
    # The number it names is the one that can.
    bw, lat = _passes(4, passes=3, slow=_both([(1, 3)], 0.1))
    assert judge(bw, lat, _labels(4)).slow_links == ((1, 3),)


def test_fail_below_lists_the_links_that_hold_past_it() -> None:
    bw, lat = _passes(4, slow=_both([(0, 1)], 0.8) | _both([(2, 3)], 0.6))
    assert judge(bw, lat, _labels(4), fail_below_pct=50).failing == ()
    verdict = judge(bw, lat, _labels(4), fail_below_pct=10)
    assert [(f.low, f.high) for f in verdict.failing] == [(0, 1), (2, 3)]
    assert re.fullmatch(
        r"verdict: FAIL: 2 link\(s\) more than 10% below the others' bandwidth "
        r"\(worst 2 <-> 3, (39|40|41)% below; p = \S+ after Holm over 6 links\)",
        verdict.lines[-1],
    ), verdict.lines[-1]
    # 20% below is within the 25% slow threshold: failing, yet not named slow.
    assert verdict.slow_links == ((2, 3),)


def test_fail_below_with_no_failing_link_says_in_one_line_that_it_passed() -> None:
    # A health check that passes said nothing of --fail-below before: only FAIL was said.
    verdict = judge(*_passes(4), _labels(4), fail_below_pct=30)
    assert verdict.failing == () and len(verdict.lines) == 3
    assert re.fullmatch(
        r"verdict: PASS: no link more than 30% below the others' bandwidth beyond their "
        r"spread \(--fail-below 30; lowest p = \S+ after Holm over 6 links\)",
        verdict.lines[-1],
    ), verdict.lines[-1]
    # Without --fail-below, no such line; with too few passes for any link to fail, the
    # line says it was not checked rather than passed.
    assert not any("PASS" in line for line in judge(*_passes(4), _labels(4)).lines)
    cut = judge(*_passes(4, passes=2), _labels(4), fail_below_pct=30)
    assert cut.lines[-1] == (
        "verdict: --fail-below 30: not checked: too few passes for any link to fail "
        "(Holm over 6 links)"
    )


def test_link_samples_take_the_worse_direction_of_each_pass() -> None:
    bw_metric, lat_metric = metrics(25, 100)
    assert link_samples({(0, 1): [5.0, 9.0], (1, 0): [7.0, 3.0]}, bw_metric) == {(0, 1): [5.0, 3.0]}
    assert link_samples({(1, 0): [5.0, 9.0], (0, 1): [7.0, 3.0]}, lat_metric) == {
        (0, 1): [7.0, 9.0]
    }


def test_passes_needed_is_the_fewest_that_can_reach_holms_level() -> None:
    # 6 links: a link's R samples against the others' 5R, at 0.05/20.
    assert passes_needed(6, 20, 0.05) == 3
    # --fail-below alone (a family of 6) at 0.05/6: 2 passes (1/66 > 0.0083) are not enough.
    assert passes_needed(6, 6, 0.05) == 3
    assert passes_needed(28, 64, 0.05) == 2
