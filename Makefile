# colbench developer commands. `make run` and `make test` work from a clean clone.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch is installed only when no torch is importable; a machine
# whose python3 already has torch (a CUDA build, say) shares it with the venv instead.
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
VENV_FLAGS ?= $(shell $(PYTHON) -c "import torch" >/dev/null 2>&1 && echo --system-site-packages)
PYTEST_ARGS ?=
# `make test` runs the tests marked `serial` (tight wall-clock bounds) alone, then the
# rest over this many pytest-xdist workers (0: in one process), a test file per worker at
# a time so module fixtures run once, with `make lint` beside them: nothing but the serial
# group needs the machine to itself. Many tests wait on timeouts and rank processes, so a
# third worker fills the cores two leave idle: on a 2-core machine the rest took 230 s
# with three against 268 s with two (2026-11-29).
PYTEST_WORKERS ?= 3
# The tests marked `fabric` (network namespaces with shaped links, acceptance figures
# compared across runs: minutes) are `make test-fabric`'s, one at a time; `.ci/run` runs
# them after `make test`. A new test runs in `make test`'s parallel group unless marked.

# The CPU smoke gate: configs/smoke-cpu.yaml is the suite and scripts/ci-gate.sh the gate
# (its checks, the baseline window); the Makefile, the workflow and baseline re-measurement
# hold no sweep flag of their own (tests/unit/test_smoke_definition.py keeps it so).
SMOKE_SUITE ?= configs/smoke-cpu.yaml
SMOKE_BASELINE ?= results/baselines/gloo-smoke

.PHONY: install run test test-fabric lint format unit dist gpu bench clean gate-smoke gate-baseline gate-ab docs gpu-wheels

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	@if $(PY) -c "import torch" >/dev/null 2>&1; then \
		echo "torch $$($(PY) -c 'import torch; print(torch.__version__)') already installed: keeping it"; \
	else \
		$(PY) -m pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"; \
	fi
	$(PY) -m pip install -q -e ".[dev]"
	@touch $@

run: install
	$(PY) -m colbench sweep --op all --sizes 1K-1M --plot

# mypy keeps its cache beside the user's other caches, not in the checkout: a fresh clone
# then checks only what differs from the last checkout checked (seconds, where a cold
# cache takes 30-110 s on a busy 2-core machine). A checkout of another commit sharing it
# is what switching branches is to mypy: it rechecks every module whose source differs
# from the cached one (size, mtime, then hash), and what depends on its interface.
MYPY_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/colbench/mypy
lint: install
	$(PY) -m ruff check colbench tests benchmarks
	$(PY) -m ruff format --check colbench tests benchmarks
	$(PY) -m mypy --cache-dir "$(MYPY_CACHE)"

format: install
	$(PY) -m ruff format colbench tests benchmarks
	$(PY) -m ruff check --fix colbench tests benchmarks

# docs/options.md is generated from the options table (colbench/config/options.py), and
# docs/schema.md from the tables' row types (colbench/results/); unit tests fail while either
# committed file is stale.
docs: install
	$(PY) -m colbench.cli.docgen
	$(PY) -m colbench.results.tables --markdown > docs/schema.md

unit: install
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

dist: install
	$(PY) -m pytest tests/dist $(PYTEST_ARGS)

# GPU nodes often have torch with CUDA but no package registry: where python3 already
# has colbench's dependencies, run from the checkout (PYTHONPATH=.) without installing.
# The emulated-node tests (several NCCL ranks on one GPU) run first: on a machine lent for
# a short while they are the ones that matter most. -s shows their figures.
GPU_DEPS := import torch, typer, pandas, matplotlib, yaml, rich, pytest
GPU_TESTS := tests/gpu/test_emulated_nccl.py tests/gpu
gpu:
	@if $(PYTHON) -c "$(GPU_DEPS)" >/dev/null 2>&1; then \
		PYTHONPATH=$(CURDIR) $(PYTHON) -m pytest $(GPU_TESTS) -v -s -rs $(PYTEST_ARGS); \
	else \
		$(MAKE) install && $(PY) -m pytest $(GPU_TESTS) -v -s -rs $(PYTEST_ARGS); \
	fi

# nccl4py and what it needs (about 18 MB) for a GPU machine without a package index, into
# a git-ignored folder to carry there and install with --no-index (docs/gpu.md, "The
# direct NCCL engine"). GPU_PYTHON and CUDA_MAJOR are the GPU machine's.
GPU_PYTHON ?= 3.11
CUDA_MAJOR ?= 12
GPU_WHEELS ?= .gpu/wheels
gpu-wheels: install
	$(PY) -m pip download --no-deps --only-binary=:all: --python-version $(GPU_PYTHON) \
		--platform manylinux_2_28_x86_64 -d $(GPU_WHEELS) "nccl4py>=0.6,<0.7" "cuda-core~=1.0" \
		"cuda-pathfinder>=1.5.4,<2" "cuda-bindings~=$(CUDA_MAJOR).0"

