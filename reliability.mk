# reliability.mk - reliability targets: stress, faults, fuzzed CRs, memory and race checkers (include from the top-level Makefile with `-include reliability.mk`).
#
#   make reliability-check   memcheck + helgrind (both gating) + fuzz smoke; part of `make test`
#   make reliability-memcheck  C consumer (both modes) and the fuzz scenarios (fuzz/seeds) under valgrind memcheck:
#                            fails on any error or any byte definitely/indirectly lost
#   make reliability-helgrind  the fuzz scenarios under helgrind against the valgrind-annotations build
#                            of the library: fails on any report with an os_transport frame (HELGRIND_STRICT=0: report only)
#   make stress              long variants: 8 threads x 10 000 pairs with faults, and 10^7 fuzzed CRs (release)
#   make fuzz / fuzz-smoke   libFuzzer target (fuzz/fuzz.mk)
#
# The short variants of the Rust suites (tests/reliability_*.rs) run with every `cargo test`.

REL_DIR        := $(TARGET_DIR)/reliability
REL_CC         ?= cc
VALGRIND       ?= valgrind
HELGRIND_STRICT ?= 1
STRESS_REQS    ?= 10000
STRESS_FUZZ_CRS ?= 10000000
MEMCHECK       := $(VALGRIND) -q --leak-check=full --show-leak-kinds=definite,indirect \
                  --errors-for-leak-kinds=definite,indirect --error-exitcode=99

.PHONY: reliability-check reliability-memcheck reliability-helgrind reliability-bins stress

-include fuzz/fuzz.mk

reliability-bins: build
	mkdir -p $(REL_DIR)/lib
	ln -sf $(PROFILE_DIR)/libos_transport.so $(REL_DIR)/lib/libos_transport.so
	ln -sf $(PROFILE_DIR)/libos_transport.so $(REL_DIR)/lib/libos_transport.so.1
	$(REL_CC) -g -O1 -std=gnu99 -Wall -Werror -Iinclude -Iurma-sys/include -Iurma-loopback/include \
	  -DOST_FUZZ_LIB_DEFAULT='"$(PROFILE_DIR)/libos_transport.so"' fuzz/cr_fuzz.c fuzz/replay_main.c \
	  -L$(PROFILE_DIR) -l:liburma.so.0 -ldl -lpthread -o $(REL_DIR)/replay
	$(REL_CC) -g -std=c99 -pthread -Iinclude -Iurma-sys/include tests/c/consumer.c \
	  -L$(REL_DIR)/lib -los_transport -L$(PROFILE_DIR) -lurma -lpthread -ldl -o $(REL_DIR)/consumer

reliability-memcheck: reliability-bins
	LD_LIBRARY_PATH=$(REL_DIR)/lib:$(PROFILE_DIR) $(MEMCHECK) $(REL_DIR)/consumer
	URMA_LOOPBACK_KNOBS=nocopy=1 LD_LIBRARY_PATH=$(REL_DIR)/lib:$(PROFILE_DIR) $(MEMCHECK) $(REL_DIR)/consumer pattern 1200
	$(MEMCHECK) $(REL_DIR)/replay fuzz/seeds
	@echo "memcheck: 0 errors, 0 bytes definitely/indirectly lost (consumer, consumer pattern with 1200 uncollected gets, fuzz/seeds replay)"

# The helgrind run uses a build of the library with the `valgrind-annotations` feature (its own
# target dir, so the normal debug build keeps plain std::sync): Helgrind then sees the
# happens-before edges of the futex-based std locks. Strict: any report whose stack has an
# os_transport:: frame fails the target.
HELGRIND_DIR   := $(TARGET_DIR)/helgrind
HELGRIND_LIB   := $(HELGRIND_DIR)/debug/libos_transport.so

$(HELGRIND_LIB): FORCE_HELGRIND_LIB
	CARGO_TARGET_DIR=$(HELGRIND_DIR) $(CARGO) build -q -p os-transport --features valgrind-annotations

.PHONY: FORCE_HELGRIND_LIB
FORCE_HELGRIND_LIB:

reliability-helgrind: reliability-bins $(HELGRIND_LIB)
	-OST_FUZZ_LIB=$(HELGRIND_LIB) $(VALGRIND) --tool=helgrind --suppressions=tests/reliability_c/helgrind.supp \
	  $(REL_DIR)/replay fuzz/seeds > $(REL_DIR)/helgrind.log 2>&1
	@grep "ERROR SUMMARY" $(REL_DIR)/helgrind.log
	@grep -q "replayed .* inputs, teardown ok" $(REL_DIR)/helgrind.log || { echo "helgrind: replay did not finish (see $(REL_DIR)/helgrind.log)"; exit 1; }
	@n=$$(grep -c -- "^==[0-9]*== -------------------------------------------------------------*$$" $(REL_DIR)/helgrind.log); \
	 ours=$$(awk "$$HELGRIND_OURS_AWK" $(REL_DIR)/helgrind.log); \
	 echo "helgrind: $$n error contexts left after suppressions, $$ours with an os_transport:: frame in the access or conflicting stack (docs/reliability.md; log: $(REL_DIR)/helgrind.log)"; \
	 grep -A3 "Possible data race" $(REL_DIR)/helgrind.log | grep -o "os_transport::[a-z_:]*[A-Za-z_]* ([a-z_]*\.rs:[0-9]*)" | sort | uniq -c || true; \
	 if [ "$(HELGRIND_STRICT)" = 1 ] && [ "$$ours" != 0 ]; then exit 1; fi

# Counts error contexts (blocks after helgrind's dashed separator) with an os_transport:: frame
# before the "Address ..." description (i.e. in the access or the conflicting access stack).
export HELGRIND_OURS_AWK := \
  function flush() { if (inerr && hit) c++; inerr = 0; hit = 0; stop = 0 } \
  /^==[0-9]+== -------------------------------------------------------------*$$/ { flush(); inerr = 1; next } \
  /---Thread-Announcement|ERROR SUMMARY|For lists of detected/ { flush(); next } \
  inerr && /Address 0x/ { stop = 1 } \
  inerr && !stop && /os_transport::/ { hit = 1 } \
  END { flush(); print c + 0 }

reliability-check: reliability-memcheck reliability-helgrind fuzz-smoke

stress: build
	$(CARGO) build --release -p urma-loopback
	LD_LIBRARY_PATH=$(TARGET_DIR)/release OST_STRESS_REQS=$(STRESS_REQS) \
	  $(CARGO) test --release --test reliability_stress -- --nocapture
	LD_LIBRARY_PATH=$(TARGET_DIR)/release OST_FUZZ_CRS=$(STRESS_FUZZ_CRS) OST_FUZZ_PAIRS=50000 \
	  $(CARGO) test --release --test reliability_fuzz_cr -- --nocapture
