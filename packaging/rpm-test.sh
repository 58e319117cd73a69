#!/usr/bin/env bash
# Usage: packaging/rpm-test.sh            (after `make rpm`; `make rpm-test` runs both)
# Install test of the mlcachedirect RPMs under $TARGET_DIR/rpm (default target/rpm), in
# $TARGET_DIR/rpm-test:
#   1. repository: the RPMs + the TEST ONLY stand-ins of packaging/tests/test-stubs.spec, createrepo_c
#   2. clean root: `dnf --installroot` of mlcachedirect, -devel and -compat into an empty root,
#      `rpm -V`, and checks of the dependency metadata (nothing offers the loopback liburma.so.0)
#   3. C consumer: packaging/tests/consumer.c built with `pkg-config --cflags --libs os-transport`
#      from the root, run on the root's library over the loopback provider (2 MiB + 1 byte)
#   4. mlcachedirect-compat from the root (when the package ships the harness)
#   5. migration: a root with the original os-transport + os-transport-devel 1.0.0-1 (stand-ins),
#      upgraded to mlcachedirect by dnf (Obsoletes), then back to os-transport (docs/migration.md)
#   6. rpmlint of every RPM and the spec: 0 errors
# Prints one line per step with its time; exits non-zero on the first failure.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
T=${TARGET_DIR:-$src/target}
rpmdir=$T/rpm
work=$T/rpm-test
arch=$(rpm --eval '%{_arch}')
libdir=$(rpm --eval '%{_libdir}')
privdir=$(rpm --eval '%{_libexecdir}')/mlcachedirect
name=mlcachedirect
version=$(awk '$1 == "Version:" { print $2; exit }' "$src/openeuler.spec")
release=$(awk '$1 == "Release:" { print $2; exit }' "$src/openeuler.spec")
# The tools, not the libraries under test, run with the caller's environment minus these.
unset LD_LIBRARY_PATH CARGO_TARGET_DIR

t0=$(date +%s)
step_start=$t0
step() {
    local now
    now=$(date +%s)
    printf '== rpm-test: %s (%ss; total %ss)\n' "$1" $((now - step_start)) $((now - t0))
    step_start=$now
}
fail() { echo "rpm-test: FAIL: $*" >&2; exit 1; }

shopt -s nullglob
main_rpms=("$rpmdir"/RPMS/"$arch"/$name-"$version"-"$release".*.rpm
           "$rpmdir"/RPMS/"$arch"/$name-{devel,compat}-"$version"-"$release".*.rpm)
