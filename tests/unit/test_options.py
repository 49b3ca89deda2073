"""The options table is the one declaration: --help, suites and docs all follow it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from colbench.cli import docgen
from colbench.config import option_table, options, suite
from colbench.errors import UsageError
from tests.conftest import run_main

#: A valid YAML value per kind of option, for options whose default is None.
SAMPLES: dict[str, Any] = {
    "sizes": ["1K", "4K"],
    "minbytes": "1K",
    "maxbytes": "64K",
    "factor": 4,
    "step": "1K",
    "nprocs": 2,
    "timeout": 60,
    "init_timeout": 30,
    "group_size": 2,
    "split": "mod:2",
    "out": "results/x",
    "progress": False,
    "memory_limit": "512M",
    "time_budget": 0.5,
    "env": {"NCCL_ALGO": ["Ring", "Tree"]},
    "python": "main=/usr/bin/python3,pr=/usr/bin/python3",
    "ceiling_gbps": 12.5,
    "contend": "all_to_all:1M",
    "output_file": "report.json",
    "cta_policy": "0,1",
}


def test_sweep_help_lists_every_flag_and_alias(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "sweep", "--help")
    assert code == 0
    shown = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", out))
    for opt in options.table():
        for flag in opt.spec.flags:
            for name in flag.split("/"):
                assert name in shown, f"{name} ({opt.name}) is missing from colbench sweep --help"


def test_sweep_help_shows_the_table_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_main(capsys, "sweep", "--help")
    text = " ".join(out.split())
    for opt in options.table():
        if opt.default is not None and not isinstance(opt.default, bool):
            assert f"[default: {opt.default}]" in text, opt.name


def test_committed_docs_are_what_the_table_generates() -> None:
    committed = docgen.DOCS.read_text(encoding="utf-8")
    assert committed == docgen.options_markdown(), (
        "docs/options.md is stale: run `make docs` (python -m colbench.cli.docgen) and commit it"
    )


def test_the_generator_writes_every_option(tmp_path: Path) -> None:
    path = tmp_path / "options.md"
    assert docgen.main([str(path)]) == 0
    text = path.read_text(encoding="utf-8")
    for opt in options.table():
        assert f"| `{opt.spec.flags[0]}` |" in text, opt.name


def _sample(opt: option_table.Option) -> Any:
    return SAMPLES.get(opt.name, opt.default)


@pytest.mark.parametrize("opt", options.table(), ids=lambda o: o.name)
def test_suite_accepts_every_option_key(opt: option_table.Option) -> None:
    for key in opt.yaml_keys:
        for spelled in {key, key.replace("_", "-")}:
            text = yaml.safe_dump({spelled: _sample(opt)})
            values = suite.parse(text, "s.yaml")
            assert list(values) == [opt.name], (spelled, values)


def test_every_option_has_a_sample_or_a_default() -> None:
    """A new option with no default needs a sample above, or the test above tests nothing."""
    for opt in options.table():
        assert _sample(opt) is not None, f"add a YAML sample for {opt.name} to SAMPLES"


def test_suite_values_mean_what_the_flags_mean() -> None:
    text = yaml.safe_dump({o.name: _sample(o) for o in options.table()})
    values = suite.parse(text, "s.yaml")
    merged = options.merge(values, {})
    assert merged.sizes == "1K,4K" and merged.env == ["NCCL_ALGO=Ring,Tree"]
    assert merged.check == 1 and merged.progress is False and merged.factor == 4.0


def test_suite_rejects_unknown_keys() -> None:
    with pytest.raises(UsageError, match=r"^s.yaml line 2: unknown key 'iter' \(did you mean"):
        suite.parse("op: all_reduce\niter: 3\n", "s.yaml")


def test_cli_rejects_unknown_suite_keys_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("op: all_reduce\nbogus_key: 1\n")
    for argv in (["run", str(path)], ["sweep", "--config", str(path)]):
        code, _, err = run_main(capsys, *argv)
        assert code == 2
        assert err.count("\n") == 1 and err.startswith("colbench: error: "), err
        assert "unknown key 'bogus_key'" in err


def test_flags_override_the_file_and_env_merges_per_variable() -> None:
    file_values = {"iters": 7, "dtype": "float16", "env": ["A=1,2", "B=x"]}
    merged = options.merge(file_values, {"iters": 3, "env": ["B=y"]})
    assert merged.iters == 3 and merged.dtype == "float16"
    assert merged.env == ["A=1,2", "B=y"]
    assert options.merge({}, {}) == options.SweepOptions()


def _settled_tables() -> list[option_table.Option]:
    from colbench.commands.p2p.options import P2POptions

    rows = (*options.table(), *option_table.rows_of(P2POptions))
    return [opt for opt in rows if opt.spec.settled]


def test_a_settled_default_is_its_own_config_value() -> None:
    # config_values leaves a settled default unconverted: that is right only while the
    # converter would make the same value of it.
    settled = _settled_tables()
    assert {opt.name for opt in settled} >= {"register", "splits"}
    for opt in settled:
        assert opt.spec.convert is not None
        assert opt.spec.convert(opt.default) == opt.default, opt.name


def test_a_settled_option_given_another_value_is_converted() -> None:
    rows = options.table()
    values = {opt.name: opt.default for opt in rows} | {"register": "2", "splits": "UNIFORM"}
    converted = option_table.config_values(rows, values)
    assert converted["register"] == "symmetric"
    assert converted["splits"] == "uniform"
    with pytest.raises(UsageError, match="bad --register"):
        option_table.config_values(rows, values | {"register": "3"})
