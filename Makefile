# mlcachedirect: every goal is an alias of `cargo xtask <goal>` (xtask/), which builds, installs
# what the goal needs (packaging/deps.sh), sets the loader path and runs the steps.
#
#   make compat   the C-vs-Rust conformance report (target/compat/report.html, .md, .json, .xml)
#   make test     every test: Rust, C, layout, conformance, reliability, quick bench, packaging,
#                 and the quick aarch64 part (cross-built, under qemu)
#   make test-umdk  the genuine-core lane alone: the loopback as a plugin of the genuine URMA core
#                 (the system's UMDK, or built from UMDK_SRC), UMDK's programs and our suites over it
#   make test-aarch64  the workspace cross-built for aarch64, its tests and `make compat` under qemu
#   make msrv     build and test with the minimum supported Rust (1.82, openEuler 24.03 LTS SP1)
#   make lint     no import circle between module files (make imports), cargo fmt --check and
#                 clippy -D warnings
#   make deps     install everything any goal needs (root: apt-get/dnf, rustup), else list it
#   make help     every goal (bench, rpm, rpm-test, fuzz, stress, ...)
#
# Variables given to make (COMPAT_ARGS, BENCH_ARGS, HELGRIND_STRICT, FUZZ_TIME, RPMBUILD_OPTS, ...)
# reach the xtask in its environment; TARGET_DIR=<dir> chooses the cargo target dir.

CARGO ?= cargo
ifneq ($(TARGET_DIR),)
export CARGO_TARGET_DIR := $(abspath $(TARGET_DIR))
endif

# The goals are the xtask's table (xtask/src/goals.rs, GOALS: name, packages, help, function), the
# one place a goal is added; `cargo xtask goals` lists them. The catch-all rule below sends any
# other name to the xtask too, which then says why (an unknown goal, or an xtask that does not
# build).
GOALS := $(shell $(CARGO) xtask goals 2>/dev/null)

.PHONY: all $(GOALS)
all: build
$(GOALS):
	$(CARGO) xtask $@

Makefile: ;
%:
	$(CARGO) xtask $@
