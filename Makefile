# mlcachedirect: top-level build, test and packaging entry points.
#
#   make compat   the C-vs-Rust conformance report (target/compat/report.md)
#   make test     every test: Rust, C, layout, conformance, reliability, quick bench, packaging
#   make lint     cargo fmt --check and clippy -D warnings
#   make deps     install missing system packages (root: apt-get or dnf), else list them

SHELL        := /bin/bash
CARGO        ?= cargo
TARGET_DIR   ?= $(CURDIR)/target
export CARGO_TARGET_DIR := $(TARGET_DIR)
PROFILE_DIR  := $(TARGET_DIR)/debug
LEGACY_DIR   := $(TARGET_DIR)/legacy
# The loopback liburma.so.0 and both libraries under test live in these directories.
export LD_LIBRARY_PATH := $(PROFILE_DIR)$(if $(LD_LIBRARY_PATH),:$(LD_LIBRARY_PATH))

# Debian package names / openEuler package names for what the build and tests need.
DEB_PKGS     := libclang-dev clang gcc make pkg-config valgrind python3
RPM_PKGS     := clang-devel clang gcc make pkgconf valgrind python3

.PHONY: all build test test-rust test-c compat lint fmt deps deps-check clean help

all: build

help:
	@sed -n '2,8p' Makefile

## build: every crate of the workspace, the loopback liburma.so.0 and legacy-c
build: deps-check
	$(CARGO) build --workspace --all-targets
	@test -e $(PROFILE_DIR)/liburma.so.0 || { echo "missing $(PROFILE_DIR)/liburma.so.0 (loopback)"; exit 1; }

## test: everything a change must pass
test: build
	$(CARGO) test --workspace --no-fail-fast
	$(MAKE) --no-print-directory compat
	$(MAKE) --no-print-directory legacy-asan-suite
	$(MAKE) --no-print-directory reliability-check
	$(MAKE) --no-print-directory bench-quick
	$(MAKE) --no-print-directory rpm-test

compat: build
	$(CARGO) run -q -p compat-tests --bin compat -- $(COMPAT_ARGS)

lint:
	$(CARGO) metadata --locked --format-version 1 > /dev/null   # Cargo.lock matches the manifests
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

## deps: install what is missing (as root), otherwise print exactly what to install
deps:
	@./packaging/deps.sh install $(EXTRA_DEPS)

deps-check:
	@./packaging/deps.sh check

clean:
	$(CARGO) clean
	rm -rf legacy-c/build

-include packaging/rpm.mk
-include bench/bench.mk
-include reliability.mk
-include legacy-c/legacy.mk
