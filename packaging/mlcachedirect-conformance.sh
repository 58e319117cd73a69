#!/bin/sh
# mlcachedirect-conformance: run the C-vs-Rust conformance comparison (`make compat`) against the
# installed library, on this machine, over the private software loopback URMA provider.
#
# Usage: mlcachedirect-conformance [--out DIR] [--rust-lib PATH] [--legacy-lib PATH] [compat options...]
#   --out DIR          where report.md and the traces go (default: ./mlcachedirect-conformance-report)
#   --rust-lib PATH    library under test (default: the installed @LIBDIR@/libos_transport.so.1)
#   --legacy-lib PATH  reference C library 1.0 (default: the copy shipped in @PRIVDIR@/legacy/)
# Any other option is passed to the harness unchanged (--scenario ID, --random N, --seed S, --list,
# --no-interop; see `@PRIVDIR@/compat --help`). Exit status: the harness's: 0 when nothing FAILs,
# 1 otherwise, 2 on usage or set-up errors.
#
# The loopback liburma.so.0 and the reference library are private to this package: they are found
# only through the LD_LIBRARY_PATH set here, never by other programs on the system.
# The installed harness runs everything `make compat` runs: the in-process scenarios, the C runner
# (a C consumer program built with the package, @PRIVDIR@/c-runner) on both libraries, the random
# scenarios and the C <-> Rust interop matrix.
set -eu
privdir=@PRIVDIR@
rust_lib=@LIBDIR@/libos_transport.so.1
legacy_lib=$privdir/legacy/libos_transport.so.1
out=./mlcachedirect-conformance-report

while [ $# -gt 0 ]; do
    case $1 in
        --out) out=${2:?--out needs a directory}; shift 2 ;;
        --out=*) out=${1#--out=}; shift ;;
        --rust-lib) rust_lib=${2:?--rust-lib needs a path}; shift 2 ;;
        --rust-lib=*) rust_lib=${1#--rust-lib=}; shift ;;
        --legacy-lib) legacy_lib=${2:?--legacy-lib needs a path}; shift 2 ;;
        --legacy-lib=*) legacy_lib=${1#--legacy-lib=}; shift ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) break ;;
    esac
done

for f in "$rust_lib" "$legacy_lib" "$privdir/liburma.so.0" "$privdir/compat" "$privdir/c-runner" \
         "$privdir/ledger.json"; do
    [ -e "$f" ] || { echo "mlcachedirect-conformance: missing $f" >&2; exit 2; }
done
mkdir -p "$out"

# liburma.so.0 = the loopback provider, for the harness and both libraries under test.
LD_LIBRARY_PATH=$privdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
COMPAT_URMA_DIR=$privdir
export LD_LIBRARY_PATH COMPAT_URMA_DIR
exec "$privdir/compat" --rust-lib "$rust_lib" --legacy-lib "$legacy_lib" --out "$out" \
    --ledger "$privdir/ledger.json" --c-runner-exe "$privdir/c-runner" "$@"
