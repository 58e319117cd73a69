#!/usr/bin/env bash
# Usage: packaging/deps.sh check|install [group...]
#   groups: base (always), rpm (rpm tooling for make rpm / rpm-test), bench (valgrind, plotting), fuzz
# check:   exit 1 and print exactly what is missing (with the apt-get / dnf command line).
# install: as root on Debian (apt-get) or openEuler/Fedora (dnf) install what is missing;
#          otherwise behave like check.
set -euo pipefail
mode=${1:-check}; shift || true
groups=(base "$@")

# Each requirement: group|description|probe command|debian package|rpm package
reqs=(
  "base|C compiler|command -v gcc|gcc|gcc"
  "base|make|command -v make|make|make"
  "base|libclang (bindgen drift check)|compgen -G '/usr/lib/llvm-*/lib/libclang*.so*' || compgen -G '/usr/lib64/libclang.so*'|libclang-dev|clang-devel"
  "base|pkg-config|command -v pkg-config|pkg-config|pkgconf"
  "base|python3|command -v python3|python3|python3"
  "base|valgrind|command -v valgrind|valgrind|valgrind"
  "rpm|rpmbuild|command -v rpmbuild|rpm|rpm-build"
  "rpm|dnf|command -v dnf|dnf|dnf"
  "rpm|createrepo_c|command -v createrepo_c|createrepo-c|createrepo_c"
  "rpm|rpmlint|command -v rpmlint|rpmlint|rpmlint"
  "rpm|cpio|command -v cpio|cpio|cpio"
  "rpm|rpm2cpio|command -v rpm2cpio|rpm2cpio|rpm"
  "rpm|readelf (binutils)|command -v readelf|binutils|binutils"
  "rpm|python3 >= 3.11 (tomllib, make dist)|python3 -c 'import tomllib'|python3|python3"
  "rpm|cmake (CMake consumer of rpm-test)|command -v cmake|cmake|cmake"
  "bench|gnuplot|command -v gnuplot|gnuplot-nox|gnuplot"
  "fuzz|clang|command -v clang|clang|clang"
)

in_groups() { local g=$1; for x in "${groups[@]}"; do [ "$x" = "$g" ] && return 0; done; return 1; }

missing_desc=(); missing_deb=(); missing_rpm=()
for r in "${reqs[@]}"; do
  IFS='|' read -r grp desc probe deb rpm <<<"$r"
  in_groups "$grp" || continue
  if ! bash -c "$probe" >/dev/null 2>&1; then
    missing_desc+=("$desc"); missing_deb+=("$deb"); missing_rpm+=("$rpm")
  fi
done

[ ${#missing_desc[@]} -eq 0 ] && exit 0

report() {
  echo "missing system packages: ${missing_desc[*]}" >&2
  echo "  Debian/Ubuntu: apt-get install -y ${missing_deb[*]}" >&2
  echo "  openEuler:     dnf install -y ${missing_rpm[*]}" >&2
}

if [ "$mode" = install ] && [ "$(id -u)" = 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing_deb[@]}"
    exit 0
  elif command -v dnf >/dev/null 2>&1; then
    dnf install -y "${missing_rpm[@]}"
    exit 0
  fi
fi
report
[ "$mode" = install ] && echo "(not root or no apt-get/dnf: install them by hand)" >&2
exit 1
