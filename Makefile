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
# `make test` runs the tests marked `serial` (namespaces, shaped links, tight wall-clock
# bounds) alone, then the rest over this many pytest-xdist workers (0: in one process),
# a test file per worker at a time so module fixtures run once. Many tests wait on
# timeouts and rank processes: two workers keep both cores of a 2-core machine busy.
PYTEST_WORKERS ?= 2
# The gloo smoke suite the regression gate runs (configs/smoke-cpu.yaml once suites land).
SMOKE_FLAGS ?= --op all --sizes 1K-256K --backend gloo --nprocs 2 -n 20 -w 5
SMOKE_BASELINE ?= results/baselines/gloo-smoke
# Loose enough for this shared 2-core machine, where a row's median bandwidth at 64K-256K
# dropped by up to 95% between identical runs (docs/gate.md, "`make test`"):
# correctness, every row present, and no collapse of bandwidth (20x, shown real by the
# samples against the pooled baseline). A quiet CI machine deserves tighter checks; see
# .github/workflows/colbench-gate.yml.
SMOKE_GATE ?= --check busbw_gbps:-95% --min-size 64K

.PHONY: install run test lint format unit dist gpu bench clean gate-smoke gate-baseline docs

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

lint: install
	$(PY) -m ruff check colbench tests benchmarks
	$(PY) -m ruff format --check colbench tests benchmarks
	$(PY) -m mypy

format: install
	$(PY) -m ruff format colbench tests benchmarks
	$(PY) -m ruff check --fix colbench tests benchmarks

# docs/options.md is generated from the options table (colbench/options.py); a unit test
# fails while the committed file is stale.
docs: install
	$(PY) -m colbench.docgen

unit: install
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

dist: install
	$(PY) -m pytest tests/dist $(PYTEST_ARGS)

# GPU nodes often have torch with CUDA but no package registry: where python3 already
# has colbench's dependencies, run from the checkout (PYTHONPATH=.) without installing.
GPU_DEPS := import torch, typer, pandas, matplotlib, yaml, rich, pytest
gpu:
	@if $(PYTHON) -c "$(GPU_DEPS)" >/dev/null 2>&1; then \
		PYTHONPATH=$(CURDIR) $(PYTHON) -m pytest tests/gpu -v -rs $(PYTEST_ARGS); \
	else \
		$(MAKE) install && $(PY) -m pytest tests/gpu -v -rs $(PYTEST_ARGS); \
	fi

# Both pytest runs always run; a serial run that selects nothing (exit 5) is no failure.
test: lint gate-smoke
	@status=0; \
	$(PY) -m pytest tests -m serial -p no:xdist $(PYTEST_ARGS) || [ $$? -eq 5 ] || status=1; \
	$(PY) -m pytest tests -m "not serial" -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS) \
		|| status=1; \
	exit $$status

# Figures with their targets (issues #6, #14); each script prints PASS/FAIL per figure.
BENCHMARKS ?= harness_overhead startup cli_startup startup_hangs sweep_walltime memory_rss stability import_and_fit suite_walltime
bench: install
	@status=0; for b in $(BENCHMARKS); do \
		echo "== benchmarks/$$b.py"; $(PY) benchmarks/$$b.py || status=1; \
	done; exit $$status

# Sweep the smoke suite and gate it against the committed baseline. The gate runs even
# when the sweep fails, so its report says which rows are wrong or missing.
gate-smoke: install
	@tmp=$$(mktemp -d); \
	$(PY) -m colbench sweep $(SMOKE_FLAGS) --repeat 3 --no-table --out $$tmp/run; sweep=$$?; \
	$(PY) -m colbench gate $(SMOKE_BASELINE) $$tmp/run $(SMOKE_GATE) \
		> $$tmp/gate.txt; gate=$$?; \
	if [ $$gate -ne 0 ]; then cat $$tmp/gate.txt; else tail -n 1 $$tmp/gate.txt; fi; \
	rm -rf $$tmp; [ $$sweep -eq 0 ] && [ $$gate -eq 0 ]

# Re-measure the smoke baseline: three runs a minute apart, pooled, so the baseline
# holds the machine's run-to-run variation and not one run's mood. Commit the result.
gate-baseline: install
	@tmp=$$(mktemp -d); set -e; \
	for i in 1 2 3; do \
		$(PY) -m colbench sweep $(SMOKE_FLAGS) --repeat 3 --no-table --out $$tmp/run$$i; \
		[ $$i -eq 3 ] || sleep 60; \
	done; \
	$(PY) -m colbench gate $(SMOKE_BASELINE) $$tmp/run1 $$tmp/run2 $$tmp/run3 --update-baseline \
		> /dev/null; \
	rm -rf $$tmp

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
