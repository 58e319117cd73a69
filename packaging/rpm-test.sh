#!/usr/bin/env bash
# Usage: packaging/rpm-test.sh            (after `make rpm`; `make rpm-test` runs both)
# Install test of the mlcachedirect RPMs under $TARGET_DIR/rpm (default target/rpm), in
# $TARGET_DIR/rpm-test:
#   1. metadata: Provides/Requires/Obsoletes of the RPMs, the files of the runtime package and of
#      mlcachedirect-urma-loopback (the plugin's SONAME and NEEDED liburma.so.0, the helper's none)
#   2. repository: the RPMs + the TEST ONLY stand-ins of packaging/tests/test-stubs.spec, createrepo_c
#   3. clean root: `dnf --installroot` of mlcachedirect, -devel and -conformance into an empty root,
#      `rpm -V`, and checks of the dependency metadata (nothing offers the loopback liburma.so.0)
#   4. C consumer: tests/c/consumer.c (with the C tests' URMA fixture tests/c/urma_fixture.c) built
#      with `pkg-config --cflags --libs os-transport` from the root, run in its `install` mode on
#      the root's library over the loopback provider (2 MiB + 1 byte); again linked with the
#      archive of mlcachedirect-static through `pkg-config --static`
#   5. CMake consumer: the same program built by CMake with find_package(os-transport) from the root
#  5b. consumer-shaped probe: packaging/tests/consumer-shaped (the known consumer's CMake build
#      re-stated, with docs/migration.md's option block) against the archive and the shared
#      library, over the genuine UMDK headers (RPM_TEST_UMDK_INCLUDE / RPM_TEST_UMDK_SRC), run
#      over the loopback; without those headers: skipped, said so; with CI set: a failure
#  5c. the same probe through Bazel (WORKSPACE mode, local_repository of the root's
#      /usr/share/mlcachedirect/bazel), static and shared, where `bazel` is installed
#   6. mlcachedirect-conformance from the root: the full comparison, C runner included; then a
#      few scenarios in hardware mode (--device) with the shipped interposition layer in front;
#      --inject without mlcachedirect-inject: an error naming the package
#   7. runtime-only migration: a root with only the original os-transport 1.0.0-1 (stand-in),
#      `dnf upgrade` to mlcachedirect, dlopen("libos_transport.so") and dlopen("libos_transport.so.1")
#      before and after, then back to os-transport (docs/migration.md)
#   8. migration with -devel: os-transport + os-transport-devel 1.0.0-1 and mlcachedirect-compat
#      1.0.0-2 (old name), upgraded by dnf (Obsoletes), then back to os-transport
#   9. a UMDK host: a root with the genuine URMA core (TEST ONLY stand-in of umdk-urma-lib built
#      from RPM_TEST_UMDK_CORE / RPM_TEST_UMDK_COMMON, which `cargo xtask rpm-test` sets),
#      mlcachedirect-urma-loopback and -conformance: urma_sample (RPM_TEST_URMA_SAMPLE) as server
#      and client on loopback0 with the helper preloaded and URMA_LOOPBACK=1 (and, without it, no
#      loopback0), and mlcachedirect-conformance --device
#      loopback0 (also --split) over the core and its plugin. Without a core: skipped, said so;
#      with CI set: a failure
#  10. mlcachedirect-inject: a root with mlcachedirect alone, then with -inject added: the default
#      library and the loader's cache unchanged, the inject flavour (20 exports) off the loader's
#      path, the tool under both names (list, usage exit code); then -devel and -conformance
#      added: tests/static/inject.c linked by CMake with os-transport::os_transport_inject_static
#      (the flavour's archive) arms a point and sees it on transfers over the loopback, and
#      mlcachedirect-conformance --inject compares both inject flavours: 0 FAIL
#  11. rpmlint of every RPM and the spec: 0 errors
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
           "$rpmdir"/RPMS/"$arch"/$name-{devel,static,conformance,urma-loopback,inject}-"$version"-"$release".*.rpm)
