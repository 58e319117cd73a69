# mlcachedirect: top-level build, test and packaging entry points.
#
#   make compat   the C-vs-Rust conformance report (target/compat/report.md)
#   make test     every test: Rust, C, layout, conformance, reliability, quick bench, packaging,
#                 and the quick aarch64 part (cross-built, under qemu)
#   make test-aarch64  the workspace cross-built for aarch64, its tests and `make compat` under qemu
#   make msrv     build and test with the minimum supported Rust (1.82, openEuler 24.03 LTS SP1)
#   make lint     cargo fmt --check and clippy -D warnings
#   make deps     install everything any goal needs (root: apt-get/dnf, rustup), else list it

SHELL        := /bin/bash
CARGO        ?= cargo
TARGET_DIR   ?= $(CURDIR)/target
export CARGO_TARGET_DIR := $(TARGET_DIR)
PROFILE_DIR  := $(TARGET_DIR)/debug
LEGACY_DIR   := $(TARGET_DIR)/legacy
# The loopback liburma.so.0 and both libraries under test live in these directories.
export LD_LIBRARY_PATH := $(PROFILE_DIR)$(if $(LD_LIBRARY_PATH),:$(LD_LIBRARY_PATH))

# What the goals on the command line need, as packaging/deps.sh groups (the one list of system
# packages and Rust toolchain parts). `build`, which every goal starts with, installs them first
# as root; otherwise it prints the install commands and stops before building anything.
DEPS_GROUPS  := base \
  $(if $(filter test rpm rpm-test,$(MAKECMDGOALS)),rpm) \
  $(if $(filter test bench bench-quick,$(MAKECMDGOALS)),bench) \
  $(if $(filter test fuzz fuzz-smoke reliability-check,$(MAKECMDGOALS)),fuzz) \
  $(if $(filter test test-aarch64 test-aarch64-quick,$(MAKECMDGOALS)),aarch64) \
  $(if $(filter msrv,$(MAKECMDGOALS)),msrv)

# aarch64: cross build with the runner and linker of .cargo/config.toml (qemu user emulation on
# other hosts); artifacts under $(TARGET_DIR)/aarch64-unknown-linux-gnu.
AARCH64      := aarch64-unknown-linux-gnu
A64_CARGO    := $(CARGO) --config 'build.target="$(AARCH64)"'
# The minimum supported Rust version (rust-version in Cargo.toml), in its own target dir.
MSRV         := 1.82
MSRV_CARGO   := $(CARGO) +$(MSRV)
MSRV_DIR     := $(TARGET_DIR)/msrv

.PHONY: all build test test-rust test-c compat lint fmt deps deps-ensure clean help \
        test-aarch64 test-aarch64-quick test-aarch64-build msrv

all: build

help:
	@sed -n '2,11p' Makefile

## build: every crate of the workspace, the loopback liburma.so.0 and legacy-c
build: deps-ensure
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
	$(MAKE) --no-print-directory test-aarch64-quick

## test-aarch64: the workspace cross-built for aarch64; its tests and the conformance catalogue
## under qemu (natively on an aarch64 host): layout, unit, behaviour (both libraries over the
## aarch64 loopback), C consumer, loopback, legacy-c, compat.
test-aarch64-build: deps-ensure
	$(A64_CARGO) build --workspace --all-targets

test-aarch64: test-aarch64-build
	$(A64_CARGO) test --workspace --no-fail-fast
	$(A64_CARGO) run -q -p compat-tests --bin compat -- $(COMPAT_ARGS)

## test-aarch64-quick (part of make test): what differs on aarch64: the URMA layout against the
## aarch64 facts (Rust bindings and the C probe), the library's unit tests, and the C consumer
## running the Rust and the C library over the aarch64 loopback.
test-aarch64-quick: deps-ensure
	$(A64_CARGO) build -p urma-loopback -p os-transport-legacy -p os-transport
	$(A64_CARGO) test --no-fail-fast -p urma-sys --test abi_layout -- --nocapture
	$(A64_CARGO) test --no-fail-fast -p os-transport --lib --test c_consumer

## msrv: build and run the tests with Rust $(MSRV) and the locked dependencies. The bindings
## freshness test formats bindgen's output with the default toolchain's rustfmt (RUSTFMT), the one
## the committed bindings were formatted with: the minimal 1.82 toolchain has none, and formatting
## is not a property of the minimum Rust version.
msrv: deps-ensure
	$(MSRV_CARGO) build --locked --workspace --all-targets --target-dir $(MSRV_DIR)
	LD_LIBRARY_PATH=$(MSRV_DIR)/debug RUSTFMT="$$(rustup which rustfmt)" \
	  $(MSRV_CARGO) test --locked --workspace --no-fail-fast --target-dir $(MSRV_DIR)

compat: build
	$(CARGO) run -q -p compat-tests --bin compat -- $(COMPAT_ARGS)

lint:
	$(CARGO) metadata --locked --format-version 1 > /dev/null   # Cargo.lock matches the manifests
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

## deps: install what any goal needs (as root), otherwise print exactly what to install
deps:
	@./packaging/deps.sh install all

deps-ensure:
	@./packaging/deps.sh install $(DEPS_GROUPS)

clean:
	$(CARGO) clean
	rm -rf legacy-c/build

-include packaging/rpm.mk
-include bench/bench.mk
-include reliability.mk
-include legacy-c/legacy.mk
