#!/usr/bin/env bash
# asan_suite.sh - run the case_legacy tests of compat-tests/tests/behaviour.rs against the
# ASan/UBSan build of the legacy C reference. Called by `make legacy-asan-suite` (`cargo xtask legacy-asan-suite`).
#
#   asan_suite.sh <behaviour test binary> <dir of the ASan build> <dir of the loopback liburma.so.0>
#
# Fails on any sanitizer report (ASan, UBSan or LSan), on any failed test, and if the test binary
# did not actually load <ASan dir>/libos_transport.so.1. See legacy-c/README.md, "Scenarios that
# leak or hang by design", for why some cases run without leak detection.
set -u -o pipefail

BIN=$1
ASAN_DIR=$2
LOOPBACK_DIR=$3
LIB=$ASAN_DIR/libos_transport.so.1
CC=${CC:-gcc}
LOG_DIR=$ASAN_DIR/suite-logs
rm -rf "$LOG_DIR" && mkdir -p "$LOG_DIR"

# Cases that leak by design (contract §10 #3, #4, #14; section in the README). Run with detect_leaks=0.
LEAKY=(
    callback_failure                   # §6.4, §10 #3: failed callback, sync/group/chunks leak
    mid_pipeline_post_failure          # §3.4, §6.4, §10 #3: failed worker post, same leak
    prefill_failure                    # §10 #4: prefill failure, the sync is never returned
    destroy_with_requests_in_flight    # §1.9, §10 #14: destroy drops queued tasks, syncs never freed
    duplicate_inflight_id              # §10 #10: the stranded second recv (D7)
    cancel_before_and_after_completion # §1.8, §5.5, §6.4: cancel by id only leaves a sync never complete (D11)
)

for f in "$BIN" "$LIB" "$ASAN_DIR/libstrip_deepbind.so" "$LOOPBACK_DIR/liburma.so.0"; do
    [ -e "$f" ] || { echo "asan_suite: missing $f" >&2; exit 1; }
done
# The library must really be the instrumented build, not a copy or link of the plain one.
readelf -d "$LIB" | grep -q 'NEEDED.*libasan' || { echo "asan_suite: $LIB is not an ASan build" >&2; exit 1; }
LIBASAN=$($CC -print-file-name=libasan.so)
LIBUBSAN=$($CC -print-file-name=libubsan.so)
[ -e "$LIBASAN" ] && [ -e "$LIBUBSAN" ] || { echo "asan_suite: $CC has no libasan/libubsan" >&2; exit 1; }

# The shim must come before libasan (it strips RTLD_DEEPBIND, which the sanitizer runtime refuses,
# google/sanitizers#611). The test binary itself is not instrumented, so ASan's check that it is
# first in the link order does not apply: verify_asan_link_order=0. Everything else is strict:
# any report aborts the process (exit 134).
COMMON_ASAN=verify_asan_link_order=0:halt_on_error=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LEGACY_LIB=$LIB
export LD_LIBRARY_PATH=$LOOPBACK_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RUST_BACKTRACE=1

run() { # run <name> <detect_leaks> <test args...>
    local name=$1 leaks=$2
    shift 2
    # LD_DEBUG=files logs every object the dynamic loader maps: the evidence of what was loaded.
    env LD_PRELOAD="$ASAN_DIR/libstrip_deepbind.so:$LIBASAN:$LIBUBSAN" \
        ASAN_OPTIONS="detect_leaks=$leaks:$COMMON_ASAN" \
        LD_DEBUG=files LD_DEBUG_OUTPUT="$LOG_DIR/$name.ld" \
        "$BIN" --test-threads=1 --show-output "$@" >"$LOG_DIR/$name.out" 2>&1
}

loaded() { # loaded <name>: the run mapped the ASan build
    grep -qs "file=$LIB \[0\]; *dynamically loaded" "$LOG_DIR/$1".ld.*
}

report() { # report <name> <rc>
    grep -E '^test .* \.\.\. |^test result' "$LOG_DIR/$1.out"
    if [ "$2" -ne 0 ]; then
        echo "asan_suite: $1 failed (exit $2); log: $LOG_DIR/$1.out" >&2
        grep -E -A30 'ERROR: (Address|Leak)Sanitizer|runtime error:|panicked at' "$LOG_DIR/$1.out" | head -60 >&2
    fi
}

fail=0
skip_args=()
for c in "${LEAKY[@]}"; do skip_args+=(--skip "$c::case_legacy"); done
exact_leaky=()
for c in "${LEAKY[@]}"; do exact_leaky+=("$c::case_legacy"); done

echo "== case_legacy, detect_leaks=1 (all but the ${#LEAKY[@]} by-design leaking cases)"
run leakcheck 1 case_legacy "${skip_args[@]}"; rc=$?
report leakcheck $rc; [ $rc -eq 0 ] || fail=1
loaded leakcheck || { echo "asan_suite: leakcheck run did not load $LIB" >&2; fail=1; }

echo "== case_legacy of the by-design leaking scenarios, detect_leaks=0"
run noleakcheck 0 --exact "${exact_leaky[@]}"; rc=$?
report noleakcheck $rc; [ $rc -eq 0 ] || fail=1
loaded noleakcheck || { echo "asan_suite: noleakcheck run did not load $LIB" >&2; fail=1; }
n=$(grep -c '^test .*::case_legacy \.\.\. ok' "$LOG_DIR/noleakcheck.out")
[ "$n" -eq "${#LEAKY[@]}" ] || { echo "asan_suite: expected ${#LEAKY[@]} leaking cases, $n passed" >&2; fail=1; }

total=$(LD_LIBRARY_PATH=$LOOPBACK_DIR "$BIN" --list case_legacy 2>/dev/null | grep -c ': test$')
ran=$(cat "$LOG_DIR"/leakcheck.out "$LOG_DIR"/noleakcheck.out | grep -c '^test .*::case_legacy \.\.\. ok')
echo "asan_suite: $ran of $total case_legacy tests passed"
[ "$ran" -eq "$total" ] && [ "$total" -gt 0 ] || fail=1
if grep -qs 'legacy library not available' "$LOG_DIR"/*.out; then
    echo "asan_suite: a case skipped because the legacy library did not load" >&2
    fail=1
fi
if [ $fail -eq 0 ]; then
    echo "asan_suite: PASS, every case_legacy ran against $LIB (ASan+UBSan), no sanitizer report"
fi
exit $fail
