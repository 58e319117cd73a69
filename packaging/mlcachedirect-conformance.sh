#!/bin/sh
# mlcachedirect-conformance: run the C-vs-Rust conformance comparison (`make compat`) against the
# installed library, on this machine: over the private software loopback URMA provider, or with
# --device over the machine's own URMA device (hardware mode).
#
# Usage: mlcachedirect-conformance [--out DIR] [--rust-lib PATH] [--legacy-lib PATH] [compat options...]
#        mlcachedirect-conformance --device NAME [--eid EID] [options...]
#        mlcachedirect-conformance --inject [options...]
#   --out DIR          where the reports go: report.html (open it in a browser), report.md,
#                      report.json, report.xml (JUnit) (default: ./mlcachedirect-conformance-report)
#   --rust-lib PATH    library under test (default: the installed @LIBDIR@/libos_transport.so.1)
#   --legacy-lib PATH  reference C library 1.0 (default: the copy shipped in @PRIVDIR@/legacy/)
#   --inject           faults at the libraries' own inject points (docs/inject.md): the inject
#                      scenarios on the inject flavours of both libraries over the loopback, the
#                      points armed in the host's registry /os_transport_inject (default libraries:
#                      @INJECTDIR@/libos_transport.so.1 of mlcachedirect-inject, which must be
#                      installed, and the C reference's inject flavour shipped in
#                      @PRIVDIR@/legacy-inject/); report report-inject.html/.md/.json/.xml
#   --device NAME      hardware mode: URMA device NAME of the system's liburma.so.0 (UMDK's
#                      umdk-urma-lib; URMA_INTERPOSE_REAL=PATH names another), with the URMA
#                      interposition layer @LAYERDIR@/liburma.so.0 in front for the trace and the
#                      faults; only the public URMA API is used. --eid EID (IPv6 notation) picks
#                      the device's EID (default its first). Scenarios that need the loopback,
#                      and the C runner, are reported SKIPPED with the reason. On a UMDK host
#                      without UB hardware, --device loopback0 is the loopback provider plugin
#                      of mlcachedirect-urma-loopback (@PLUGINDIR@/liburma-loopback.so)
#                      inside the system's URMA library; for a device named loopback* this
#                      command enables it (URMA_LOOPBACK=1), which other programs must do
#                      themselves.
#   --split            sender and receiver of each scenario in two processes (with or without
#                      --device), endpoint information over TCP; report report-split.html/.md/.json/.xml
#   --split --device NAME [--eid EID] --serve HOST:PORT
#                      two UB nodes, node B: listens on HOST:PORT (an address node A reaches) and
#                      runs the receiver side of every run node A asks for, until it says done
#   --split --device NAME [--eid EID] --peer HOST:PORT
#                      two UB nodes, node A: connects to node B's HOST:PORT, runs the sender
#                      side, collects node B's traces over that connection, writes the report.
#                      Each node gives its own --device and --eid; both must run the same
#                      package version (checked at the start). COMPAT_PEER_WAIT=SECONDS bounds
#                      how long either end waits for the other to come (default 120)
# Any other option is passed to the harness unchanged (--scenario ID, --random N, --seed S, --list,
# --no-interop, --scenario-file F, --repeat N, --print-scenario ID; see `@PRIVDIR@/compat --help`).
# The scenario files shipped in @PRIVDIR@/scenarios run by default; --scenario-file F (a file or a
# directory of *.scn) runs F instead, alone. Exit status: the harness's: 0 when nothing FAILs,
# 1 otherwise, 2 on usage or set-up errors, 3 (--split) when the provider reaches no other process.
#
# The loopback liburma.so.0, the interposition layer and the reference library are private to
# this package: they are found only through the LD_LIBRARY_PATH set here, never by other programs.
# Without --device the installed harness runs everything `make compat` runs: the in-process
# scenarios, the C runner (a C consumer program built with the package, @PRIVDIR@/c-runner) on both
# libraries, the random scenarios and the C <-> Rust interop matrix.
set -eu
privdir=@PRIVDIR@
layerdir=@LAYERDIR@
rust_lib=
legacy_lib=
inject=
out=./mlcachedirect-conformance-report

