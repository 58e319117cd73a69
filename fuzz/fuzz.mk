# fuzz/fuzz.mk - coverage-guided fuzzing of the Rust library's completion handling, included by the
# top-level Makefile. Needs clang with libFuzzer (Debian: clang + libclang-rt-dev; deps.sh group fuzz).
#
#   make fuzz         long run: FUZZ_TIME seconds (default 600), corpus kept in $(FUZZ_DIR)/corpus
#   make fuzz-smoke   short run for `make test` (FUZZ_SMOKE_RUNS inputs, default 20000, < 30 s)
#
# The Rust cdylib is rebuilt with sancov instrumentation (8-bit counters, PC table, CMP tracing),
# debug assertions and panic=abort in its own target dir, so libFuzzer sees coverage of the Rust code
# and a panic anywhere (also on a worker thread) is a crash. The harness dlopens it by path.

CLANG          ?= clang
FUZZ_DIR       := $(TARGET_DIR)/fuzz
FUZZ_TRIPLE    := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
FUZZ_LIB       := $(FUZZ_DIR)/$(FUZZ_TRIPLE)/release/libos_transport.so
FUZZ_BIN       := $(FUZZ_DIR)/cr_fuzz
FUZZ_TIME      ?= 600
FUZZ_SMOKE_RUNS ?= 20000
FUZZ_RUSTFLAGS := -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=3 \
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
  -Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions=on -Cpanic=abort

.PHONY: fuzz fuzz-smoke fuzz-build

fuzz-build: build
	RUSTFLAGS="$(FUZZ_RUSTFLAGS)" $(CARGO) build --release -p os-transport --lib \
	  --target $(FUZZ_TRIPLE) --target-dir $(FUZZ_DIR)
	$(CLANG) -g -O1 -fsanitize=fuzzer,address -rdynamic \
	  -Iinclude -Iurma-sys/include -Iurma-loopback/include \
	  -DOST_FUZZ_LIB_DEFAULT='"$(FUZZ_LIB)"' fuzz/cr_fuzz.c \
	  -L$(PROFILE_DIR) -l:liburma.so.0 -ldl -o $(FUZZ_BIN)

fuzz: fuzz-build
	mkdir -p $(FUZZ_DIR)/corpus
	ASAN_OPTIONS=detect_leaks=0 $(FUZZ_BIN) -max_total_time=$(FUZZ_TIME) -timeout=10 \
	  -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus fuzz/seeds

fuzz-smoke: fuzz-build
	rm -rf $(FUZZ_DIR)/smoke-corpus && mkdir -p $(FUZZ_DIR)/smoke-corpus
	ASAN_OPTIONS=detect_leaks=0 $(FUZZ_BIN) -runs=$(FUZZ_SMOKE_RUNS) -seed=9 -timeout=10 \
	  -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/smoke-corpus fuzz/seeds
