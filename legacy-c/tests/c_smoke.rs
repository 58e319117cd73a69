//! Runs the C-level smoke tests of `legacy-c/` from `cargo test`:
//! `tests/smoke.c` against the recording URMA fake (with the library this crate's build script
//! built, and with its ASan/UBSan flavour built here by the same function), and
//! `tests/loopback_smoke.c` end to end over the loopback `liburma.so.0` on the loader path.
//! Each build goes to its own directory under `CARGO_TARGET_TMPDIR`, so nothing is written into
//! the source tree.

use std::path::{Path, PathBuf};
use std::process::Command;

use testkit::target;

fn legacy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn make(
    target: &str,
    build_dir: &Path,
    lib_dir: &Path,
    extra: &[(&str, String)],
) -> std::process::Output {
    let mut cmd = Command::new("make");
    cmd.arg("-s")
        .arg("-C")
        .arg(legacy_dir())
        .arg(target)
        .arg(format!("BUILD={}", build_dir.display()))
        .arg(format!("LEGACY_DIR={}", lib_dir.display()))
        .arg(format!("URMA_INCLUDE_DIR={}", urma_sys::include_dir()));
    for (k, v) in extra {
        cmd.arg(format!("{k}={v}"));
    }
    // The smoke binaries set their own loader path; do not inherit a loopback ahead of the fake.
    cmd.env_remove("LD_LIBRARY_PATH");
    if target::emulated() {
        // LeakSanitizer cannot stop the world under qemu user emulation ("LeakSanitizer has
        // encountered a fatal error"); AddressSanitizer and UBSan still check every access.
        cmd.env("ASAN_OPTIONS", "detect_leaks=0");
    }
    cmd.output().expect("run make")
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
    let out = make("smoke", &dir, &os_transport_legacy::legacy_lib_dir(), &[]);
    assert_ok("make smoke", &out, "smoke: all checks passed");
}

#[test]
fn smoke_against_recording_fake_asan_ubsan() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("legacy-c-smoke-asan");
    let inputs = ost_build_support::legacy::Inputs {
        repo: legacy_dir().parent().expect("repo").to_path_buf(),
        urma_include: PathBuf::from(urma_sys::include_dir()),
        urma_link_dir: PathBuf::from(env!("OST_LEGACY_URMA_LINK_DIR")),
    };
    let base = ost_build_support::compiler_for(Some(env!("OST_LEGACY_TARGET")));
    let lib_dir =
        ost_build_support::legacy::build(&base, ost_build_support::Flavour::Asan, &inputs, &dir);
    let out = make("smoke-asan", &dir, &lib_dir, &[]);
    assert_ok("make smoke-asan", &out, "smoke: all checks passed");
}

#[test]
fn end_to_end_over_loopback() {
    let loopback = target::loopback_dir()
        .expect("no loopback liburma.so.0 on LD_LIBRARY_PATH (run through cargo test)");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("legacy-c-loopback");
    let out = make(
        "loopback-smoke",
        &dir,
        &os_transport_legacy::legacy_lib_dir(),
        &[("LOOPBACK_DIR", loopback.display().to_string())],
    );
    assert_ok("make loopback-smoke", &out, "all checks passed");
}
