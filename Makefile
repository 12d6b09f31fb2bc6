# isostack: the two user commands (`make run`, `make test`) and developer helpers.
# Meson does the building; this file only sequences dependencies, builds and runs.

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
CONFIG     ?= examples/cluster.yaml
STATE_DIR  ?= var
LISTEN     ?= 127.0.0.1:8470

.PHONY: all build build-asan deps test-deps run run-ib test test-unit fuzz lint format clean

all: build

deps:
	@scripts/deps.sh run

test-deps:
	@scripts/deps.sh test

$(BUILD)/build.ninja:
	meson setup $(BUILD) --buildtype=debugoptimized

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

build-asan: test-deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)

# Installs what is missing, builds, and serves the example cluster in the
# foreground: isostackd and one sim node agent for every node (scripts/run.sh).
run: build
	BUILD=$(BUILD) CONFIG=$(CONFIG) STATE_DIR=$(STATE_DIR) LISTEN=$(LISTEN) scripts/run.sh

# The InfiniBand path without hardware: ibsim + OpenSM on examples/cluster-ib.yaml's
# GUIDs, isostackd with the opensm driver in the foreground (scripts/run-ib.sh).
run-ib:
	@scripts/deps.sh run-ib
	$(MAKE) --no-print-directory build
	BUILD=$(BUILD) LISTEN=$(LISTEN) scripts/run-ib.sh

# Everything the tests need, then every test in the plain and the ASan+UBSan build.
test: test-deps
	$(MAKE) --no-print-directory build build-asan
	meson test -C $(BUILD) --print-errorlogs --num-processes 2
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		meson test -C $(ASAN_BUILD) --print-errorlogs --num-processes 2 --timeout-multiplier 3

test-unit: build
	meson test -C $(BUILD) --suite unit --print-errorlogs

# libFuzzer harnesses over every parser (tests/fuzz, docs/fuzzing.md), each
# run for FUZZ_SECONDS; FUZZ_HARNESSES picks some (default: all). clang's
# warnings are errors here too, as gcc's are everywhere else.
$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) --buildtype=debugoptimized -Dfuzzing=true -Dtests=disabled \
		-Db_sanitize=address,undefined -Db_lundef=false

fuzz: test-deps $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD)
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_HARNESSES)

# cppcheck does not understand __attribute__((cleanup)), so its leak checks
# would only report our _cleanup_ variables; leaks are LeakSanitizer's job in
# the ASan build that `make test` runs.
lint: build
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
		--suppress=missingIncludeSystem --suppress=resourceLeak --suppress=memleak \
		-D__GNUC__ -I include -I src src
	clang-tidy --quiet --extra-arg=-Wno-unknown-warning-option -p $(BUILD) $$(find src -name '*.c')

format:
	clang-format -i $$(find src include tests bench -name '*.[ch]')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
