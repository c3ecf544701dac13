# The README's two commands: `make run` and `make test`.
BUILD    ?= build
SANITIZE ?= OFF
JOBS     ?= 2
PORT     ?= 8080
FUZZ_SECONDS ?= 10
FUZZ_BUILD   ?= build-fuzz

.PHONY: all deps build run test npm-tools bench bench-nodes fuzz clean

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

# PostgreSQL against SQLite, and one node against two (docs/BENCHMARKS.md).
bench-nodes: build
	@scripts/install-deps.sh --bench
	@python3 bench/nodes.py

# Every libFuzzer driver for FUZZ_SECONDS each, on a clang build with the
# whole library instrumented (docs/fuzzing.md); fails on a crash, leak or
# timeout.
fuzz:
	@scripts/install-deps.sh --fuzz
	@cmake -S . -B $(FUZZ_BUILD) -DBUILD_FUZZER=ON -DCMAKE_C_COMPILER=clang >/dev/null
	@cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzzers
	@fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf build build-asan $(FUZZ_BUILD)
