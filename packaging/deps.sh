#!/usr/bin/env bash
# Usage: packaging/deps.sh check|install [group...|all]
#   groups: base (always), rpm (make rpm / rpm-test), bench (valgrind, plotting), fuzz (libFuzzer),
#           aarch64 (cross build + qemu: make test-aarch64), msrv (rust 1.82: make msrv),
#           umdk (building the genuine UMDK URMA core from UMDK_SRC: make test-umdk)
# The one list of what the build and the tests need; the Makefile (`make deps`, and every goal
# before it builds anything) and .ci/run use it. Each probe tests the capability itself (links a
# libFuzzer program, runs an aarch64 program, finds the 1.82 toolchain), not a command name.
# check:   exit 1 and print exactly what is missing (with the apt-get / dnf / rustup command lines).
# install: as root, install what is missing (apt-get on Debian/Ubuntu, dnf on openEuler/Fedora,
#          rustup for Rust toolchains and targets), then probe again; otherwise behave like check.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-check}
shift || true
all_groups=(base rpm bench fuzz aarch64 msrv umdk)
groups=(base "$@")
[[ " $* " == *" all "* ]] && groups=("${all_groups[@]}")

MSRV=1.82
AARCH64_TRIPLE=aarch64-unknown-linux-gnu

# Capability probes (run with bash -c from the repository root; stdout/stderr discarded).
probe_tmp='d=$(mktemp -d) && trap "rm -rf $d" EXIT'
probe_fuzzer="$probe_tmp"' && printf "int LLVMFuzzerTestOneInput(const unsigned char *p, unsigned long n) { (void)p; (void)n; return 0; }\n" > $d/f.c && clang -fsanitize=fuzzer $d/f.c -o $d/f'
probe_a64_cc="$probe_tmp"' && printf "#include <pthread.h>\nint main(void) { return (int)sizeof(pthread_mutex_t); }\n" > $d/t.c && .cargo/aarch64-linker -pthread $d/t.c -o $d/t'
# pthread_mutex_t is 48 bytes on aarch64 (40 on x86_64): the exit code proves it ran as aarch64.
probe_a64_run="$probe_tmp"' && printf "#include <pthread.h>\nint main(void) { return (int)sizeof(pthread_mutex_t); }\n" > $d/t.c && .cargo/aarch64-linker -pthread $d/t.c -o $d/t && { .cargo/target-runner $d/t; test $? = 48; }'
probe_a64_rust='test -d "$(rustc --print sysroot)/lib/rustlib/'"$AARCH64_TRIPLE"'/lib"'
# Headless Chromium runs the compat report page's script (the report test reads the numbers and
# the filtered rows back from the DOM it renders); xmllint validates report.xml against
# compat-tests/junit.xsd.
probe_chromium="$probe_tmp"' && printf "<p id=x></p><script>document.getElementById(\"x\").textContent=6*7</script>" > $d/p.html && chromium --headless --no-sandbox --disable-gpu --user-data-dir=$d/prof --dump-dom file://$d/p.html | grep -q ">42<"'
probe_xmllint="$probe_tmp"' && printf "<xs:schema xmlns:xs=\"http://www.w3.org/2001/XMLSchema\"><xs:element name=\"a\" type=\"xs:integer\"/></xs:schema>" > $d/s.xsd && printf "<a>7</a>" > $d/ok.xml && printf "<a>x</a>" > $d/bad.xml && xmllint --noout --schema $d/s.xsd $d/ok.xml && ! xmllint --noout --schema $d/s.xsd $d/bad.xml'
probe_msrv='rustup toolchain list | grep -q "^'"$MSRV"'[.-]" && RUSTUP_AUTO_INSTALL=0 rustup run '"$MSRV"' rustc --version'

