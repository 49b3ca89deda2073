"""One smoke definition: configs/smoke-cpu.yaml is the suite everything runs.

The Makefile, the workflow, scripts/ci-gate.sh and the committed baseline must measure
that file and nothing else: a sweep flag of their own would let them drift apart.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from colbench.bench import ops
from colbench.config import suite

REPO = Path(__file__).resolve().parents[2]
SUITE = "configs/smoke-cpu.yaml"
#: Flags that choose what a sweep measures: none may appear outside the suite file.
SWEEP_FLAGS = re.compile(
    r"(?<![\w-])(--op|--sizes|--backend|--nprocs|--iters|--warmup|--repeat|--dtype|"
    r"--placement|-n|-w|-b|-e|-f)(?=[\s=])"
)


def _gate_recipes(makefile: str) -> str:
    """The text of the gate-smoke and gate-baseline targets and their variables."""
    keep = []
    for block in makefile.split("\n\n"):
        if "gate-smoke:" in block or "gate-baseline:" in block or "SMOKE_" in block:
            keep.append(block)
    return "\n\n".join(keep)


def test_the_suite_measures_every_op_and_the_performance_sizes() -> None:
    values = suite.load(REPO / SUITE)
    assert values["op"] == "all" and values["backend"] == "gloo"
    assert {"1K", "4M", "16M"} <= set(str(values["sizes"]).split(","))
    assert int(values["repeat"]) >= 5


def test_makefile_workflow_and_script_run_the_suite_file_only() -> None:
    makefile = _gate_recipes((REPO / "Makefile").read_text())
    workflow = (REPO / ".github" / "workflows" / "colbench-gate.yml").read_text()
    script = (REPO / "scripts" / "ci-gate.sh").read_text()
    assert f"SMOKE_SUITE ?= {SUITE}" in makefile
    assert "scripts/ci-gate.sh" in makefile and "scripts/ci-gate.sh" in workflow
    assert f"SMOKE_SUITE:-{SUITE}" in script and 'colbench run "$suite"' in script
    for name, text in (("Makefile", makefile), ("workflow", workflow), ("script", script)):
        assert "colbench sweep" not in text, name
        assert not SWEEP_FLAGS.findall(text), (name, SWEEP_FLAGS.findall(text))


def test_the_committed_baseline_was_measured_from_the_suite() -> None:
    baseline = REPO / "results" / "baselines" / "gloo-smoke"
    meta = json.loads((baseline / "meta.json").read_text())
    argv = meta["command_line"]
    assert argv[argv.index("run") + 1] == SUITE
    assert not SWEEP_FLAGS.findall(" ".join(argv))
    assert set(meta["machine"]) >= {"cpu_model", "cpu_cores", "memory_bytes", "kernel", "gpus"}
    # As many runs as `make gate-baseline` measures, so the smoke gate judges on drift.
    runs = re.search(r"^BASELINE_RUNS \?= (\d+)$", (REPO / "Makefile").read_text(), re.M)
    assert runs is not None and len(meta["pooled_runs"]) == int(runs.group(1))


def test_the_baseline_is_measured_at_varying_load() -> None:
    # Quiet runs minutes apart hold too little of a shared runner's drift (docs/gate.md):
    # the baseline's runs measure beside 0..BASELINE_BUSY busy loops of their own.
    makefile = (REPO / "Makefile").read_text()
    busy = re.search(r"^BASELINE_BUSY \?= (\d+)$", makefile, re.M)
    assert busy is not None and int(busy.group(1)) >= 1
    recipe = makefile.split("gate-baseline: install")[1].split("\n\n")[0]
    assert "$(BASELINE_BUSY)" in recipe and "while :; do :; done" in recipe
    assert "kill $$pids" in recipe  # the loops end with each run, and on a failure


def test_the_docs_name_the_suite_not_flags() -> None:
    for doc in ("README.md", "docs/gate.md"):
        text = (REPO / doc).read_text()
        assert SUITE in text, doc
        assert "--sizes 1K-256K" not in text, doc
    assert set(ops.BY_NAME)