while [ $# -gt 0 ]; do
    case $1 in
        --out) out=${2:?--out needs a directory}; shift 2 ;;
        --out=*) out=${1#--out=}; shift ;;
        --rust-lib) rust_lib=${2:?--rust-lib needs a path}; shift 2 ;;
        --rust-lib=*) rust_lib=${1#--rust-lib=}; shift ;;
        --legacy-lib) legacy_lib=${2:?--legacy-lib needs a path}; shift 2 ;;
        --legacy-lib=*) legacy_lib=${1#--legacy-lib=}; shift ;;
        --inject) inject=1; shift ;;
        -h|--help) sed -n -e '/^set -eu/q' -e '2,$p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) break ;;
    esac
done
# --inject is handed on to the harness (it may also come after other harness options).
[ -z "$inject" ] || set -- --inject "$@"
device=
device_name=
prev=
for a in "$@"; do
    [ "$a" = --device ] && device=1
    [ "$a" = --inject ] && inject=1
    [ "$prev" = --device ] && device_name=$a
    prev=$a
done
if [ -n "$inject" ]; then
    # The inject flavours: the Rust one comes with mlcachedirect-inject, off the loader's path.
    if [ -z "$rust_lib" ]; then
        rust_lib=@INJECTDIR@/libos_transport.so.1
        [ -e "$rust_lib" ] || {
            echo "mlcachedirect-conformance: --inject needs the Rust library's inject flavour $rust_lib:" \
                "install mlcachedirect-inject (or name a library with --rust-lib)" >&2
            exit 2
        }
    fi
    legacy_lib=${legacy_lib:-$privdir/legacy-inject/libos_transport.so.1}
fi
rust_lib=${rust_lib:-@LIBDIR@/libos_transport.so.1}
legacy_lib=${legacy_lib:-$privdir/legacy/libos_transport.so.1}

for f in "$rust_lib" "$legacy_lib" "$privdir/compat" "$privdir/ledger.json"; do
    [ -e "$f" ] || { echo "mlcachedirect-conformance: missing $f" >&2; exit 2; }
done
mkdir -p "$out"

if [ -n "$device" ]; then
    # liburma.so.0 = the interposition layer, which loads the system library by path.
    real=${URMA_INTERPOSE_REAL:-@LIBDIR@/liburma.so.0}
    [ -e "$layerdir/liburma.so.0" ] || { echo "mlcachedirect-conformance: missing $layerdir/liburma.so.0" >&2; exit 2; }
    [ -e "$real" ] || {
        echo "mlcachedirect-conformance: --device: no $real (install umdk-urma-lib, or set URMA_INTERPOSE_REAL)" >&2
        exit 2
    }
    # In a URMA core that loads providers (UMDK's: it offers them urma_register_provider_ops),
    # the loopback's devices exist only with its plugin in the core's providers' directory, and
    # only in a process that asks for them (URMA_LOOPBACK=1; the plugin is inert otherwise).
    case $device_name in
        loopback*)
            URMA_LOOPBACK=1
            export URMA_LOOPBACK
            plugin=$(dirname "$real")/urma/liburma-loopback.so
            if [ ! -e "$plugin" ] && grep -q urma_register_provider_ops "$real"; then
                echo "mlcachedirect-conformance: note: no $plugin: the loopback's device $device_name" \
                    "needs it (install mlcachedirect-urma-loopback)" >&2
            fi ;;
    esac
    LD_LIBRARY_PATH=$layerdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    URMA_INTERPOSE_REAL=$real
    export LD_LIBRARY_PATH URMA_INTERPOSE_REAL
    exec "$privdir/compat" --rust-lib "$rust_lib" --legacy-lib "$legacy_lib" --out "$out" \
        --ledger "$privdir/ledger.json" "$@"
fi

for f in "$privdir/liburma.so.0" "$privdir/c-runner"; do
    [ -e "$f" ] || { echo "mlcachedirect-conformance: missing $f" >&2; exit 2; }
done
# liburma.so.0 = the loopback provider, for the harness and both libraries under test.
LD_LIBRARY_PATH=$privdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
COMPAT_URMA_DIR=$privdir
export LD_LIBRARY_PATH COMPAT_URMA_DIR
exec "$privdir/compat" --rust-lib "$rust_lib" --legacy-lib "$legacy_lib" --out "$out" \
    --ledger "$privdir/ledger.json" --c-runner-exe "$privdir/c-runner" "$@"
