//! Runs the C-level smoke tests of `legacy-c/` from `cargo test`:
//! `tests/smoke.c` against the recording URMA fake (with the library this crate's build script
//! built, and with its ASan/UBSan flavour built here by the same function), and
//! `tests/loopback_smoke.c` end to end over the loopback `liburma.so.0` on the loader path.
//! The programs and the fake are built by `testkit::cprog`, each test into its own directory
//! under `CARGO_TARGET_TMPDIR`, so nothing is written into the source tree.

use std::path::{Path, PathBuf};

use testkit::cprog::{Build, Flavour, Lib};
use testkit::{repo, target};

/// `<build>/fake/liburma.so.0`, the recording fake of `tests/fake_urma.c`; returns its directory.
fn fake_urma(build: &Path) -> PathBuf {
    let dir = build.join("fake");
    Build::new(Flavour::Plain, dir.join("liburma.so.0"))
        .source(repo().join("legacy-c/tests/fake_urma.c"))
        .urma_include(urma_sys::include_dir())
        .shared(Some("liburma.so.0"))
        .run();
    dir
}

/// Builds `tests/smoke.c` in `flavour` against the library in `lib_dir` and the fake, runs it
/// with both on the loader path (and nothing else: no loopback ahead of the fake).
fn smoke(build: &Path, flavour: Flavour, lib_dir: &Path) -> std::process::Output {
    let fake = fake_urma(build);
    let exe = Build::new(flavour, build.join("smoke"))
        .source(repo().join("legacy-c/tests/smoke.c"))
        .include(repo().join("include"))
        .urma_include(urma_sys::include_dir())
        .include(repo().join("legacy-c/tests"))
        .lib(Lib::OsTransport(lib_dir.to_path_buf()))
        .lib(Lib::Urma(fake.clone()))
        .run();
    run(&exe, &[&fake, lib_dir])
}

/// Runs `exe` with `LD_LIBRARY_PATH` = `path`; under emulation without LeakSanitizer, which
/// cannot stop the world under qemu user emulation ("LeakSanitizer has encountered a fatal
/// error"); AddressSanitizer and UBSan still check every access.
fn run(exe: &Path, path: &[&Path]) -> std::process::Output {
    let path = std::env::join_paths(path).expect("loader path");
    let mut cmd = target::command(exe);
    cmd.env("LD_LIBRARY_PATH", path)
        .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1");
    if target::emulated() {
        cmd.env("ASAN_OPTIONS", "detect_leaks=0");
    }
    cmd.output().expect("run a smoke program")
}

fn assert_ok(what: &str, out: &std::process::Output, expect: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(expect),
        "{what} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
}

#[test]
fn smoke_against_recording_fake() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("legacy-c-smoke");
    let out = smoke(&dir, Flavour::Plain, &os_transport_legacy::legacy_lib_dir());
    assert_ok("smoke", &out, "smoke: all checks passed");
}

#[test]
fn smoke_against_recording_fake_asan_ubsan() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("legacy-c-smoke-asan");
    let inputs = ost_build_support::legacy::Inputs {
        repo: repo(),
        urma_include: PathBuf::from(urma_sys::include_dir()),
        urma_link_dir: PathBuf::from(env!("OST_LEGACY_URMA_LINK_DIR")),
    };
    let base = ost_build_support::compiler_for(Some(env!("OST_LEGACY_TARGET")));
    let lib_dir =
        ost_build_support::legacy::build(&base, ost_build_support::Flavour::Asan, &inputs, &dir);
    let out = smoke(&dir, Flavour::Asan, &lib_dir);
    assert_ok("smoke (ASan/UBSan)", &out, "smoke: all checks passed");
}

#[test]
fn end_to_end_over_loopback() {
    let loopback = target::loopback_dir()
        .expect("no loopback liburma.so.0 on LD_LIBRARY_PATH (run through cargo test)");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("legacy-c-loopback");
    let lib_dir = os_transport_legacy::legacy_lib_dir();
    let exe = Build::urma_program(
        &repo(),
        Flavour::Plain,
        repo().join("legacy-c/tests/loopback_smoke.c"),
        dir.join("loopback_smoke"),
    )
    .urma_include(urma_sys::include_dir())
    .lib(Lib::OsTransport(lib_dir.clone()))
    .lib(Lib::Urma(loopback.clone()))
    .run();
    let out = run(&exe, &[&loopback, &lib_dir]);
    assert_ok("loopback smoke", &out, "all checks passed");
}
