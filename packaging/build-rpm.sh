#!/usr/bin/env bash
# Usage: packaging/build-rpm.sh TOPDIR
# rpmbuild -ba openeuler.spec with _topdir TOPDIR, from the sources `make dist` put in TOPDIR/SOURCES.
# Binary RPMs land in TOPDIR/RPMS/<arch>/, the source RPM in TOPDIR/SRPMS/. Extra rpmbuild options
# can be given in RPMBUILD_OPTS (e.g. "--without check").
set -euo pipefail
topdir=${1:?usage: build-rpm.sh TOPDIR}
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$topdir"
topdir=$(cd "$topdir" && pwd)
opts=(--define "_topdir $topdir"
      # No /usr/lib/.build-id links: the packages would own them and rpmlint/dnf gain nothing here.
      --define "_build_id_links none"
      # Debian's brp-elfperms drops the x bit of shared objects (rpmlint: shared-library-not-executable).
      --define "__brp_elfperms %{nil}")

# On a host whose rpm database does not hold the build tools (Debian: they are .debs), rpm cannot
# check BuildRequires; `make deps` / packaging/deps.sh installed them with the host's package manager.
if ! rpm -q --quiet rpm-build 2>/dev/null && ! rpm -q --quiet rpm 2>/dev/null; then
    opts+=(--nodeps)
fi

# Host-only adaptations, kept out of the spec (docs/packaging.md):
# - no real UMDK header on this host (Debian, CI): build with the header bundled in urma-sys
#   instead of failing at its absence; openEuler builds use umdk-urma-devel (BuildRequires).
if [ ! -f /usr/include/ub/umdk/urma/urma_api.h ]; then
    echo "build-rpm: no /usr/include/ub/umdk/urma/urma_api.h (umdk-urma-devel): building --without system_urma" >&2
    opts+=(--without system_urma)
fi
# - rpm configurations whose %{build_cflags}/%{build_ldflags} carry no hardening (Debian's rpm:
#   "-O2 -g" and nothing): the host's own hardened flags, from dpkg-buildflags. openEuler's
#   openEuler-rpm-config defines both (with its -specs=/usr/lib/rpm/generic-hardened-* files).
if [ -z "$(rpm --eval '%{?build_ldflags}' | tr -d '[:space:]')" ] && command -v dpkg-buildflags >/dev/null; then
    export DEB_BUILD_MAINT_OPTIONS=hardening=+all
    cflags="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CFLAGS)"
    ldflags="$(dpkg-buildflags --get LDFLAGS)"
    echo "build-rpm: host rpm has no build_ldflags: using dpkg-buildflags ($cflags | $ldflags)" >&2
    opts+=(--define "build_cflags $cflags" --define "build_ldflags $ldflags")
fi

# The conformance harness binary (`compat`, crate compat-tests) is packaged when the source tree
# defines it; older trees get `--without harness`.
if ! (cd "$src" && cargo metadata --no-deps --offline --format-version 1 2>/dev/null) |
        python3 -c 'import json, sys
m = json.load(sys.stdin)
sys.exit(0 if any(t["name"] == "compat" and "bin" in t["kind"]
                  for p in m["packages"] if p["name"] == "compat-tests" for t in p["targets"]) else 1)'; then
    echo "build-rpm: compat-tests defines no binary 'compat' yet: building --without harness" >&2
    opts+=(--without harness)
fi

# openeuler.spec is the source of truth; the source RPM carries it as <Name>.spec, the name
# openEuler's package repositories (and rpmlint) expect.
name=$(awk '$1 == "Name:" { print $2; exit }' "$src/openeuler.spec")
mkdir -p "$topdir/SPECS"
cp "$src/openeuler.spec" "$topdir/SPECS/$name.spec"

# The CARGO_TARGET_DIR / LD_LIBRARY_PATH of the developer's build (cargo xtask) are not rpmbuild's,
# nor is UMDK_SRC (a UMDK source tree outside the sources: %check takes only a system UMDK).
# shellcheck disable=SC2086
env -u CARGO_TARGET_DIR -u LD_LIBRARY_PATH -u UMDK_SRC \
    rpmbuild -ba "${opts[@]}" ${RPMBUILD_OPTS:-} "$topdir/SPECS/$name.spec"
echo "build-rpm: $(cd "$topdir" && ls RPMS/*/*.rpm SRPMS/*.rpm | tr '\n' ' ')"
