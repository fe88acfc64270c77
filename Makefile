# One entry point for the project's jobs. `make run` is the main job, `make test` the whole suite.
NODE_MODULES := node_modules/.installed

.PHONY: all install build test test-python pytest-python test-sglang pytest-sglang unit e2e run bench clean lint

all: build

$(NODE_MODULES): package.json package-lock.json
	npm ci
	touch $@

install: $(NODE_MODULES)

build: install
	npm run build

# Unit tests (pure cores, no sockets) and e2e tests (real processes on 127.0.0.1).
# --forceExit is a safety net: a test that fails half-way may leave a child process behind,
# and CI must then report the failure instead of waiting forever for jest to exit.
JEST := npm run jest -- --ci --forceExit

test: build
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
	rm -rf dist proto/gen native/build $(PY_VENV) $(SGL_VENV)