# Each requirement: group@description@probe@debian packages@rpm packages@rustup arguments
# (a requirement met by rustup has no packages, one met by packages no rustup arguments).
reqs=(
  "base@C compiler@command -v gcc@gcc@gcc@"
  "base@make@command -v make@make@make@"
  "base@libclang (bindgen drift check)@compgen -G '/usr/lib/llvm-*/lib/libclang*.so*' || compgen -G '/usr/lib64/libclang.so*'@libclang-dev@clang-devel@"
  "base@pkg-config@command -v pkg-config@pkg-config@pkgconf@"
  "base@python3@command -v python3@python3@python3@"
  "base@valgrind@command -v valgrind@valgrind@valgrind@"
  "base@headless Chromium running a page's script (the compat report page test)@$probe_chromium@chromium@chromium@"
  "base@xmllint validating against an XML schema (the compat JUnit report test)@$probe_xmllint@libxml2-utils@libxml2@"
  "base@useradd and userdel (the loopback's security suite runs processes as throw-away users)@command -v useradd && command -v userdel@passwd@shadow@"
  "base@unshare (the loopback's security suite runs processes in pid namespaces of their own)@command -v unshare@util-linux@util-linux@"
  "rpm@rpmbuild@command -v rpmbuild@rpm@rpm-build@"
  "rpm@dnf@command -v dnf@dnf@dnf@"
  "rpm@createrepo_c@command -v createrepo_c@createrepo-c@createrepo_c@"
  "rpm@rpmlint@command -v rpmlint@rpmlint@rpmlint@"
  "rpm@cpio@command -v cpio@cpio@cpio@"
  "rpm@rpm2cpio@command -v rpm2cpio@rpm2cpio@rpm@"
  "rpm@readelf (binutils)@command -v readelf@binutils@binutils@"
  "rpm@python3 >= 3.11 (tomllib, make dist)@python3 -c 'import tomllib'@python3@python3@"
  "rpm@cmake (CMake consumer of rpm-test)@command -v cmake@cmake@cmake@"
  "bench@gnuplot@command -v gnuplot@gnuplot-nox@gnuplot@"
  "fuzz@clang linking a -fsanitize=fuzzer program (libFuzzer runtime)@$probe_fuzzer@clang libclang-rt-dev@clang compiler-rt@"
  "aarch64@aarch64 C compiler and C library@$probe_a64_cc@gcc-aarch64-linux-gnu libc6-dev-arm64-cross@gcc-aarch64-linux-gnu sysroot-aarch64-linux-gnu@"
  "aarch64@running aarch64 programs (qemu user emulation)@$probe_a64_run@qemu-user-static@qemu-user-static@"
  "aarch64@Rust target $AARCH64_TRIPLE@$probe_a64_rust@@@target add $AARCH64_TRIPLE"
  "umdk@cmake (builds the genuine UMDK URMA core from UMDK_SRC)@cmake --version@cmake@cmake@"
  "msrv@Rust $MSRV toolchain (minimum supported Rust version)@$probe_msrv@@@toolchain install $MSRV --profile minimal"
)

in_groups() { local g=$1 x; for x in "${groups[@]}"; do [ "$x" = "$g" ] && return 0; done; return 1; }

probe_all() {
  missing_desc=(); missing_deb=(); missing_rpm=(); missing_rustup=()
  local r grp desc probe deb rpm rustup_args
  for r in "${reqs[@]}"; do
    IFS='@' read -r grp desc probe deb rpm rustup_args <<<"$r"
    in_groups "$grp" || continue
    if ! bash -c "$probe" >/dev/null 2>&1; then
      missing_desc+=("$desc")
      [ -n "$deb" ] && missing_deb+=($deb)
      [ -n "$rpm" ] && missing_rpm+=($rpm)
      [ -n "$rustup_args" ] && missing_rustup+=("$rustup_args")
    fi
  done
  return 0
}

report() {
  local a
  echo "missing: $(IFS=';'; echo "${missing_desc[*]}" | sed 's/;/; /g')" >&2
  if [ ${#missing_deb[@]} -gt 0 ]; then
    echo "  Debian/Ubuntu: apt-get install -y --no-install-recommends ${missing_deb[*]}" >&2
    echo "  openEuler:     dnf install -y ${missing_rpm[*]}" >&2
  fi
  for a in "${missing_rustup[@]}"; do echo "  Rust:          rustup $a" >&2; done
}

probe_all
[ ${#missing_desc[@]} -eq 0 ] && exit 0

if [ "$mode" = install ] && [ "$(id -u)" = 0 ]; then
  report
  echo "installing (root) ..." >&2
  if [ ${#missing_deb[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null 2>&1; then
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq
      apt-get install -y -qq --no-install-recommends "${missing_deb[@]}"
    elif command -v dnf >/dev/null 2>&1; then
      dnf install -y "${missing_rpm[@]}"
    else
      echo "no apt-get or dnf: install the packages above by hand" >&2
      exit 1
    fi
  fi
  for a in "${missing_rustup[@]}"; do
    command -v rustup >/dev/null 2>&1 || { echo "rustup not found: cannot run 'rustup $a'" >&2; exit 1; }
    # shellcheck disable=SC2086 # the arguments are words
    rustup $a
  done
  probe_all
  [ ${#missing_desc[@]} -eq 0 ] && exit 0
  echo "still missing after installing:" >&2
  report
  exit 1
fi
report
[ "$mode" = install ] && echo "(not root: run the commands above as root, or 'make deps' as root)" >&2
exit 1