srpms=("$rpmdir"/SRPMS/$name-"$version"-"$release".src.rpm)
shopt -u nullglob
[ ${#main_rpms[@]} -eq 6 ] || fail "expected 6 binary RPMs of $name-$version-$release in $rpmdir/RPMS/$arch (run make rpm): ${main_rpms[*]:-none}"
[ ${#srpms[@]} -eq 1 ] || fail "no source RPM in $rpmdir/SRPMS"
rpm_of() {
    local f
    for f in "${main_rpms[@]}"; do
        if [ "$(rpm -qp --qf '%{NAME}' "$f")" = "$1" ]; then echo "$f"; return 0; fi
    done
    fail "no $1 among ${main_rpms[*]}"
}
conf_rpm=$(rpm_of $name-conformance)
plugin_rpm=$(rpm_of $name-urma-loopback)
inject_rpm=$(rpm_of $name-inject)
# The inject flavour, off the loader's path.
injectdir=$libdir/mlcachedirect/inject
# The loopback's plugin face in UMDK's providers' directory, its preload helper in mlcachedirect's.
plugin=$libdir/urma/liburma-loopback.so
preload=$libdir/mlcachedirect/liburma-loopback-preload.so

rm -rf "$work"
mkdir -p "$work"/{repo,stubin/include,stubs,home,cache,reposd,log}
# rpm's database inside the install roots: /var/lib/rpm (Debian's rpm defaults to ~/.rpmdb).
export HOME=$work/home
echo '%_dbpath /var/lib/rpm' > "$HOME/.rpmmacros"

echo "== rpm-test: packages"
for f in "${main_rpms[@]}" "${srpms[@]}"; do echo "   ${f#"$T"/}"; done

# --- 1. metadata checks -------------------------------------------------------------------------
# The loopback liburma.so.0 and the reference library are private to mlcachedirect-conformance.
# Captured once: `cmd | grep -q` under pipefail fails when grep stops reading early.
main_rpm=$(rpm_of $name)
devel_rpm=$(rpm_of $name-devel)
isa=$(rpm --eval '%{?_isa}')
umdk_min=$(awk '$1 == "%global" && $2 == "umdk_min" { print $3 }' "$src/openeuler.spec")
conf_provides=$(rpm -qp --provides "$conf_rpm")
conf_requires=$(rpm -qp --requires "$conf_rpm")
conf_obsoletes=$(rpm -qp --obsoletes "$conf_rpm")
conf_files=$(rpm -qlp "$conf_rpm")
main_provides=$(rpm -qp --provides "$main_rpm")
main_requires=$(rpm -qp --requires "$main_rpm")
main_files=$(rpm -qlp "$main_rpm")
devel_requires=$(rpm -qp --requires "$devel_rpm")
plugin_provides=$(rpm -qp --provides "$plugin_rpm")
plugin_requires=$(rpm -qp --requires "$plugin_rpm")
plugin_files=$(rpm -qlp "$plugin_rpm")
has() { grep -qx -e "$2" <<<"$1"; }           # has LIST LINE-REGEX
has_fixed() { grep -qxF -e "$2" <<<"$1"; }    # has_fixed LIST LINE
grep -q 'liburma' <<<"$conf_provides" && fail "$name-conformance offers liburma: $(grep liburma <<<"$conf_provides")"
grep -q 'libos_transport' <<<"$conf_provides" && fail "$name-conformance offers libos_transport"
grep -q 'liburma' <<<"$conf_requires" && fail "$name-conformance requires the system liburma"
has_fixed "$conf_files" "$libdir/mlcachedirect/interpose/liburma.so.0" ||
    fail "$name-conformance does not ship the interposition layer $libdir/mlcachedirect/interpose/liburma.so.0"
has_fixed "$conf_provides" "$name-compat = $version-$release" || fail "$name-conformance does not provide $name-compat"
has_fixed "$conf_obsoletes" "$name-compat < $version-$release" || fail "$name-conformance does not obsolete $name-compat"
has_fixed "$main_provides" "libos_transport.so.1()(64bit)" || fail "$name does not provide libos_transport.so.1()(64bit)"
has_fixed "$main_provides" "os-transport = $version-$release" || fail "$name does not provide os-transport"
has_fixed "$main_requires" "liburma.so.0()(64bit)" || fail "$name does not require liburma.so.0()(64bit)"
has_fixed "$main_requires" "umdk-urma-lib$isa >= $umdk_min" || fail "$name does not require umdk-urma-lib$isa >= $umdk_min"
has_fixed "$devel_requires" "umdk-urma-devel$isa >= $umdk_min" ||
    fail "$name-devel does not require umdk-urma-devel$isa >= $umdk_min"
# The runtime package has the three names of the library that the C package had, and the licence.
for f in libos_transport.so libos_transport.so.1 libos_transport.so.1.0.0; do
    has_fixed "$main_files" "$libdir/$f" || fail "$name does not ship $libdir/$f"
done
has "$main_files" '/usr/share/licenses/.*/LICENSE' || fail "$name ships no LICENSE"
# The runtime package uses the system's liburma.so.0 and has none of its own.
grep -q 'liburma' <<<"$main_provides" && fail "$name offers liburma: $(grep liburma <<<"$main_provides")"
grep -q '/liburma' <<<"$main_files" && fail "$name ships a URMA library: $(grep /liburma <<<"$main_files")"
# mlcachedirect-urma-loopback: the plugin (the only file in the providers' directory, where the
# core loads every liburma* file) and the helper; it offers no library and needs UMDK's core.
grep -q 'liburma' <<<"$plugin_provides" && fail "$name-urma-loopback offers $(grep liburma <<<"$plugin_provides")"
has_fixed "$plugin_requires" "liburma.so.0()(64bit)" || fail "$name-urma-loopback does not require liburma.so.0()(64bit)"
has_fixed "$plugin_requires" "umdk-urma-lib$isa >= $umdk_min" ||
    fail "$name-urma-loopback does not require umdk-urma-lib$isa >= $umdk_min"
for f in "$plugin" "$preload"; do has_fixed "$plugin_files" "$f" || fail "$name-urma-loopback does not ship $f"; done
[ "$(grep -c "^$libdir/urma/" <<<"$plugin_files")" = 1 ] ||
    fail "$name-urma-loopback ships more than the plugin in $libdir/urma: $(grep "^$libdir/urma/" <<<"$plugin_files" | tr '\n' ' ')"
mkdir -p "$work/files"
(cd "$work/files" && rpm2cpio "$plugin_rpm" | cpio -id --quiet ".$plugin" ".$preload")
dyn() { readelf -d "$work/files$1" | sed -n -E "s/.*\($2\).*\[(.*)\]/\1/p" | tr '\n' ' '; }
[ "$(dyn "$plugin" SONAME)" = "liburma-loopback.so " ] || fail "$plugin: SONAME '$(dyn "$plugin" SONAME)'"
# The plugin calls the core's registration functions (loads wherever the core is, even RTLD_LOCAL);
# the helper calls no URMA function and must not pull a URMA library into the programs it is
# preloaded into.
grep -qw 'liburma\.so\.0' <<<"$(dyn "$plugin" NEEDED)" || fail "$plugin does not need liburma.so.0: $(dyn "$plugin" NEEDED)"
grep -q 'liburma' <<<"$(dyn "$preload" NEEDED)" && fail "$preload needs $(dyn "$preload" NEEDED)"
# mlcachedirect-static: the archive, whose only global symbols are the ten API functions (readelf:
# no linker plugin), and the Bazel repository; it requires -devel.
static_rpm=$(rpm_of $name-static)
has_fixed "$(rpm -qp --requires "$static_rpm")" "$name-devel$isa = $version-$release" ||
    fail "$name-static does not require $name-devel$isa = $version-$release"
static_files=$(rpm -qlp "$static_rpm")
for f in "$libdir/libos_transport.a" /usr/share/mlcachedirect/bazel/BUILD.bazel /usr/share/mlcachedirect/bazel/WORKSPACE; do
    has_fixed "$static_files" "$f" || fail "$name-static does not ship $f"
done
(cd "$work/files" && rpm2cpio "$static_rpm" | cpio -id --quiet ".$libdir/libos_transport.a")
api="os_transport_cancel_tasks os_transport_destroy os_transport_init os_transport_log_reg os_transport_recv"
api="$api os_transport_reg_jfc os_transport_send os_transport_wake_up_task wait_and_free_sync wait_and_free_sync_timeout "
# archive_globals FILE: the global symbols FILE defines, sorted, on one line.
archive_globals() {
    readelf -sW "$1" | awk '($5 == "GLOBAL" || $5 == "WEAK") && $7 != "UND" { print $8 }' | sort | tr '\n' ' '
}
[ "$(archive_globals "$work/files$libdir/libos_transport.a")" = "$api" ] ||
    fail "$libdir/libos_transport.a: global symbols '$(archive_globals "$work/files$libdir/libos_transport.a")'"
echo "   $name-static: $libdir/libos_transport.a ($(stat -c %s "$work/files$libdir/libos_transport.a") bytes), globals: the 10 API functions"
# mlcachedirect-inject offers no library to the system (its libos_transport.so.1 is loaded by path).
inject_provides=$(rpm -qp --provides "$inject_rpm")
inject_files=$(rpm -qlp "$inject_rpm")
grep -q 'libos_transport' <<<"$inject_provides" && fail "$name-inject offers $(grep libos_transport <<<"$inject_provides")"
for f in "$injectdir/libos_transport.so.1.0.0" "$injectdir/libos_transport.a" /usr/bin/mlcachedirect-inject /usr/bin/mlcd_inject_cli; do
    has_fixed "$inject_files" "$f" || fail "$name-inject does not ship $f"
done
grep -q "^$libdir/libos_transport" <<<"$inject_files" && fail "$name-inject ships a library on the loader's path"
# Its archive: the ten API functions and the ten os_transport_inject_* functions global, no other.
(cd "$work/files" && rpm2cpio "$inject_rpm" | cpio -id --quiet ".$injectdir/libos_transport.a")
inject_api="os_transport_inject_clear os_transport_inject_clear_all os_transport_inject_cleanup os_transport_inject_execute"
inject_api="$inject_api os_transport_inject_get_count os_transport_inject_init os_transport_inject_set_frequency"
inject_api="$inject_api os_transport_inject_set_print os_transport_inject_set_return_error os_transport_inject_set_sleep"
want=$(tr ' ' '\n' <<<"$api $inject_api" | grep . | sort | tr '\n' ' ')
[ "$(archive_globals "$work/files$injectdir/libos_transport.a")" = "$want" ] ||
    fail "$injectdir/libos_transport.a: global symbols '$(archive_globals "$work/files$injectdir/libos_transport.a")'"
echo "   $name-inject: $injectdir/libos_transport.a ($(stat -c %s "$work/files$injectdir/libos_transport.a") bytes), globals: the 10 API and the 10 os_transport_inject_* functions"
# mlcachedirect-conformance ships the C reference's inject flavour for --inject.
has_fixed "$conf_files" "$privdir/legacy-inject/libos_transport.so.1" ||
    fail "$name-conformance does not ship $privdir/legacy-inject/libos_transport.so.1"
# Built without the test-control API: of the loopback's own functions only the helper's two queries.
plugin_exports=$(nm -D --defined-only "$work/files$plugin" | awk '$2 == "T" && $3 ~ /^urma_/ { print $3 }' | sort | tr '
' ' ')
[ "$plugin_exports" = "urma_loopback_plugin_eid_list urma_loopback_plugin_query_device " ] ||
    fail "$plugin exports $plugin_exports(the installed plugin carries no test-control API)"
echo "   $name requires: $(grep -e liburma -e umdk <<<"$main_requires" | tr '\n' ' ')"
echo "   $name-devel requires: $(grep -e umdk -e "^$name" <<<"$devel_requires" | tr '\n' ' ')"
echo "   $name-conformance provides/obsoletes: $(grep compat <<<"$conf_provides" | tr '\n' ' ')/ $conf_obsoletes"
echo "   $name-urma-loopback requires: $(grep -e liburma -e umdk <<<"$plugin_requires" | tr '\n' ' ')"
echo "   $plugin: SONAME $(dyn "$plugin" SONAME)NEEDED $(dyn "$plugin" NEEDED)exports $plugin_exports"
echo "   $preload: NEEDED $(dyn "$preload" NEEDED)"
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
(cd "$work/stubin" && rpm2cpio "$conf_rpm" | cpio -id --quiet ".$privdir/liburma.so.0" ".$privdir/legacy/libos_transport.so.1")
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
# dnf_repo ROOT REPO ARGS...: dnf on the install root ROOT with the one repository REPO (a directory
# of RPMs; its name is the repository's id). dnf_root ROOT ARGS...: the same with $work/repo.
dnf_repo() {
    local root=$1 repo=$2; shift 2
    dnf -y -q --config="$work/dnf.conf" --installroot="$root" --releasever=test --nogpgcheck \
        --disablerepo='*' --repofrompath="${repo##*/},file://$repo" --enablerepo="${repo##*/}" "$@"
}
dnf_root() { local root=$1; shift; dnf_repo "$root" "$work/repo" "$@"; }
rpm_root() { local root=$1; shift; rpm --root="$root" --dbpath=/var/lib/rpm "$@"; }
installed() { rpm_root "$1" -q "$2" >/dev/null 2>&1; }

# --- 3. clean root --------------------------------------------------------------------------------
root=$work/root
mkdir -p "$root"
dnf_root "$root" install $name $name-devel $name-static $name-conformance > "$work/log/install.log" 2>&1 ||
    { cat "$work/log/install.log"; fail "dnf install into a clean root"; }
echo "   installed: $(rpm_root "$root" -qa --qf '%{NAME}-%{VERSION}-%{RELEASE} ' | tr ' ' '\n' | sort | tr '\n' ' ')"
installed "$root" os-transport && fail "os-transport was pulled in"
installed "$root" umdk-urma-lib || fail "liburma.so.0 did not pull in umdk-urma-lib"
rpm_root "$root" -V $name $name-devel $name-static $name-conformance || fail "rpm -V"
echo "   rpm -V $name $name-devel $name-static $name-conformance: OK"
for p in $name $name-devel $name-static $name-conformance; do echo "   rpm -ql $p:"; rpm_root "$root" -ql $p | sed 's/^/     /'; done
[ "$(readlink "$root$libdir/libos_transport.so")" = libos_transport.so.1 ] || fail "libos_transport.so link"
[ "$(rpm_root "$root" -qf --qf '%{NAME}' "$libdir/libos_transport.so")" = $name ] || fail "libos_transport.so is not in $name"
[ -f "$root$libdir/libos_transport.so.1.0.0" ] && [ -x "$root$libdir/libos_transport.so.1.0.0" ] || fail "library file"
[ -e "$root/etc/ld.so.cache" ] || fail "the ldconfig scriptlet did not run"
step "dnf --installroot install, rpm -V"

# --- 4. C consumer (pkg-config) --------------------------------------------------------------------
pcflags=$(PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$root$libdir/pkgconfig:$root/usr/share/pkgconfig \
    pkg-config --cflags --libs os-transport)
echo "   pkg-config --cflags --libs os-transport: $pcflags"
# -I$root/usr/include: the root's /usr/include, which a compiler on the installed system searches
# by default (<ub/umdk/urma/urma_api.h> of umdk-urma-devel). -rpath-link: where the linker finds
# liburma.so.0, which libos_transport.so.1 needs (the loopback, as at run time).
gcc -std=c11 -O2 -Wall -Wextra -Werror -pthread -I"$root/usr/include" -I"$src/tests/c" \
    "$src/tests/c/consumer.c" "$src/tests/c/urma_fixture.c" $pcflags -Wl,-rpath-link,"$root$privdir" \
    -o "$work/consumer"
# Runs the consumer ($1) on the root's library over the loopback and checks which files it used.
run_consumer() {
    local exe=$1 log=$2
    LD_LIBRARY_PATH=$root$libdir:$root$privdir timeout 120 "$exe" install | tee "$log" | sed 's/^/   /' ||
        fail "$exe did not run"
    grep -qF "libos_transport from $root$libdir/libos_transport.so.1," "$log" ||
        fail "$exe did not run on the installed libos_transport.so.1"
    grep -qF "liburma from $root$privdir/liburma.so.0" "$log" ||
        fail "$exe did not run on the loopback liburma.so.0"
    grep -qx "consumer: OK" "$log" || fail "$exe did not finish"
}
run_consumer "$work/consumer" "$work/log/consumer.log"
# The same program linked statically (mlcachedirect-static) with `pkg-config --static`: Libs.private
# carries the system libraries rustc names for the archive; -los_transport taken from the archive.
pcstatic=$(PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$root$libdir/pkgconfig:$root/usr/share/pkgconfig \
    pkg-config --static --libs os-transport)
echo "   pkg-config --static --libs os-transport: $pcstatic"
grep -qw -- -lgcc_s <<<"$pcstatic" || fail "pkg-config --static has no rustc native-static-libs: $pcstatic"
gcc -std=c11 -O2 -Wall -Wextra -Werror -pthread -I"$root/usr/include" -I"$src/tests/c" \
    "$src/tests/c/consumer.c" "$src/tests/c/urma_fixture.c" \
    -I"$root/usr/include/os-transport" ${pcstatic/-los_transport/-Wl,-Bstatic -los_transport -Wl,-Bdynamic} \
    -Wl,-rpath-link,"$root$privdir" -o "$work/consumer-static"
readelf -d "$work/consumer-static" | grep -q 'libos_transport' && fail "consumer-static needs libos_transport.so"
out=$(LD_LIBRARY_PATH=$root$privdir timeout 120 "$work/consumer-static" install) || { echo "$out"; fail "consumer-static"; }
grep -qx "consumer: OK" <<<"$out" || { echo "$out"; fail "consumer-static did not finish"; }
step "C consumer (pkg-config, send + recv of 2 MiB + 1 byte over the loopback; also linked with pkg-config --static)"

# --- 5. CMake consumer -----------------------------------------------------------------------------
# find_package(os-transport) from the root's %{_libdir}/cmake/os-transport; nothing else is given
# but where the root is and, as above, where the linker finds liburma.so.0 of libos_transport.so.1.
command -v cmake >/dev/null || fail "cmake not installed (packaging/deps.sh install rpm)"
# Host adaptation only: CMake on openEuler looks for packages in <prefix>/lib64/cmake; Debian's
# CMake (multiarch: lib/<triplet>) turns FIND_LIBRARY_USE_LIB64_PATHS off after project().
echo 'set_property(GLOBAL PROPERTY FIND_LIBRARY_USE_LIB64_PATHS TRUE)' > "$work/lib64-paths.cmake"
cmake -S "$src/packaging/tests/cmake-consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$root/usr" \
    -DCMAKE_PROJECT_INCLUDE="$work/lib64-paths.cmake" \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$root$privdir" > "$work/log/cmake.log" 2>&1 &&
    cmake --build "$work/cmake-build" --verbose >> "$work/log/cmake.log" 2>&1 ||
    { cat "$work/log/cmake.log"; fail "CMake consumer build"; }
grep -E -- '-o cmake-consumer|cmake-consumer ' "$work/log/cmake.log" | tail -n 1 | sed 's/^/   link: /'
run_consumer "$work/cmake-build/cmake-consumer" "$work/log/cmake-consumer.log"
step "CMake consumer (find_package(os-transport), send + recv over the loopback)"

# consumer_probe ROOT LINKAGE: the consumer-shaped probe built from ROOT with
# MLCACHEDIRECT_LINKAGE=LINKAGE (static, shared, inject) and the genuine UMDK headers $uinc; its
# programs move 2 MiB + 1 byte over the loopback; a static link (static, inject) needs no
# libos_transport.so.1 and its libdatasystem.so exports the archive's public names (inject: the
# os_transport_inject_* too) and no Rust symbol.
consumer_probe() {
    local r=$1 linkage=$2 b plog ds needed exports exe out from f rust
    b=$work/probe-$linkage
    plog=$work/log/probe-$linkage.log
    cmake -S "$src/packaging/tests/consumer-shaped" -B "$b" -DCMAKE_PREFIX_PATH="$r/usr" \
        -DCMAKE_PROJECT_INCLUDE="$work/lib64-paths.cmake" -DMLCACHEDIRECT_SYSTEM=ON \
        -DMLCACHEDIRECT_LINKAGE=$linkage -DURMA_INCLUDE_DIR="$uinc" \
        -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$r$privdir" > "$plog" 2>&1 &&
        cmake --build "$b" --verbose >> "$plog" 2>&1 || { cat "$plog"; fail "consumer-shaped probe build ($linkage)"; }
    grep -q -- "-I$uinc" "$plog" || fail "the probe was not compiled with the genuine UMDK headers $uinc"
    ds=$b/src/client/libdatasystem.so
    needed=$(readelf -d "$ds" | sed -n -E 's/.*\(NEEDED\).*\[(.*)\]/\1/p' | tr '\n' ' ')
    exports=$(readelf --dyn-syms -W "$ds" | awk '$7 != "UND" && $5 != "LOCAL" && NF >= 8 { print $8 }')
    for exe in datasystem_worker pipeline_direct; do
        out=$(LD_LIBRARY_PATH=$r$libdir:$r$privdir timeout 120 "$b/src/client/$exe" 2>&1) ||
            { echo "$out"; fail "$exe ($linkage) failed"; }
        grep -qx "consumer: OK" <<<"$out" && grep -qx "$exe: OK" <<<"$out" || { echo "$out"; fail "$exe ($linkage)"; }
        from=$(sed -n 's/^consumer: os_transport.h [0-9]*, libos_transport from \(.*\), liburma from .*/\1/p' <<<"$out")
        echo "   $linkage: $exe: 2 MiB + 1 byte sent and received; os_transport from $from"
        if [ $linkage = shared ]; then
            [ "$from" = "$r$libdir/libos_transport.so.1" ] || fail "$exe ($linkage) ran $from"
        else
            case $from in *libos_transport*) fail "$exe ($linkage) ran $from" ;; esac
        fi
    done
    if [ $linkage = shared ]; then
        grep -qw 'libos_transport\.so\.1' <<<"$needed" || fail "libdatasystem.so ($linkage) needs $needed"
    else
        grep -q libos_transport <<<"$needed" && fail "libdatasystem.so ($linkage) needs $needed"
        # Rust's names: v0 (_R...), legacy (_ZN...17h<hash>E) and the runtime's (rust_*).
        rust=$(grep -E '^_R|17h[0-9a-f]{16}E$|rust' <<<"$exports" || true)
        [ -z "$rust" ] || fail "libdatasystem.so ($linkage) exports Rust symbols: $(head -n 5 <<<"$rust" | tr '\n' ' ')"
        for f in $api; do grep -qx "$f" <<<"$exports" || fail "libdatasystem.so ($linkage) does not export $f"; done
    fi
    if [ $linkage = inject ]; then
        for f in $inject_api; do grep -qx "$f" <<<"$exports" || fail "libdatasystem.so ($linkage) does not export $f"; done
    fi
    echo "   $linkage: libdatasystem.so (no version script): NEEDED $needed; $(wc -l <<<"$exports") exports, no Rust symbol"
}
# --- 5b. the consumer-shaped probe -----------------------------------------------------------------
# packaging/tests/consumer-shaped: the known consumer's build re-stated (its target and variable
# names, the include "os-transport/os_transport.h", URMA_OVER_UB, a static library linked into a
# shared library without a version script and into programs), with the option block of
# docs/migration.md, built from the root against the archive and against the shared library and
# run over the loopback (2 MiB + 1 byte). The URMA headers are the genuine UMDK ones
# (RPM_TEST_UMDK_INCLUDE, or assembled from the source tree RPM_TEST_UMDK_SRC; `make rpm-test`
# passes one): the stand-in umdk-urma-devel has no urma_ubagg.h.
uinc=${RPM_TEST_UMDK_INCLUDE:-}
if [ -z "$uinc" ] && [ -n "${RPM_TEST_UMDK_SRC:-}" ]; then
    uinc=$work/umdk-include
    mkdir -p "$uinc/ub/umdk/urma"
    cp "$RPM_TEST_UMDK_SRC"/src/urma/lib/urma/core/include/*.h \
        "$RPM_TEST_UMDK_SRC"/src/urma/lib/urma/bond/include/urma_ubagg.h "$uinc/ub/umdk/urma/"
fi
if [ -z "$uinc" ]; then
    why="no genuine UMDK headers (RPM_TEST_UMDK_INCLUDE or RPM_TEST_UMDK_SRC: \`make rpm-test\` passes the system's or UMDK_SRC)"
    [ -z "${CI:-}" ] || fail "$why; in CI this step must run"
    echo "== rpm-test: consumer-shaped probe: $why: skipped"
else
    [ -f "$uinc/ub/umdk/urma/urma_ubagg.h" ] || fail "$uinc has no ub/umdk/urma/urma_ubagg.h"
    # The option block the probe builds is the one docs/migration.md gives (its cmake block).
    block=$src/packaging/tests/consumer-shaped/cmake/external_libs/mlcachedirect.cmake
    diff <(grep -v '^#' "$block") <(sed -n '/^```cmake$/,/^```$/p' "$src/docs/migration.md" | sed '1d;$d') ||
        fail "docs/migration.md's CMake block differs from $block"
    for linkage in static shared; do consumer_probe "$root" $linkage; done
    step "consumer-shaped probe (CMake, static and shared, genuine UMDK headers, send + recv over the loopback)"

    # --- 5c. the same probe through Bazel (Debian's bazel-bootstrap, where it is installed) --------
    # WORKSPACE mode, offline: @mlcachedirect is the root's installed repository (the consumer's one
    # line, pointed into the root with --override_repository), @local_urma the genuine headers and
    # the root's link-time liburma.so; rules_cc and rules_java, which Bazel's default WORKSPACE
    # would download, are local stand-ins of the native rules, platforms is Debian's.
    if ! command -v bazel >/dev/null; then
        echo "== rpm-test: consumer-shaped probe through Bazel: no bazel (packaging/deps.sh install bazel: Debian's bazel-bootstrap): skipped"
    else
        bw=$work/bazel-probe
        mkdir -p "$bw/c" "$work/bazel-urma/lib"
        cp -r "$src/packaging/tests/consumer-shaped/." "$bw/"
        cp "$src/tests/c/consumer.c" "$src/tests/c/urma_fixture.c" "$src/tests/c/urma_fixture.h" "$bw/c/"
        echo 'workspace(name = "local_urma")' > "$work/bazel-urma/WORKSPACE"
        cp "$bw/bazel/local_urma.BUILD" "$work/bazel-urma/BUILD.bazel"
        ln -sfn "$uinc" "$work/bazel-urma/include"
        ln -sf "$root$libdir/liburma.so" "$work/bazel-urma/lib/liburma.so"
        bazel_opts=(--override_repository=mlcachedirect="$root/usr/share/mlcachedirect/bazel"
                    --override_repository=local_urma="$work/bazel-urma"
                    --override_repository=rules_cc="$bw/bazel/rules_cc"
                    --override_repository=rules_java="$bw/bazel/rules_java"
                    --override_repository=platforms=/usr/share/bazel/tools/platforms
                    --linkopt=-Wl,-rpath-link,"$root$privdir")
        for linkage in static shared; do
            blog=$work/log/bazel-$linkage.log
            define=()
            [ $linkage = shared ] && define=(--define os_transport_linkage=shared)
            (cd "$bw" && bazel --batch --output_user_root="$work/bazel-root" build "${bazel_opts[@]}" "${define[@]}" \
                //:pipeline_direct //:libdatasystem.so) > "$blog" 2>&1 || { tail -n 40 "$blog"; fail "Bazel probe build ($linkage)"; }
            exe=$bw/bazel-bin/pipeline_direct
            out=$(LD_LIBRARY_PATH=$root$libdir:$root$privdir timeout 120 "$exe" 2>&1) || { echo "$out"; fail "Bazel pipeline_direct ($linkage)"; }
            grep -qx "consumer: OK" <<<"$out" || { echo "$out"; fail "Bazel pipeline_direct ($linkage)"; }
            from=$(sed -n 's/^consumer: os_transport.h [0-9]*, libos_transport from \(.*\), liburma from .*/\1/p' <<<"$out")
            needed=$(readelf -d "$exe" | sed -n -E 's/.*\(NEEDED\).*\[(.*)\]/\1/p' | tr '\n' ' ')
            exports=$(readelf --dyn-syms -W "$bw/bazel-bin/libdatasystem.so" | awk '$7 != "UND" && $5 != "LOCAL" && NF >= 8 { print $8 }')
            if [ $linkage = shared ]; then
                grep -qw 'libos_transport\.so\.1' <<<"$needed" || fail "Bazel pipeline_direct ($linkage) needs $needed"
            else
                grep -q libos_transport <<<"$needed" && fail "Bazel pipeline_direct ($linkage) needs $needed"
                grep -qE '^_R|17h[0-9a-f]{16}E$|rust' <<<"$exports" && fail "Bazel libdatasystem.so ($linkage) exports Rust symbols"
            fi
            echo "   Bazel, $linkage: pipeline_direct moved 2 MiB + 1 byte (os_transport from $from); NEEDED $needed"
        done
        step "consumer-shaped probe through Bazel $(bazel --batch --output_user_root="$work/bazel-root" --version 2>/dev/null | tr -d '\n') (static and --define os_transport_linkage=shared)"
    fi
fi

# --- 6. mlcachedirect-conformance --------------------------------------------------------------------
# root_wrapper ROOT DEST: ROOT's installed wrapper, with its absolute paths moved into ROOT, as DEST.
root_wrapper() {
    sed -e "s|$privdir|$1$privdir|g" -e "s|$libdir/libos_transport|$1$libdir/libos_transport|g" \
        -e "s|$libdir/mlcachedirect|$1$libdir/mlcachedirect|g" "$1/usr/bin/$name-conformance" > "$2"
    chmod +x "$2"
}
# conformance_device WRAPPER REAL OUT LOG [VAR=VALUE...]: WRAPPER's hardware mode on loopback0, with
# the shipped layer in front of the liburma.so.0 REAL, four scenarios, in the environment given;
# checks that the layer was in front of REAL, that the harness reports 0 urma_loopback_* calls and
# that recv-capacity-0 (which needs the loopback's control API) is skipped.
conformance_device() {
    local wrapper=$1 real=$2 out=$3 log=$4
    shift 4
    env URMA_INTERPOSE_REAL="$real" "$@" "$wrapper" --device loopback0 \
        --scenario len-6m+5 --scenario error-cr --scenario dup-send-cr --scenario recv-capacity-0 \
        --no-interop --out "$out" > "$log" 2>&1 || { tail -n 30 "$log"; fail "$name-conformance --device ($log)"; }
    grep -qF "interposition layer in front of $real" "$log" ||
        fail "$name-conformance --device did not put the layer in front of $real"
    grep -qxF 'compat: urma_loopback_* calls by the harness: 0 (the binding is forbidden in hardware mode)' "$log" ||
        fail "$name-conformance --device: control API calls not reported as 0"
    grep -qE '^SKIPPED +recv-capacity-0 ' "$log" || fail "$name-conformance --device did not skip recv-capacity-0"
    grep -E '^compat: [0-9]+ scenarios' "$log" | sed 's/^/   /'
}
if [ -e "$root/usr/bin/$name-conformance" ]; then
    root_wrapper "$root" "$work/$name-conformance"
    # The full comparison, as a user runs it: catalogue, C runner, random scenarios, interop.
    if "$work/$name-conformance" --out "$work/conformance" > "$work/log/conformance.log" 2>&1; then
        tail -n 3 "$work/log/conformance.log" | sed 's/^/   /'
    else
        tail -n 30 "$work/log/conformance.log"; fail "$name-conformance"
    fi
    for f in report.html report.md report.json report.xml; do
        [ -s "$work/conformance/$f" ] || fail "$name-conformance wrote no $f"
    done
    summary=$(grep -E '^compat: [0-9]+ scenarios' "$work/log/conformance.log" | tail -n 1)
    c_runner=$(sed -E -n 's/.*, ([0-9]+) C runner,.*/\1/p' <<<"$summary")
    [ "${c_runner:-0}" -gt 0 ] || fail "$name-conformance ran no C runner scenario: $summary"
    files=$(sed -E -n 's/.*, ([0-9]+) from files\).*/\1/p' <<<"$summary")
    [ "${files:-0}" -gt 0 ] || fail "$name-conformance ran none of its shipped scenario files: $summary"
    step "$name-conformance on the installed library ($c_runner C runner scenarios, $files scenario files)"
    # Hardware mode: the shipped layer in front of the system liburma.so.0. The root has no UMDK
    # library (its stand-in ships no file), so the shipped loopback plays an unknown provider.
    conformance_device "$work/$name-conformance" "$root$privdir/liburma.so.0" "$work/conformance-device" \
        "$work/log/conformance-device.log"
    step "$name-conformance --device loopback0 (hardware mode, layer from $libdir/mlcachedirect/interpose)"
    # --inject without mlcachedirect-inject: no crash, an error that names the package (step 10
    # runs it with the package).
    rc=0
    "$work/$name-conformance" --inject --out "$work/conformance-inject-absent" > "$work/log/conformance-inject-absent.log" 2>&1 || rc=$?
    [ $rc = 2 ] && grep -q 'install mlcachedirect-inject' "$work/log/conformance-inject-absent.log" ||
        { cat "$work/log/conformance-inject-absent.log"; fail "$name-conformance --inject without $name-inject: exit $rc"; }
    sed 's/^/   /' "$work/log/conformance-inject-absent.log"
    step "$name-conformance --inject without $name-inject: exit 2, names the package"
else
    echo "== rpm-test: $name-conformance: not in this build (harness not built), skipped"
fi

# --- 7. runtime-only migration and dlopen ---------------------------------------------------------
gcc -std=c11 -O2 -Wall -Wextra -Werror "$src/packaging/tests/dlopen.c" -ldl -o "$work/dlopen"
# dlopen_check ROOT PACKAGE: both names load from ROOT's library directory, whose real file is
# owned by PACKAGE (liburma.so.0 = the loopback of the clean root; the stand-in UMDK has none).
dlopen_check() {
    local r=$1 pkg=$2 out n path owner
    out=$(LD_LIBRARY_PATH=$r$libdir:$root$privdir "$work/dlopen" libos_transport.so libos_transport.so.1) ||
        fail "dlopen in $r ($pkg)"
    for n in libos_transport.so libos_transport.so.1; do
        path=$(awk -v n=$n '$1 == n { print $2 }' <<<"$out")
        [ "$path" = "$r$libdir/$n" ] || fail "dlopen(\"$n\") loaded ${path:-nothing}, not $r$libdir/$n"
        owner=$(rpm_root "$r" -qf --qf '%{NAME}-%{VERSION}-%{RELEASE}' "$libdir/$(readlink -f "$path" | xargs basename)")
        [ "${owner%-*-*}" = "$pkg" ] || fail "dlopen(\"$n\") loaded a file of $owner, expected $pkg"
        echo "   dlopen(\"$n\") -> ${path#"$r"} -> $(readlink -f "$path" | xargs basename) ($owner)"
    done
}
rroot=$work/runtime-root
mkdir -p "$rroot"
# By full name: a bare "os-transport" resolves to mlcachedirect, which provides and obsoletes it.
dnf_root "$rroot" install os-transport-1.0.0-1 mlcachedirect-test-host > "$work/log/runtime-migration.log" 2>&1 ||
    { cat "$work/log/runtime-migration.log"; fail "installing the os-transport stand-in"; }
echo "   before: $(rpm_root "$rroot" -qa | sort | tr '\n' ' ')"
installed "$rroot" os-transport && ! installed "$rroot" $name || fail "the root does not start with os-transport alone"
dlopen_check "$rroot" os-transport
dnf_root "$rroot" upgrade >> "$work/log/runtime-migration.log" 2>&1 ||
    { cat "$work/log/runtime-migration.log"; fail "dnf upgrade (runtime only)"; }
echo "   after dnf upgrade: $(rpm_root "$rroot" -qa | sort | tr '\n' ' ')"
installed "$rroot" os-transport && fail "os-transport not replaced by dnf upgrade"
installed "$rroot" $name || fail "$name not installed by dnf upgrade"
installed "$rroot" $name-devel && fail "dnf upgrade of the runtime package pulled in $name-devel"
rpm_root "$rroot" -V $name || fail "rpm -V after the runtime-only migration"
dlopen_check "$rroot" $name
dnf_root "$rroot" install --allowerasing os-transport-1.0.0-1 >> "$work/log/runtime-migration.log" 2>&1 ||
    { cat "$work/log/runtime-migration.log"; fail "going back to os-transport (runtime only)"; }
dnf_root "$rroot" upgrade --setopt=excludepkgs="$name*" >> "$work/log/runtime-migration.log" 2>&1 ||
    { cat "$work/log/runtime-migration.log"; fail "dnf upgrade with excludepkgs (runtime only)"; }
installed "$rroot" $name && fail "$name still installed after going back"
rpm_root "$rroot" -V os-transport || fail "rpm -V after going back (runtime only)"
dlopen_check "$rroot" os-transport
step "runtime-only migration os-transport -> $name -> os-transport, dlopen of both names each time"

# --- 8. migration with -devel and the old harness package ----------------------------------------
mroot=$work/migration-root
mkdir -p "$mroot"
dnf_root "$mroot" install os-transport-1.0.0-1 os-transport-devel-1.0.0-1 mlcachedirect-compat-1.0.0-2 \
    mlcachedirect-test-host > "$work/log/migration.log" 2>&1 || { cat "$work/log/migration.log"; fail "installing the stand-ins"; }
echo "   before: $(rpm_root "$mroot" -qa | sort | tr '\n' ' ')"
for p in os-transport os-transport-devel $name-compat; do installed "$mroot" $p || fail "$p stand-in not installed"; done
for p in $name $name-devel $name-conformance; do installed "$mroot" $p && fail "$p installed too early"; done
# dnf upgrade replaces os-transport, os-transport-devel and mlcachedirect-compat through the Obsoletes.
dnf_root "$mroot" upgrade >> "$work/log/migration.log" 2>&1 || { cat "$work/log/migration.log"; fail "dnf upgrade"; }
echo "   after dnf upgrade: $(rpm_root "$mroot" -qa | sort | tr '\n' ' ')"
for p in os-transport os-transport-devel $name-compat; do installed "$mroot" $p && fail "$p not replaced by dnf upgrade"; done
for p in $name $name-devel $name-conformance; do installed "$mroot" $p || fail "$p not installed by dnf upgrade"; done
rpm_root "$mroot" -V $name $name-devel $name-conformance || fail "rpm -V after the migration"
# Back to the C package (docs/migration.md): one transaction that installs the named C builds and
# erases mlcachedirect, whose Obsoletes forbid them; then keep dnf upgrade from switching again.
dnf_root "$mroot" install --allowerasing os-transport-1.0.0-1 os-transport-devel-1.0.0-1 \
    >> "$work/log/migration.log" 2>&1 || { cat "$work/log/migration.log"; fail "going back to os-transport"; }
dnf_root "$mroot" upgrade --setopt=excludepkgs="$name*" >> "$work/log/migration.log" 2>&1 ||
    { cat "$work/log/migration.log"; fail "dnf upgrade with excludepkgs"; }
echo "   after going back: $(rpm_root "$mroot" -qa | sort | tr '\n' ' ')"
for p in $name $name-devel $name-conformance; do installed "$mroot" $p && fail "$p still installed after going back"; done
for p in os-transport os-transport-devel; do installed "$mroot" $p || fail "$p not back"; done
rpm_root "$mroot" -V os-transport os-transport-devel || fail "rpm -V after going back"
step "migration os-transport(-devel) 1.0.0-1 + $name-compat 1.0.0-2 -> $name $version-$release -> os-transport"

# --- 9. a UMDK host: the genuine URMA core with the loopback's plugin -----------------------------
umdk_core=${RPM_TEST_UMDK_CORE:-}
umdk_common=${RPM_TEST_UMDK_COMMON:-}
sample=${RPM_TEST_URMA_SAMPLE:-}
if [ -z "$umdk_core" ] || [ -z "$umdk_common" ]; then
    why="no genuine URMA core named (RPM_TEST_UMDK_CORE, RPM_TEST_UMDK_COMMON: \`make rpm-test\` names the system's, or one it builds from UMDK_SRC)"
    [ -z "${CI:-}" ] || fail "$why; in CI this step must run"
    echo "== rpm-test: a UMDK host: $why: skipped"
else
    # The TEST ONLY stand-in of umdk-urma-lib with the genuine core, in a repository of its own:
    # the roots above run without a system core.
    ustub=$work/stubin-umdk
    mkdir -p "$ustub" "$work/umdk-repo"
    # umdk_lib FILE NAME: the real file of FILE under its own name (the plugin reads the core's
    # version from it) and NAME linking to it, as UMDK installs them.
    umdk_lib() {
        local real
        real=$(readlink -f "$1")
        [ -f "$real" ] || fail "$1: no such file"
        cp "$real" "$ustub/"
        [ "${real##*/}" = "$2" ] || ln -sf "${real##*/}" "$ustub/$2"
    }
    umdk_lib "$umdk_core" liburma.so.0
    umdk_lib "$umdk_common" liburma_common.so.0
    rpmbuild -bb --quiet --define "_topdir $work/stubs-umdk" --define "stubdir $work/stubin" \
        --define "umdkdir $ustub" "$src/packaging/tests/test-stubs.spec" > "$work/log/stubs-umdk.log" 2>&1 ||
        { cat "$work/log/stubs-umdk.log"; fail "building the genuine-core stand-in of umdk-urma-lib"; }
    cp "${main_rpms[@]}" "$work"/stubs-umdk/RPMS/*/{umdk-urma-lib,mlcachedirect-test-host}-*.rpm "$work/umdk-repo/"
    createrepo_c --quiet "$work/umdk-repo"
    uroot=$work/umdk-root
    mkdir -p "$uroot"
    upkgs=($name-urma-loopback)
    if [ -e "$root/usr/bin/$name-conformance" ]; then upkgs+=($name-conformance); fi
    dnf_repo "$uroot" "$work/umdk-repo" install "${upkgs[@]}" > "$work/log/umdk-install.log" 2>&1 ||
        { cat "$work/log/umdk-install.log"; fail "dnf install into the UMDK root"; }
    echo "   installed: $(rpm_root "$uroot" -qa --qf '%{NAME}-%{VERSION}-%{RELEASE} ' | tr ' ' '\n' | sort | tr '\n' ' ')"
    rpm_root "$uroot" -V "${upkgs[@]}" umdk-urma-lib || fail "rpm -V in the UMDK root"
    [ "$(rpm_root "$uroot" -qf --qf '%{NAME}' "$plugin")" = $name-urma-loopback ] || fail "$plugin is not in $name-urma-loopback"
    [ "$(ls "$uroot$libdir/urma")" = liburma-loopback.so ] ||
        fail "the core's providers' directory holds $(ls "$uroot$libdir/urma" | tr '\n' ' ')"
    ucore=$uroot$libdir/liburma.so.0
    echo "   core: $libdir/liburma.so.0 -> $(readlink "$ucore") ($(rpm_root "$uroot" -qf "$libdir/liburma.so.0")); plugin: $plugin"
    step "a UMDK host: stand-in umdk-urma-lib with the genuine core, dnf install ${upkgs[*]}, rpm -V"

    # UMDK's own program as the package's description shows it (LD_PRELOAD=<helper> urma_sample
    # -d loopback0), the root's library directory standing for the system's: a server and a client
    # (RC): the client WRITEs, READs back and SENDs, the server answers; a key ends the server.
    if [ -z "$sample" ]; then
        [ -z "${CI:-}" ] || fail "no urma_sample (RPM_TEST_URMA_SAMPLE); in CI it must run"
        echo "   no urma_sample (RPM_TEST_URMA_SAMPLE): not run"
    else
        # Inert until asked: without URMA_LOOPBACK=1 the plugin makes no loopback0.
        inert_rc=0
        timeout 20 env LD_LIBRARY_PATH="$uroot$libdir" LD_PRELOAD="$uroot$preload" "$sample" -m 1 \
            -d loopback0 -p 1 < /dev/null > "$work/log/sample-inert.log" 2>&1 || inert_rc=$?
        case $inert_rc in
            0|124) cat "$work/log/sample-inert.log"
                   fail "urma_sample -d loopback0 without URMA_LOOPBACK=1: exit $inert_rc (the plugin is not inert)" ;;
        esac
        echo "   without URMA_LOOPBACK=1: urma_sample -d loopback0 exits $inert_rc ($(grep -m1 -i -e fail -e 'not' "$work/log/sample-inert.log" || true))"
        uenv=(LD_LIBRARY_PATH="$uroot$libdir" LD_PRELOAD="$uroot$preload" URMA_LOOPBACK=1)
        # is_listening PORT: a TCP socket of this machine listens on PORT.
        is_listening() {
            local f hex
            hex=$(printf ':%04X' "$1")
            for f in /proc/net/tcp /proc/net/tcp6; do
                [ -r "$f" ] && awk -v h="$hex" 'FNR > 1 && $4 == "0A" && substr($2, length($2) - 4) == h { f = 1 }
                    END { exit !f }' "$f" && return 0
            done
            return 1
        }
        port=$((20000 + RANDOM % 20000))
        while is_listening $port; do port=$((port + 1)); done
        mkfifo "$work/sample-key"
        timeout 60 env "${uenv[@]}" "$sample" -m 1 -d loopback0 -p $port < "$work/sample-key" \
            > "$work/log/sample-server.log" 2>&1 &
        server=$!
        exec 8> "$work/sample-key"
        for _ in $(seq 300); do
            is_listening $port || ! kill -0 $server 2>/dev/null && break
            sleep 0.1
        done
        client_rc=0
        timeout 60 env "${uenv[@]}" "$sample" -m 1 -d loopback0 -i 127.0.0.1 -p $port \
            > "$work/log/sample-client.log" 2>&1 || client_rc=$?
        echo q >&8
        exec 8>&-
        server_rc=0
        wait $server || server_rc=$?
        [ $client_rc = 0 ] && [ $server_rc = 0 ] || {
            tail -n 20 "$work/log/sample-server.log" "$work/log/sample-client.log"
            fail "urma_sample: server exit $server_rc, client exit $client_rc"
        }
        line() { sed -n "s/^$1: //p" "$work/log/sample-$2.log" | head -n 1; }
        written=$(line 'Msg write' client)
        [ -n "$written" ] && [ "$(line 'Msg read' client)" = "$written" ] ||
            fail "urma_sample: the client READ back '$(line 'Msg read' client)', it WROTE '$written'"
        sent=$(line 'Msg sent' client)
        [ -n "$sent" ] && grep -qF "Msg received: $sent" "$work/log/sample-server.log" ||
            fail "urma_sample: the server did not receive the client's '$sent'"
        line 'Response received' client | grep -q '^Send response from server' ||
            fail "urma_sample: the client got no response from the server"
        echo "   client: WRITE/READ '$written', SEND '$sent', response '$(line 'Response received' client)'"
        step "urma_sample -m 1 -d loopback0 over the genuine core, plugin and helper of the root (server + client)"
    fi

    # mlcachedirect-conformance --device loopback0: the shipped layer in front of the root's
    # genuine core, which loads the plugin from its providers' directory (the loader's record,
    # LD_DEBUG=files, shows by whom and from where). No helper: the harness never queries the device.
    if [ -e "$uroot/usr/bin/$name-conformance" ]; then
        root_wrapper "$uroot" "$work/umdk-$name-conformance"
        ulog=$work/log/umdk-conformance-device.log
        conformance_device "$work/umdk-$name-conformance" "$ucore" "$work/umdk-conformance-device" "$ulog" \
            LD_LIBRARY_PATH="$uroot$libdir" LD_DEBUG=files LD_DEBUG_OUTPUT="$work/log/umdk-ld"
        grep -qF "file=$(readlink -f "$uroot$plugin") [0];  dynamically loaded by $ucore [0]" "$work"/log/umdk-ld.* ||
            fail "the core $ucore did not load the plugin $uroot$plugin"
        grep -q 'note: no' "$ulog" && fail "$name-conformance --device loopback0 did not find the plugin: $(grep 'note: no' "$ulog")"
        slog=$work/log/umdk-conformance-split.log
        env URMA_INTERPOSE_REAL="$ucore" LD_LIBRARY_PATH="$uroot$libdir" "$work/umdk-$name-conformance" \
            --split --device loopback0 --scenario len-6m+5 --no-interop --out "$work/umdk-conformance-split" \
            > "$slog" 2>&1 || { tail -n 30 "$slog"; fail "$name-conformance --split --device loopback0 over the genuine core"; }
        grep -E '^compat --split: [0-9]+ scenarios' "$slog" | sed 's/^/   /'
        step "$name-conformance --device loopback0 (and --split) over the root's genuine core and plugin"
    fi
fi

# --- 10. mlcachedirect-inject -------------------------------------------------------------------
iroot=$work/inject-root
mkdir -p "$iroot"
dnf_root "$iroot" install $name > "$work/log/inject-install.log" 2>&1 ||
    { cat "$work/log/inject-install.log"; fail "dnf install $name (inject root)"; }
# exports FILE: the functions FILE defines in its dynamic symbol table.
exports() { nm -D --defined-only "$1" | awk '$2 == "T" { print $3 }' | sort; }
default_lib=$iroot$libdir/libos_transport.so.1.0.0
before=$(exports "$default_lib")
cache_before=$(sha256sum "$iroot/etc/ld.so.cache" | cut -d' ' -f1)
[ "$(grep -c . <<<"$before")" = 10 ] || fail "the default library exports $(grep -c . <<<"$before") functions"
dnf_root "$iroot" install $name-inject >> "$work/log/inject-install.log" 2>&1 ||
    { cat "$work/log/inject-install.log"; fail "dnf install $name-inject"; }
rpm_root "$iroot" -V $name $name-inject || fail "rpm -V with $name-inject"
[ "$(exports "$default_lib")" = "$before" ] || fail "installing $name-inject changed the default library"
[ "$(sha256sum "$iroot/etc/ld.so.cache" | cut -d' ' -f1)" = "$cache_before" ] ||
    fail "installing $name-inject changed the loader's cache"
flavour=$(exports "$iroot$injectdir/libos_transport.so.1.0.0")
[ "$(grep -c . <<<"$flavour")" = 20 ] && [ "$(grep -c '^os_transport_inject_' <<<"$flavour")" = 10 ] ||
    fail "the inject flavour exports: $(tr '\n' ' ' <<<"$flavour")"
[ "$(readlink "$iroot$injectdir/libos_transport.so")" = libos_transport.so.1 ] || fail "$injectdir/libos_transport.so link"
for tool in mlcachedirect-inject mlcd_inject_cli; do
    out=$("$iroot/usr/bin/$tool" list) || fail "$tool list"
    [ "$(head -n 1 <<<"$out")" = "Available injection points:" ] && [ "$(grep -c 'os_transport\.' <<<"$out")" = 7 ] ||
        fail "$tool list: $out"
    rc=0; "$iroot/usr/bin/$tool" > /dev/null 2>&1 || rc=$?
    [ $rc = 1 ] || fail "$tool without a command exits $rc, not 1"
done
echo "   default library: 10 exports, unchanged; $injectdir: 20 exports (10 os_transport_inject_*); loader cache unchanged"
step "$name-inject beside $name: the default library stays the default, the tool under both names"
# The inject flavour's archive, through -devel's CMake package: packaging/tests/cmake-consumer
# builds cmake-inject (tests/static/inject.c with consumer.c's install test) with
# os-transport::os_transport_inject_static alone; it arms os_transport.send.begin with the
# archive's own functions (a sleep delays a transfer over the loopback, an error fails it, the
# cleared point lets it through). The registry is one per host: the run holds the test lock that
# the project's tests and the harness take.
dnf_root "$iroot" install $name-devel $name-conformance >> "$work/log/inject-install.log" 2>&1 ||
    { cat "$work/log/inject-install.log"; fail "dnf install $name-devel $name-conformance (inject root)"; }
rpm_root "$iroot" -V $name $name-inject $name-devel $name-conformance || fail "rpm -V in the inject root"
registry_lock=${TMPDIR:-/tmp}/os_transport_inject.test-lock
ilog=$work/log/cmake-inject.log
cmake -S "$src/packaging/tests/cmake-consumer" -B "$work/cmake-inject-build" -DCMAKE_PREFIX_PATH="$iroot/usr" \
    -DCMAKE_PROJECT_INCLUDE="$work/lib64-paths.cmake" \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$iroot$privdir" > "$ilog" 2>&1 &&
    cmake --build "$work/cmake-inject-build" --verbose >> "$ilog" 2>&1 || { cat "$ilog"; fail "CMake build of cmake-inject"; }
iexe=$work/cmake-inject-build/cmake-inject
[ -x "$iexe" ] || fail "no cmake-inject: os-transport::os_transport_inject_static is not defined with $name-inject installed"
grep -qF -- "$iroot$injectdir/libos_transport.a" "$ilog" || fail "cmake-inject was not linked with $injectdir/libos_transport.a"
readelf -d "$iexe" | grep -q libos_transport && fail "cmake-inject needs libos_transport.so"
out=$(LD_LIBRARY_PATH=$iroot$privdir flock "$registry_lock" timeout 120 "$iexe" 2>&1) || { echo "$out"; fail "cmake-inject"; }
grep -qx 'inject: OK' <<<"$out" || { echo "$out"; fail "cmake-inject did not finish"; }
grep '^inject: ' <<<"$out" | sed 's/^/   /'
step "the inject archive linked by CMake (os-transport::os_transport_inject_static): a point armed through it acts on transfers over the loopback"
# The consumer's CMake option block with MLCACHEDIRECT_LINKAGE=inject (the probe of step 5b).
if [ -n "$uinc" ]; then
    consumer_probe "$iroot" inject
    step "consumer-shaped probe with MLCACHEDIRECT_LINKAGE=inject (the inject flavour's archive)"
fi
# mlcachedirect-conformance --inject on the installed flavours: the Rust one of -inject, the C
# reference's of -conformance.
root_wrapper "$iroot" "$work/inject-$name-conformance"
clog=$work/log/conformance-inject.log
"$work/inject-$name-conformance" --inject --out "$work/conformance-inject" > "$clog" 2>&1 ||
    { tail -n 30 "$clog"; fail "$name-conformance --inject"; }
grep -qF "Rust library (inject flavour):        $iroot$injectdir/libos_transport.so.1" "$clog" ||
    fail "$name-conformance --inject did not run the installed Rust inject flavour"
grep -qF "reference C library (inject flavour): $iroot$privdir/legacy-inject/libos_transport.so.1" "$clog" ||
    fail "$name-conformance --inject did not run the shipped C inject flavour"
summary=$(grep -E '^compat --inject: [0-9]+ scenarios' "$clog" | tail -n 1)
grep -qE ', 0 FAIL,' <<<"$summary" || { tail -n 30 "$clog"; fail "$name-conformance --inject: $summary"; }
for f in report-inject.html report-inject.md report-inject.json report-inject.xml; do
    [ -s "$work/conformance-inject/$f" ] || fail "$name-conformance --inject wrote no $f"
done
echo "   $summary"
step "$name-conformance --inject on the installed inject flavours"

# --- 11. rpmlint ------------------------------------------------------------------------------------
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
