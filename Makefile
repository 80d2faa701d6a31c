# Two entry points: `make demo` (install + run the embedded default) and `make test`.
# Both create .venv on first use and are safe to run again.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CPU wheel of torch 2.13.0 (on these machines it lies in pip's find-links): installed before
# the package so no resolver ever reaches for a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0

.PHONY: install demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/align-kit train

test: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check align_kit tests benchmarks && $(BIN)/ruff format --check align_kit tests benchmarks

bench: install
	$(BIN)/python benchmarks/trainer_overhead.py && $(BIN)/python benchmarks/component_overhead.py

clean:
	rm -rf $(VENV) outputs
