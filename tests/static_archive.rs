//! `libos_transport.a` (the `mlcachedirect-static` package), built by
//! `ost_build_support::archive` as the packaging builds it (`cargo xtask stage`), for the target
//! of this test binary (aarch64 too, with the cross binutils, under qemu in `make test`):
//!
//! * its only global symbols are the ten API functions (read with `readelf`, which loads no
//!   linker plugin), with no bitcode section and no section group left;
//! * after `ranlib` (a packaging step that re-indexes it), a C program links it and moves
//!   2 MiB + 1 byte over the loopback (`tests/c/consumer.c`, `install`);
//! * a C++ program links it and does the same (`tests/static/consumer.cpp`);
//! * with a second Rust static library built by another Rust version (the minimum, 1.82, through
//!   rustup; stable when the test runs on 1.82), in both orders on the link line, a panic raised in that library is caught there
//!   and the transfer still works (`tests/static/two_rust.c`);
//! * a shared library linked from it without a version script exports the API and no Rust
//!   symbol: what a consumer's `.so` re-exports;
//! * the inject flavour's archive (`mlcachedirect-inject`, the same recipe with the cargo feature
//!   `inject`) has exactly the twenty public names global, and a C program linked with it arms
//!   `os_transport.send.begin` through the archive's own `os_transport_inject_*` functions and
//!   sees the sleep delay a transfer over the loopback, the error fail it, and the cleared point
//!   let it through (`tests/static/inject.c`).
mod common;

use common::{repo, run, scratch, PUBLIC};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use testkit::archive::{self, Archive, Flavour as ArchiveFlavour};
use testkit::cprog::{Build, Compiler, Flavour, Lib};

const TARGET: &str = env!("OST_BUILD_TARGET");

/// The archive, built once per test process into `<profile>/static-archive` (cargo in a target
/// directory of its own there: this test's cargo may still hold the lock of the running build).
fn built() -> &'static Archive {
    static ARCHIVE: OnceLock<Archive> = OnceLock::new();
    ARCHIVE.get_or_init(|| build(ArchiveFlavour::Default, "static-archive"))
}

/// The inject flavour's archive, built once per test process into
/// `<profile>/static-archive/inject`, in the same cargo target directory.
fn built_inject() -> &'static Archive {
    static ARCHIVE: OnceLock<Archive> = OnceLock::new();
    ARCHIVE.get_or_init(|| build(ArchiveFlavour::Inject, "static-archive/inject"))
}

/// `archive::build` of `flavour` into `<profile>/<dir>`. One at a time: both flavours' cargo
/// leaves its raw archive under the same name in the shared target directory.
fn build(flavour: ArchiveFlavour, dir: &str) -> Archive {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let profile = testkit::paths::profile_dir();
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo.current_dir(repo());
    let target_dir = profile.join("static-archive").join("cargo");
    archive::build(
        cargo,
        &["--target-dir".as_ref(), target_dir.as_os_str()],
        Some(TARGET),
        flavour,
        &profile.join(dir),
    )
}

/// The libraries rustc named for the archive, except liburma (the test links the loopback's
/// `liburma.so.0` by name: [`Lib::Urma`]).
fn archive_lib(path: &Path) -> Lib {
    archive_lib_of(built(), path)
}

/// [`archive_lib`] with the libraries rustc named for `archive`.
fn archive_lib_of(archive: &Archive, path: &Path) -> Lib {
    let needs = archive
        .native_libs
        .iter()
        .filter(|l| *l != "-lurma")
        .cloned()
        .collect();
    Lib::Archive(path.to_path_buf(), needs)
}

fn loopback_dir() -> PathBuf {
    testkit::target::loopback_dir()
        .expect("no loopback liburma.so.0 on LD_LIBRARY_PATH (run through cargo test)")
}

/// `<tool>` of the target's binutils (`aarch64-linux-gnu-<tool>` from x86_64).
fn binutil(tool: &str) -> String {
    let cross = format!(
        "{}-linux-gnu-{tool}",
        TARGET.split('-').next().unwrap_or("")
    );
    let found = Command::new(&cross).arg("--version").output();
    if found.is_ok_and(|o| o.status.success()) {
        cross
    } else {
        tool.to_string()
    }
}