# Bytecode is written (to the git-ignored __pycache__ folders) even where
# PYTHONDONTWRITEBYTECODE is set, as on this project's shared machines: without it every
# interpreter a test starts compiles colbench again (0.1 s of CPU a command, hundreds of
# commands) and every pytest process rewrites every test module (3 s a worker).

# Every part always runs, so one run shows every failure; a group that selects nothing
# (exit 5) is no failure. Lint's output comes after the tests', in one piece.
test: install
	@export PYTHONDONTWRITEBYTECODE=; \
	status=0; lint_log=$$(mktemp); \
	$(PY) -m pytest tests -m "serial and not fabric" -p no:xdist $(PYTEST_ARGS) \
		|| [ $$? -eq 5 ] || status=1; \
	$(MAKE) --no-print-directory lint > $$lint_log 2>&1 & lint_pid=$$!; \
	$(PY) -m pytest tests -m "not serial and not fabric" -n $(PYTEST_WORKERS) --dist loadfile \
		$(PYTEST_ARGS) || [ $$? -eq 5 ] || status=1; \
	wait $$lint_pid || status=1; cat $$lint_log; rm -f $$lint_log; \
	exit $$status

test-fabric: install
	$(PY) -m pytest tests -m fabric -p no:xdist $(PYTEST_ARGS)

# Figures with their targets (issues #6, #14); each script prints PASS/FAIL per figure.
BENCHMARKS ?= harness_overhead startup cli_startup startup_hangs sweep_walltime memory_rss stability import_and_fit suite_walltime fuzz_inputs faults
bench: install
	@status=0; for b in $(BENCHMARKS); do \
		echo "== benchmarks/$$b.py"; $(PY) benchmarks/$$b.py || status=1; \
	done; exit $$status

# Measure the smoke suite and gate it against the committed baseline (docs/gate.md):
# correctness and presence always; performance only on the machine that measured the
# baseline (its fingerprint in meta.json) and where the samples can see a slowdown. On
# any other machine the last line says "performance not comparable" and why.
gate-smoke: install
	@tmp=$$(mktemp -d); \
	PY=$(PY) SMOKE_SUITE=$(SMOKE_SUITE) scripts/ci-gate.sh $(SMOKE_BASELINE) $$tmp; status=$$?; \
	rm -rf $$tmp; exit $$status

# Re-measure the smoke baseline: BASELINE_RUNS runs of the suite half a minute apart,
# pooled, so the baseline holds the machine's run-to-run drift (the gate's drift test needs
# at least 5 runs; scripts/ci-gate.sh keeps as many as this). Run i measures beside
# i mod (BASELINE_BUSY + 1) busy loops of our own, as benchmarks/gate_power.py does: runs
# minutes apart on a quiet machine miss the load a shared runner sees, and a baseline
# without it would call that load a regression. Commit it.
BASELINE_RUNS ?= 10
BASELINE_BUSY ?= 2
gate-baseline: install
	@tmp=$$(mktemp -d); set -e; runs=""; pids=""; \
	trap '[ -z "$$pids" ] || kill $$pids 2>/dev/null' EXIT; \
	for i in $$(seq 1 $(BASELINE_RUNS)); do \
		for j in $$(seq 1 $$((i % ($(BASELINE_BUSY) + 1)))); do \
			sh -c 'while :; do :; done' & pids="$$pids $$!"; \
		done; \
		$(PY) -m colbench run $(SMOKE_SUITE) --no-table --out $$tmp/run$$i; \
		[ -z "$$pids" ] || kill $$pids; pids=""; \
		runs="$$runs $$tmp/run$$i"; \
		[ $$i -eq $(BASELINE_RUNS) ] || sleep 30; \
	done; \
	rm -rf $(SMOKE_BASELINE); \
	$(PY) -m colbench gate $(SMOKE_BASELINE) $$runs --update-baseline \
		--keep $(BASELINE_RUNS) > /dev/null; \
	rm -rf $$tmp

# The interleaved A/B gate (docs/gate.md): this checkout's colbench against BASE's (a git
# ref; CI gives the pull request's merge base), each in its own environment, measured in
# one run taking turns (configs/ab-cpu.yaml) and judged pair by pair by the paired gate.
# BASE's environment is built in AB_OUT/base-<sha> and kept for the next run. A base that
# cannot run interleaved is no verdict: it says so and gates the smoke suite against the
# stored baseline instead. Exit 0 pass, 1 fail, 5 inconclusive.
AB_OUT ?= .gate-ab
gate-ab: install
	@if [ -z "$(BASE)" ]; then echo "usage: make gate-ab BASE=<git ref>" >&2; exit 2; fi
	@PY=$(PY) STORED_BASELINE=$(SMOKE_BASELINE) $(if $(TORCH_INDEX),TORCH_INDEX=$(TORCH_INDEX)) \
		scripts/gate-ab.sh "$(BASE)" $(AB_OUT)

clean:
	rm -rf $(VENV) $(AB_OUT) .pytest_cache .mypy_cache .ruff_cache *.egg-info