srpms=("$rpmdir"/SRPMS/$name-"$version"-"$release".src.rpm)
shopt -u nullglob
[ ${#main_rpms[@]} -eq 3 ] || fail "expected 3 binary RPMs of $name-$version-$release in $rpmdir/RPMS/$arch (run make rpm): ${main_rpms[*]:-none}"
[ ${#srpms[@]} -eq 1 ] || fail "no source RPM in $rpmdir/SRPMS"
rpm_of() { local f; for f in "${main_rpms[@]}"; do [ "$(rpm -qp --qf '%{NAME}' "$f")" = "$1" ] && echo "$f"; done; }
compat_rpm=$(rpm_of $name-compat)

rm -rf "$work"
mkdir -p "$work"/{repo,stubin/include,stubs,home,cache,reposd,log}
# rpm's database inside the install roots: /var/lib/rpm (Debian's rpm defaults to ~/.rpmdb).
export HOME=$work/home
echo '%_dbpath /var/lib/rpm' > "$HOME/.rpmmacros"

echo "== rpm-test: packages"
for f in "${main_rpms[@]}" "${srpms[@]}"; do echo "   ${f#"$T"/}"; done

# --- 1. metadata checks -------------------------------------------------------------------------
# The loopback liburma.so.0 and the reference library are private to mlcachedirect-compat.
provides_of() { rpm -qp --provides "$1"; }
requires_of() { rpm -qp --requires "$1"; }
provides_of "$compat_rpm" | grep -q 'liburma' && fail "mlcachedirect-compat offers liburma: $(provides_of "$compat_rpm" | grep liburma)"
provides_of "$compat_rpm" | grep -q 'libos_transport' && fail "mlcachedirect-compat offers libos_transport"
requires_of "$compat_rpm" | grep -q 'liburma' && fail "mlcachedirect-compat requires the system liburma"
provides_of "$(rpm_of $name)" | grep -qx "libos_transport.so.1()(64bit)" || fail "mlcachedirect does not provide libos_transport.so.1()(64bit)"
provides_of "$(rpm_of $name)" | grep -qx "os-transport = $version-$release" || fail "mlcachedirect does not provide os-transport"
requires_of "$(rpm_of $name)" | grep -qx "liburma.so.0()(64bit)" || fail "mlcachedirect does not require liburma.so.0()(64bit)"
requires_of "$(rpm_of $name-devel)" | grep -qx "umdk-urma-devel" || fail "mlcachedirect-devel does not require umdk-urma-devel"
step "dependency metadata"

# --- 2. TEST ONLY stand-ins and the repository ----------------------------------------------------
# Host capabilities = every Requires of the RPMs that neither they nor the UMDK stand-ins satisfy.
own=$(rpm -qp --provides "${main_rpms[@]}" | awk '{ print $1 }'; rpm -qp --qf '%{NAME}\n' "${main_rpms[@]}")
rpm -qp --requires "${main_rpms[@]}" | awk '{ print $1 }' | sort -u |
    grep -v -e '^rpmlib(' -e '^liburma\.so\.0' -e '^umdk-urma-' |
    grep -vxF -f <(echo "$own") > "$work/stubin/host-provides.txt" || true
echo "   host capabilities: $(tr '\n' ' ' < "$work/stubin/host-provides.txt")"
ldconfig_bin=$(command -v ldconfig || echo /sbin/ldconfig)
readelf -l "$ldconfig_bin" | grep -q INTERP && fail "$ldconfig_bin is not static; the install root cannot run it"
cp "$ldconfig_bin" "$work/stubin/ldconfig"
cp -r "$src/urma-sys/include/ub" "$work/stubin/include/"
cp "$src/include/os_transport.h" "$work/stubin/"
(cd "$work/stubin" && rpm2cpio "$compat_rpm" | cpio -id --quiet ".$privdir/liburma.so.0" ".$privdir/legacy/libos_transport.so.1")
cp "$work/stubin/$privdir/liburma.so.0" "$work/stubin/liburma.so"
cp "$work/stubin/$privdir/legacy/libos_transport.so.1" "$work/stubin/libos_transport.so.1.0.0"
rpmbuild -bb --quiet --define "_topdir $work/stubs" --define "stubdir $work/stubin" \
    "$src/packaging/tests/test-stubs.spec" > "$work/log/stubs.log" 2>&1 ||
    { cat "$work/log/stubs.log"; fail "building the test stand-ins"; }
cp "${main_rpms[@]}" "$work"/stubs/RPMS/*/*.rpm "$work/repo/"
createrepo_c --quiet "$work/repo"
step "TEST ONLY stand-ins and repository"

cat > "$work/dnf.conf" <<EOF
[main]
gpgcheck=0
install_weak_deps=False
keepcache=False
reposdir=$work/reposd
cachedir=$work/cache
logdir=$work/log
EOF
dnf_root() {
    local root=$1; shift
    dnf -y -q --config="$work/dnf.conf" --installroot="$root" --releasever=test --nogpgcheck \
        --disablerepo='*' --repofrompath="mlcd,file://$work/repo" --enablerepo=mlcd "$@"
}
rpm_root() { local root=$1; shift; rpm --root="$root" --dbpath=/var/lib/rpm "$@"; }
installed() { rpm_root "$1" -q "$2" >/dev/null 2>&1; }

# --- 3. clean root --------------------------------------------------------------------------------
root=$work/root
mkdir -p "$root"
dnf_root "$root" install $name $name-devel $name-compat > "$work/log/install.log" 2>&1 ||
    { cat "$work/log/install.log"; fail "dnf install into a clean root"; }
echo "   installed: $(rpm_root "$root" -qa --qf '%{NAME}-%{VERSION}-%{RELEASE} ' | tr ' ' '\n' | sort | tr '\n' ' ')"
installed "$root" os-transport && fail "os-transport was pulled in"
installed "$root" umdk-urma-lib || fail "liburma.so.0 did not pull in umdk-urma-lib"
rpm_root "$root" -V $name $name-devel $name-compat || fail "rpm -V"
echo "   rpm -V $name $name-devel $name-compat: OK"
for p in $name $name-devel $name-compat; do echo "   rpm -ql $p:"; rpm_root "$root" -ql $p | sed 's/^/     /'; done
[ "$(readlink "$root$libdir/libos_transport.so")" = libos_transport.so.1 ] || fail "libos_transport.so link"
[ -f "$root$libdir/libos_transport.so.1.0.0" ] && [ -x "$root$libdir/libos_transport.so.1.0.0" ] || fail "library file"
[ -e "$root/etc/ld.so.cache" ] || fail "the ldconfig scriptlet did not run"
step "dnf --installroot install, rpm -V"

# --- 4. C consumer -------------------------------------------------------------------------------
pcflags=$(PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$root$libdir/pkgconfig:$root/usr/share/pkgconfig \
    pkg-config --cflags --libs os-transport)
echo "   pkg-config --cflags --libs os-transport: $pcflags"
# -I$root/usr/include: the root's /usr/include, which a compiler on the installed system searches
# by default (<ub/umdk/urma/urma_api.h> of umdk-urma-devel). -rpath-link: where the linker finds
# liburma.so.0, which libos_transport.so.1 needs (the loopback, as at run time).
gcc -std=c11 -O2 -Wall -Wextra -Werror -pthread -I"$root/usr/include" \
    "$src/packaging/tests/consumer.c" $pcflags -Wl,-rpath-link,"$root$privdir" -o "$work/consumer"
LD_LIBRARY_PATH=$root$libdir:$root$privdir timeout 120 "$work/consumer" | tee "$work/log/consumer.log" ||
    fail "consumer run"
grep -qF "libos_transport from $root$libdir/libos_transport.so.1," "$work/log/consumer.log" ||
    fail "the consumer did not run on the installed libos_transport.so.1"
grep -qF "liburma from $root$privdir/liburma.so.0" "$work/log/consumer.log" ||
    fail "the consumer did not run on the loopback liburma.so.0"
step "C consumer (pkg-config, send + recv of 2 MiB + 1 byte over the loopback)"

# --- 5. mlcachedirect-compat -----------------------------------------------------------------------
if [ -e "$root/usr/bin/mlcachedirect-compat" ]; then
    # The installed wrapper, with its absolute paths moved into the root.
    sed -e "s|$privdir|$root$privdir|g" -e "s|$libdir/libos_transport|$root$libdir/libos_transport|g" \
        "$root/usr/bin/mlcachedirect-compat" > "$work/mlcachedirect-compat"
    chmod +x "$work/mlcachedirect-compat"
    # 20 random scenarios instead of 200: this proves the installed harness; `make compat` is the
    # full run.
    if "$work/mlcachedirect-compat" --out "$work/compat" --random 20 > "$work/log/compat.log" 2>&1; then
        tail -n 5 "$work/log/compat.log" | sed 's/^/   /'
    else
        tail -n 30 "$work/log/compat.log"; fail "mlcachedirect-compat"
    fi
    step "mlcachedirect-compat on the installed library"
else
    echo "== rpm-test: mlcachedirect-compat: not in this build (harness not built), skipped"
fi

# --- 6. migration from and back to the original os-transport --------------------------------------
mroot=$work/migration-root
mkdir -p "$mroot"
dnf_root "$mroot" install os-transport os-transport-devel mlcachedirect-test-host > "$work/log/migration.log" 2>&1 ||
    { cat "$work/log/migration.log"; fail "installing the os-transport stand-ins"; }
# dnf upgrade replaces os-transport and os-transport-devel through the Obsoletes.
dnf_root "$mroot" upgrade >> "$work/log/migration.log" 2>&1 || { cat "$work/log/migration.log"; fail "dnf upgrade"; }
echo "   after dnf upgrade: $(rpm_root "$mroot" -qa | sort | tr '\n' ' ')"
for p in os-transport os-transport-devel; do installed "$mroot" $p && fail "$p not replaced by dnf upgrade"; done
for p in $name $name-devel; do installed "$mroot" $p || fail "$p not installed by dnf upgrade"; done
rpm_root "$mroot" -V $name $name-devel || fail "rpm -V after the migration"
# Back to the C package (docs/migration.md): one transaction that installs the named C builds and
# erases mlcachedirect, whose Obsoletes forbid them; then keep dnf upgrade from switching again.
dnf_root "$mroot" install --allowerasing os-transport-1.0.0-1 os-transport-devel-1.0.0-1 \
    >> "$work/log/migration.log" 2>&1 || { cat "$work/log/migration.log"; fail "going back to os-transport"; }
dnf_root "$mroot" upgrade --setopt=excludepkgs="$name*" >> "$work/log/migration.log" 2>&1 ||
    { cat "$work/log/migration.log"; fail "dnf upgrade with excludepkgs"; }
echo "   after going back: $(rpm_root "$mroot" -qa | sort | tr '\n' ' ')"
for p in $name $name-devel; do installed "$mroot" $p && fail "$p still installed after going back"; done
for p in os-transport os-transport-devel; do installed "$mroot" $p || fail "$p not back"; done
rpm_root "$mroot" -V os-transport os-transport-devel || fail "rpm -V after going back"
step "migration os-transport 1.0.0-1 -> $name $version-$release -> os-transport"

# --- 7. rpmlint -------------------------------------------------------------------------------------
set +e
rpmlint -r "$src/packaging/mlcachedirect.rpmlintrc" "${main_rpms[@]}" "${srpms[@]}" "$src/openeuler.spec" \
    > "$work/log/rpmlint.log" 2>&1
set -e
sed 's/^/   /' "$work/log/rpmlint.log"
summary=$(grep -E '[0-9]+ errors?, [0-9]+ warnings?' "$work/log/rpmlint.log" | tail -n 1)
errors=$(sed -E 's/.* ([0-9]+) errors?,.*/\1/' <<<"$summary")
[ -n "$summary" ] && [ "$errors" = 0 ] || fail "rpmlint: ${summary:-no summary}"
step "rpmlint: $summary"
echo "rpm-test: OK"
