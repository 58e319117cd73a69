# bench/bench.mk - included by the top Makefile (-include bench/bench.mk).
#
#   make bench         full benchmark (~7-10 min): requests/s, latency, callgrind instructions,
#                      heap allocations, bandwidth, paced-load CPU per pair, idle CPU;
#                      target/bench/report.md, report.csv, chart.png
#   make bench-quick   callgrind instruction ratio + allocation counts, one paced cell's CPU ratio
#                      (reported; 1.5-3 min once built); target/bench/quick.md, quick.csv.
#                      Part of `make test`.
#
# Both build the release profile (the Rust library, the loopback, ostbench and its -O2 copy of the
# C reference). They exit non-zero only when a measurement broke, never on a missed target.
# BENCH_ARGS is passed to ostbench (e.g. BENCH_ARGS="--reps 5 --secs 0.5 --paced-reps 5").

BENCH_PROFILE_DIR := $(TARGET_DIR)/release
BENCH_ENV         := LD_LIBRARY_PATH=$(BENCH_PROFILE_DIR)$(if $(LD_LIBRARY_PATH),:$(LD_LIBRARY_PATH))
BENCH_OUT         ?= $(TARGET_DIR)/bench

.PHONY: bench bench-quick bench-build

bench-build:
	$(CARGO) build --release -p os-transport -p urma-loopback -p os-transport-bench
	@test -e $(BENCH_PROFILE_DIR)/liburma.so.0 || { echo "missing $(BENCH_PROFILE_DIR)/liburma.so.0 (loopback)"; exit 1; }

bench: bench-build
	@./packaging/deps.sh check bench || echo "bench: without gnuplot the chart is skipped (make deps)"
	$(BENCH_ENV) $(BENCH_PROFILE_DIR)/ostbench full --out $(BENCH_OUT) $(BENCH_ARGS)

bench-quick: bench-build
	$(BENCH_ENV) $(BENCH_PROFILE_DIR)/ostbench quick --out $(BENCH_OUT) $(BENCH_ARGS)
