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

.PHONY: install run test lint format unit dist gpu bench clean

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

unit: install
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

dist: install
	$(PY) -m pytest tests/dist $(PYTEST_ARGS)

gpu: install
	$(PY) -m pytest tests/gpu $(PYTEST_ARGS)

test: lint
	$(PY) -m pytest tests $(PYTEST_ARGS)

# Figures with their targets (issue #6); each script prints PASS/FAIL per figure.
BENCHMARKS ?= harness_overhead startup sweep_walltime memory_rss stability import_and_fit
bench: install
	@status=0; for b in $(BENCHMARKS); do \
		echo "== benchmarks/$$b.py"; $(PY) benchmarks/$$b.py || status=1; \
	done; exit $$status

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
