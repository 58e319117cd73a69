#!/usr/bin/env bash
# Usage: packaging/dist.sh OUTDIR
# Writes the two sources of openeuler.spec into OUTDIR:
#   mlcachedirect-<version>.tar.gz         Source0: `git archive` of HEAD (committed files only),
#                                           or, with DIST_TREE=worktree, the files git tracks as they
#                                           are in the working tree (uncommitted edits included), or
#                                           with DIST_TREE=untracked those plus the untracked files
#                                           that .gitignore does not exclude (for trying out changes)
#   mlcachedirect-<version>-vendor.tar.gz  Source1: `cargo vendor --locked --versioned-dirs`, with the
#                                           crates that no Linux target can build replaced by stubs
#                                           and no prebuilt Windows/macOS binaries (DLLs, .lib, .a)
# Needs git, cargo (and network access to crates.io unless every crate is in cargo's cache).
set -euo pipefail
out=${1:?usage: dist.sh OUTDIR}
root=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
cd "$root"

name=$(awk '$1 == "Name:" { print $2; exit }' openeuler.spec)
version=$(awk '$1 == "Version:" { print $2; exit }' openeuler.spec)
cargo_version=$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
if [ "$version" != "$cargo_version" ]; then
    echo "dist: openeuler.spec Version $version differs from the workspace version $cargo_version" >&2
    exit 1
fi
prefix=$name-$version
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/mlcd-dist.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Reproducible archives: fixed owner and file order, mtime of the commit.
mtime=$(git log -1 --format=%ct HEAD)
tar_opts=(--sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" --format=gnu)

# --- Source0 -----------------------------------------------------------------------------------
case ${DIST_TREE:-head} in
    head) ;;
    worktree) ls_opts=(--cached) ;;
    untracked) ls_opts=(--cached --others --exclude-standard) ;;
    *) echo "dist: DIST_TREE must be head, worktree or untracked" >&2; exit 1 ;;
esac
if [ "${DIST_TREE:-head}" != head ]; then
    mkdir "$work/$prefix"
    git ls-files -z "${ls_opts[@]}" | while IFS= read -r -d '' f; do
        [ -e "$f" ] || [ -L "$f" ] || continue          # deleted in the working tree
        printf '%s\0' "$f"
    done | tar -cf - --null -T - | tar -xf - -C "$work/$prefix"
    tar "${tar_opts[@]}" -C "$work" -cf - "$prefix" | gzip -n -9 > "$out/$prefix.tar.gz"
    echo "dist: $out/$prefix.tar.gz (working tree, DIST_TREE=$DIST_TREE)"
else
    git archive --format=tar --prefix="$prefix/" HEAD | gzip -n -9 > "$out/$prefix.tar.gz"
    echo "dist: $out/$prefix.tar.gz (git archive of HEAD $(git rev-parse --short HEAD))"
fi

# --- Source1 -----------------------------------------------------------------------------------
# Vendor from the same Cargo.lock as Source0.
mkdir "$work/src"
tar -xzf "$out/$prefix.tar.gz" -C "$work/src"
src=$work/src/$prefix
(cd "$src" && cargo vendor --locked --versioned-dirs --quiet vendor >/dev/null)

# Crates some Linux target can use: the union over the architectures openEuler builds for, with
# every feature of the workspace members, normal, build and dev edges. Every other vendored crate
# (windows-sys, r-efi, ...) is replaced by a stub: its Cargo.toml (cargo still reads every manifest
# of the lock file) and empty targets, and its checksum file keeps the package checksum that
# Cargo.lock pins but no per-file checksums. Cargo accepts such a crate as long as no build
# compiles it; the offline build of `make rpm` proves that for Linux.
keep=$work/keep.txt
for t in x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu riscv64gc-unknown-linux-gnu \
         loongarch64-unknown-linux-gnu; do
    (cd "$src" && cargo tree --offline --locked --target "$t" --workspace --all-features \
        -e normal,build,dev --prefix none --format '{p}' \
        --config 'source.crates-io.replace-with="vendored-sources"' \
        --config 'source.vendored-sources.directory="vendor"')
