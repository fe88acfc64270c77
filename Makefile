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
test: build
	npm run jest -- --ci

unit: build
	npm run jest -- --ci --testPathIgnorePatterns=/e2e/ /node_modules/ /dist/

e2e: build
	npm run jest -- --ci e2e/

run: build
	node dist/scripts/run.js

bench: build
	npm run bench:master

clean:
	rm -rf dist proto/gen native/build
