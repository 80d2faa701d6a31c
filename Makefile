# Two entry points: `make demo` (install + run the embedded default) and `make test`.
# Both create .venv on first use and are safe to run again.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CPU wheel of torch 2.13.0 (on these machines it lies in pip's find-links): installed before
# the package so no resolver ever reaches for a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0

.PHONY: install install-sandbox demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP) install-sandbox

# The code_exec sandbox uses Debian's bubblewrap: installed with apt-get when root and missing. Never fails the
# build: without bwrap the sandbox falls back to a plain process with rlimits, and the last line says which.
install-sandbox: $(STAMP)
	@if ! command -v bwrap >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "sandbox: installing Debian's bubblewrap"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
			|| (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq bubblewrap >/dev/null 2>&1) \
			|| echo "sandbox: apt-get could not install bubblewrap"; \
	fi
	@$(BIN)/python -c "from align_kit.sandbox import isolation; print('sandbox:', isolation())"

demo: install
	$(BIN)/align-kit train

test: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check align_kit tests benchmarks && $(BIN)/ruff format --check align_kit tests benchmarks

bench: install
	$(BIN)/python benchmarks/trainer_overhead.py && $(BIN)/python benchmarks/component_overhead.py
	$(BIN)/python benchmarks/sandbox_overhead.py

clean:
	rm -rf $(VENV) outputs
