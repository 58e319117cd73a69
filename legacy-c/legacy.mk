# legacy-c/legacy.mk - the shared behavioural suite against the ASan/UBSan build of the
# C reference. Include from the top-level Makefile (`-include legacy-c/legacy.mk`); it uses that
# Makefile's CARGO, TARGET_DIR, PROFILE_DIR and `build` target.
#
#   make legacy-asan-suite   build legacy-c with -fsanitize=address,undefined (+ the RTLD_DEEPBIND
#                            shim) into $(TARGET_DIR)/legacy-asan/asan and run every case_legacy
#                            test of compat-tests/tests/behaviour.rs against it: LSan on, except the
#                            scenarios that leak by design (legacy-c/README.md). Fails on any
#                            sanitizer report, any failed case, or if the ASan build was not loaded.

LEGACY_ASAN_BUILD := $(TARGET_DIR)/legacy-asan
# Same URMA header and link selection as urma-sys/build.rs (and so as the cargo build of legacy-c):
# $URMA_INCLUDE_DIR, else the system UMDK headers, else the bundled ones; $URMA_LIB_DIR, else a
# system liburma.so, else the link-only stub. At run time liburma.so.0 is the loopback in
# $(PROFILE_DIR).
LEGACY_ASAN_URMA_INC := $(or $(URMA_INCLUDE_DIR),$(if $(wildcard /usr/include/ub/umdk/urma/urma_api.h),/usr/include),$(CURDIR)/urma-sys/include)
LEGACY_ASAN_URMA_LIB := $(or $(URMA_LIB_DIR),$(patsubst %/liburma.so,%,$(firstword $(wildcard /usr/lib64/liburma.so /usr/lib/$(shell uname -m)-linux-gnu/liburma.so))))

.PHONY: legacy-asan-suite

legacy-asan-suite: build
	$(MAKE) --no-print-directory -C legacy-c asan BUILD=$(LEGACY_ASAN_BUILD) \
	    URMA_INCLUDE_DIR=$(LEGACY_ASAN_URMA_INC) $(if $(LEGACY_ASAN_URMA_LIB),URMA_LIB_DIR=$(LEGACY_ASAN_URMA_LIB))
	@bin=$$($(CARGO) test -q -p compat-tests --test behaviour --no-run --message-format=json \
	        | grep -o '"executable":"[^"]*/behaviour-[0-9a-f]*"' | tail -n1 | cut -d'"' -f4); \
	test -n "$$bin" || { echo "legacy-asan-suite: no behaviour test binary"; exit 1; }; \
	echo "legacy-c/tests/asan_suite.sh $$bin $(LEGACY_ASAN_BUILD)/asan $(PROFILE_DIR)"; \
	legacy-c/tests/asan_suite.sh "$$bin" $(LEGACY_ASAN_BUILD)/asan $(PROFILE_DIR)
