# One entry point for the project's jobs. `make run` is the main job, `make test` the whole suite.
NODE_MODULES := node_modules/.installed

.PHONY: all install build typecheck test test-python pytest-python unit e2e run bench clean lint

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

# Unit tests (pure cores, no sockets) and e2e tests (real processes on 127.0.0.1).
# --forceExit is a safety net: a test that fails half-way may leave a child process behind,
# and CI must then report the failure instead of waiting forever for jest to exit.
JEST := npm run jest -- --ci --forceExit

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

unit: build
	$(JEST) --testPathIgnorePatterns='/e2e/|/node_modules/|/dist/'

e2e: build
	$(JEST) e2e/

run: build
	node dist/scripts/run.js

bench: build
	npm run bench

clean:
	rm -rf dist proto/gen native/build $(PY_VENV)
