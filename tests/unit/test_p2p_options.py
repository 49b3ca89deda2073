"""p2p's options: sweep's rows where they mean the same, its own declared once; --help,
docs/options.md and the config all follow the table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from colbench.cli import docgen
from colbench.commands.p2p import options as p2p_options
from colbench.commands.p2p.config import P2PConfig, from_options
from colbench.commands.p2p.options import DEFAULT_PASSES
from colbench.config import options
from tests.conftest import run_main


def _values(**given: object) -> dict[str, object]:
    return {**{opt.name: opt.default for opt in p2p_options.table()}, **given}


def test_shared_options_are_sweeps_own_rows() -> None:
    sweep = {opt.name: opt for opt in options.table()}
    for name in p2p_options.SHARED:
        shared = next(opt for opt in p2p_options.table() if opt.name == name)
        # The same flag, type, default and parser; only help said of sizes is said of pairs.
        assert dataclasses.replace(shared.spec, help="") == dataclasses.replace(
            sweep[name].spec, help=""
        )
        assert (shared.type, shared.default) == (sweep[name].type, sweep[name].default)
        assert (shared is sweep[name]) == (name not in p2p_options.SHARED_HELP)
    # p2p's --help speaks of pairs and passes, never of a sweep's sizes.
    repeat = next(opt for opt in p2p_options.table() if opt.name == "repeat")
    assert "pair" in repeat.spec.help and "sweep" not in repeat.spec.help
    own = {opt.spec.flags[0] for opt in p2p_options.own()}
    # --repeat means what sweep's does, with a default of its own (the verdict's passes).
    mine = {"plot", "repeat"}
    assert not own & {opt.spec.flags[0] for opt in options.table() if opt.name not in mine}
    repeat = next(opt for opt in p2p_options.own() if opt.name == "repeat")
    assert repeat.default == DEFAULT_PASSES == P2PConfig().repeat > 1


def test_help_lists_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "p2p", "--help")
    assert code == 0
    for opt in p2p_options.table():
        for flag in opt.spec.flags:
            assert flag.split("/")[0] in out, flag


def test_docs_list_every_option() -> None:
    text = docgen.options_markdown()
    p2p_part = text[text.index("# Options of `colbench p2p`") :]
    for opt in p2p_options.table():
        assert f"`{opt.spec.flags[0]}`" in p2p_part, opt.name


def test_defaults_make_the_default_config() -> None:
    cfg = from_options(_values())
    assert cfg == P2PConfig()


def test_values_are_parsed_and_named_as_the_config_names_them() -> None:
    cfg = from_options(
        _values(size="16M", latency_size="1K", threshold=10.0, fail_below=30.0, out="o"),
        ("colbench", "p2p"),
    )
    assert (cfg.size_bytes, cfg.latency_bytes) == (16 * 1024**2, 1024)
    assert (cfg.bw_pct, cfg.fail_below_pct, cfg.out_dir) == (10.0, 30.0, "o")
    assert cfg.command_line == ("colbench", "p2p")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (["--backend", "mpi"], "bad --backend 'mpi': use auto, gloo, nccl"),
        (["--timeout", "-1"], "--timeout must be positive, got -1"),
        (["--init-timeout", "-1"], "--init-timeout must be positive, got -1"),
        (["-n", "0"], "--iters must be at least 1, got 0"),
        (["--repeat", "0"], "--repeat must be at least 1, got 0"),
        (["-w", "-1"], "--warmup must be 0 or more, got -1"),
        (["--threshold", "0"], "--threshold is a percentage above 0"),
        (["--size", "12Q"], "12Q"),
        (["--iters", "x"], "--iters"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], given: list[str], message: str
) -> None:
    code, _, err = run_main(capsys, "p2p", *given)
    assert code == 2, err
    assert err.startswith("colbench: error: ") and err.count("\n") == 1, err
    assert message in err


def test_help_says_what_the_measurement_and_the_verdict_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # It said osu_bw sent "one message" and the verdict "takes each pair's median" against
    # "the median of all links": the code sends a window (8 on NCCL) and judges the passes.
    code, out, _ = run_main(capsys, "p2p", "--help")
    text = " ".join(out.split())
    assert code == 0
    assert "osu_bw: one message" not in text and "takes each pair's median" not in text
    assert "8 on NCCL and 1 on gloo" in text and "judges the passes themselves" in text
    assert "median of the other links' bandwidth" in text
    assert "says in one line that the check passed" in text


@pytest.mark.parametrize("flag", ["--per-node", "--rail"])
def test_per_node_and_rail_on_spawned_ranks_are_refused_before_the_run_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ranks spawned here all run on this node: the ranks refused it once they met, after
    # the run directory, meta.json and their logs were written into --out.
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "run"
    code, _, err = run_main(capsys, "p2p", "--nprocs", "4", "--backend", "gloo", flag,
                            "--out", str(out))  # fmt: skip
    assert code == 2 and f"{flag} pairs ranks of different nodes" in err, err
    assert "all 4 ranks run on one node" in err and not out.exists()