/// A build on the C URMA fixture of `src` (relative to the repository) into `out`, for this test
/// binary's target.
fn fixture_build(src: &str, out: PathBuf) -> Build {
    Build::urma_program(&repo(), Flavour::Plain, repo().join(src), out)
        .compiler(Compiler::Triple(TARGET.to_string()))
}

/// consumer.c with its main renamed `consumer_main`, and the URMA fixture, as objects.
fn consumer_objects(dir: &Path) -> Vec<PathBuf> {
    ["tests/c/consumer.c", "tests/c/urma_fixture.c"]
        .iter()
        .map(|src| {
            let stem = Path::new(src).file_stem().unwrap().to_string_lossy();
            fixture_build(src, dir.join(format!("{stem}.o")))
                .define("main", "consumer_main")
                .object()
                .run()
        })
        .collect()
}

/// Runs `exe` (with `args`) over the loopback; it must exit 0 and print `ok`. Returns its output.
fn run_over_loopback(exe: &Path, args: &[&str], ok: &str) -> String {
    let out = testkit::target::command(exe)
        .args(args)
        .env("LD_LIBRARY_PATH", loopback_dir())
        .env_remove("OST_LOG_FILE_PATH")
        .output()
        .expect("run the program");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.lines().any(|l| l == ok),
        "{} {args:?} failed ({}):\n{text}",
        exe.display(),
        out.status
    );
    text
}

/// The program `exe` has the library inside: it needs no libos_transport.so.
fn assert_no_shared_library(exe: &Path) {
    let dynamic = run(Command::new("readelf").arg("-d").arg(exe));
    assert!(!dynamic.contains("libos_transport"), "{dynamic}");
}

/// The global symbols of `a` are exactly the public names of `flavour`, each a default-visible
/// function, and no bitcode section or section group is left.
fn assert_only_public_names_global(a: &Archive, flavour: ArchiveFlavour) {
    let symbols = run(Command::new("readelf").arg("-sW").arg(&a.path));
    let globals: BTreeSet<&str> = symbols
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && (f[4] == "GLOBAL" || f[4] == "WEAK") && f[6] != "UND").then(|| f[7])
        })
        .collect();
    let want = flavour.globals();
    assert_eq!(globals, want, "readelf -sW {}", a.path.display());
    for l in symbols.lines().filter(|l| {
        l.split_whitespace()
            .last()
            .is_some_and(|s| want.contains(s))
    }) {
        assert!(l.contains(" FUNC ") && l.contains(" DEFAULT "), "{l}");
    }
    let sections = run(Command::new("readelf").arg("-SW").arg(&a.path));
    for bad in [".llvmbc", ".llvmcmd", " GROUP "] {
        assert!(!sections.contains(bad), "{bad} left:\n{sections}");
    }
    assert!(
        a.native_libs.iter().any(|l| l == "-lurma"),
        "rustc's native libraries name liburma: {:?}",
        a.native_libs
    );
}

#[test]
fn only_the_ten_functions_are_global() {
    assert_eq!(ArchiveFlavour::Default.globals().len(), 10);
    assert_eq!(
        ArchiveFlavour::Default.globals(),
        PUBLIC.into_iter().collect()
    );
    assert_only_public_names_global(built(), ArchiveFlavour::Default);
}

#[test]
fn the_inject_archive_has_the_twenty_public_names_global() {
    let names = ArchiveFlavour::Inject.globals();
    assert_eq!(names.len(), 20);
    assert_eq!(
        names
            .iter()
            .filter(|n| n.starts_with("os_transport_inject_"))
            .count(),
        10
    );
    assert_only_public_names_global(built_inject(), ArchiveFlavour::Inject);
}

