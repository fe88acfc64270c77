# One entry point for the project's jobs. `make run` is the main job, `make test` the whole suite.
NODE_MODULES := node_modules/.installed

.PHONY: all install build test unit e2e run bench clean lint

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

unit: build
	$(JEST) --testPathIgnorePatterns='/e2e/|/node_modules/|/dist/'

e2e: build
	$(JEST) e2e/

run: build
	node dist/scripts/run.js

bench: build
	npm run bench

clean:
	rm -rf dist proto/gen native/build