done | awk '$3 !~ /^\(\// { print $1 "-" substr($2, 2) }' | sort -u > "$keep"

stubbed=()
for dir in "$src"/vendor/*/; do
    crate=$(basename "$dir")
    grep -qxF "$crate" "$keep" && continue
    stubbed+=("$crate")
    python3 - "$dir" <<'PY'
import json, os, shutil, sys, tomllib
d = sys.argv[1]
with open(os.path.join(d, "Cargo.toml"), "rb") as f:
    manifest = tomllib.load(f)
with open(os.path.join(d, ".cargo-checksum.json")) as f:
    package_sum = json.load(f)["package"]
for entry in os.listdir(d):
    if entry in ("Cargo.toml", ".cargo-checksum.json"):
        continue
    p = os.path.join(d, entry)
    shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
# Empty files for every target path the manifest names (lib, build script, bins, tests, ...),
# so that reading the manifest finds what it declares.
paths = {"src/lib.rs"}
lib = manifest.get("lib", {})
if "path" in lib:
    paths.add(lib["path"])
build = manifest.get("package", {}).get("build")
if isinstance(build, str):
    paths.add(build)
for kind in ("bin", "example", "test", "bench"):
    for t in manifest.get(kind, []):
        if "path" in t:
            paths.add(t["path"])
for rel in paths:
    p = os.path.join(d, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write("// stub: this crate is not built on Linux (mlcachedirect vendor tarball)\n")
with open(os.path.join(d, ".cargo-checksum.json"), "w") as f:
    json.dump({"files": {}, "package": package_sum}, f)
PY
done
if [ ${#stubbed[@]} -gt 0 ]; then
    echo "dist: stubbed crates not used on Linux: ${stubbed[*]}"
fi

# Prebuilt binaries for other systems inside the crates that stay (libloading's test DLLs, import
# libraries, executables): removed, and dropped from the crate's per-file checksums, which cargo
# checks only for the files listed there. A source package ships no binaries it does not build.
binaries=$(python3 - "$src/vendor" <<'PY'
import json, os, sys
vendor = sys.argv[1]
exts = (".dll", ".exe", ".lib", ".obj", ".pdb", ".dylib", ".a")
removed = []
for crate in sorted(os.listdir(vendor)):
    d = os.path.join(vendor, crate)
    sums_path = os.path.join(d, ".cargo-checksum.json")
    with open(sums_path) as f:
        sums = json.load(f)
    changed = False
    for rel in sorted(sums["files"]):
        if rel.lower().endswith(exts):
            os.remove(os.path.join(d, rel))
            del sums["files"][rel]
            removed.append(f"{crate}/{rel}")
            changed = True
    if changed:
        with open(sums_path, "w") as f:
            json.dump(sums, f)
print(" ".join(removed))
PY
)
if [ -n "$binaries" ]; then
    echo "dist: removed prebuilt non-Linux binaries: $binaries"
fi
left=$(cd "$src/vendor" && find . -type f \( -iname '*.dll' -o -iname '*.exe' -o -iname '*.lib' -o -iname '*.obj' \
    -o -iname '*.pdb' -o -iname '*.dylib' -o -iname '*.a' \) | sort)
[ -z "$left" ] || { echo "dist: prebuilt binaries left in vendor/: $left" >&2; exit 1; }

# Cargo must still resolve the whole lock file offline from the filtered directory.
(cd "$src" && cargo metadata --offline --locked --format-version 1 \
    --config 'source.crates-io.replace-with="vendored-sources"' \
    --config 'source.vendored-sources.directory="vendor"' >/dev/null)

tar "${tar_opts[@]}" -C "$src" -cf - vendor | gzip -n -9 > "$out/$prefix-vendor.tar.gz"
echo "dist: $out/$prefix-vendor.tar.gz ($(ls "$src/vendor" | wc -l) crates, $(du -sh "$src/vendor" | cut -f1) unpacked)"
