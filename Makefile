# The README's two commands: `make run` and `make test`.
BUILD    ?= build
SANITIZE ?= OFF
JOBS     ?= 2
PORT     ?= 8080

.PHONY: all deps build run test npm-tools bench clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DSANITIZE=$(SANITIZE) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

npm-tools: deps
	@scripts/npm-tools.sh

run: build
	@mkdir -p var
	@scripts/demo-banner.sh $(PORT)
	@exec ./$(BUILD)/revopsd --demo --data-dir ./var --listen 127.0.0.1:$(PORT)

test: build npm-tools
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 600

bench: build
	@scripts/install-deps.sh --bench
	@bench/run.sh

clean:
	rm -rf build build-asan