#[test]
fn a_c_program_linked_with_the_inject_archive_arms_a_point_and_sees_its_effect() {
    let _registry = os_transport_inject::testing::exclusive();
    let dir = scratch("static-inject");
    let a = built_inject();
    // The header declares the functions only in an inject build (stand-ins otherwise).
    let mut b = fixture_build("tests/static/inject.c", dir.join("inject"))
        .define("OS_TRANSPORT_WITH_INJECT", "1");
    b.sources.truncate(1);
    b.sources.extend(consumer_objects(&dir));
    let exe = b
        .lib(archive_lib_of(a, &a.path))
        .lib(Lib::Urma(loopback_dir()))
        .run();
    assert_no_shared_library(&exe);
    let out = run_over_loopback(&exe, &[], "inject: OK");
    // The three runs of consumer.c's install test: delayed, failed at the send, unaffected.
    assert_eq!(out.matches("consumer: OK").count(), 2, "{out}");
    assert!(
        out.contains("(os_transport.send.begin), ret=77")
            && out.contains(": os_transport_send (urma status"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_c_program_links_it_after_ranlib_and_moves_2_mib_plus_1() {
    let dir = scratch("static-c");
    let copy = dir.join(archive::ARCHIVE);
    std::fs::copy(&built().path, &copy).expect("copy the archive");
    // A linker plugin that cannot read a member says so on stderr (and drops its symbols).
    let ranlib = Command::new(binutil("ranlib"))
        .arg(&copy)
        .output()
        .expect("run ranlib");
    assert!(
        ranlib.status.success() && ranlib.stderr.is_empty(),
        "ranlib: {}",
        String::from_utf8_lossy(&ranlib.stderr)
    );
    let exe = fixture_build("tests/c/consumer.c", dir.join("consumer"))
        .lib(archive_lib(&copy))
        .lib(Lib::Urma(loopback_dir()))
        .run();
    assert_no_shared_library(&exe);
    let out = run_over_loopback(&exe, &["install"], "consumer: OK");
    assert!(out.contains("all bytes equal"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cxx_program_links_it_and_moves_2_mib_plus_1() {
    let dir = scratch("static-cxx");
    let mut b = fixture_build("tests/static/consumer.cpp", dir.join("consumer-cxx")).cxx();
    b.sources.truncate(1);
    b.sources.extend(consumer_objects(&dir));
    let exe = b
        .lib(archive_lib(&built().path))
        .lib(Lib::Urma(loopback_dir()))
        .run();
    assert_no_shared_library(&exe);
    let out = run_over_loopback(&exe, &[], "consumer: OK");
    assert!(out.contains("consumer.cpp: caught"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn links_with_a_rust_archive_of_another_rust_version_in_both_orders() {
    let dir = scratch("static-two-rust");
    let second = dir.join("libsecond_rust.a");
    // The minimum Rust version; stable when this test itself runs on it (`make msrv`).
    let msrv = env!("CARGO_PKG_RUST_VERSION");
    let ours = std::env::var("RUSTUP_TOOLCHAIN").unwrap_or_default();
    let version = if ours.starts_with(msrv) {
        "stable"
    } else {
        msrv
    };
    run(Command::new("rustup")
        .args(["run", version, "rustc", "--edition", "2021", "-O"])
        .args(["--crate-type", "staticlib", "--target", TARGET])
        .arg(repo().join("tests/static/second_rust.rs"))
        .arg("-o")
        .arg(&second));
    let objects = consumer_objects(&dir);
    let ours = archive_lib(&built().path);
    let theirs = Lib::Archive(second, Vec::new());
    for (name, libs) in [
        ("ours-first", [ours.clone(), theirs.clone()]),
        ("theirs-first", [theirs, ours]),
    ] {
        let mut b = fixture_build("tests/static/two_rust.c", dir.join(name));
        b.sources.truncate(1);
        b.sources.extend(objects.iter().cloned());
        b.libs.extend(libs);
        let exe = b.lib(Lib::Urma(loopback_dir())).run();
        let out = run_over_loopback(&exe, &[], "two-rust: OK");
        assert!(
            out.contains("panic caught in the second archive: yes"),
            "{name}: {out}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_shared_library_without_version_script_exports_no_rust_symbol() {
    let dir = scratch("static-so");
    let so = fixture_build("tests/c/consumer.c", dir.join("libconsumer.so"))
        .define("main", "consumer_main")
        .shared(Some("libconsumer.so"))
        .lib(archive_lib(&built().path))
        .lib(Lib::Urma(loopback_dir()))
        .run();
    let dynsyms = run(Command::new("readelf").args(["--dyn-syms", "-W"]).arg(&so));
    let exported: BTreeSet<&str> = dynsyms
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && f[6] != "UND" && f[4] != "LOCAL").then(|| f[7])
        })
        .collect();
    for p in PUBLIC {
        assert!(exported.contains(p), "{p} not exported:\n{dynsyms}");
    }
    let rust: Vec<&&str> = exported
        .iter()
        .filter(|s| s.starts_with("_ZN") || s.starts_with("_R") || s.contains("rust"))
        .collect();
    assert!(rust.is_empty(), "Rust symbols exported: {rust:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
