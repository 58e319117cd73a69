//! Running programs built for the target the tests run on.
//!
//! Every such program a test or the harness starts goes through [`command`]: a C program
//! compiled at run time (`testkit::cprog`, with `$CC`, default `cc`), the test binary or the
//! harness re-executing itself (`current_exe`), `compat` from its tests, the children of
//! `compat --split` and of ostbench. Natively that is a plain [`Command`]. When the tests are
//! cross-built and run under qemu user emulation (`make test-aarch64`), the cargo target runner
//! (`.cargo/target-runner`) sets `CC` to the cross compiler and `OST_TARGET_RUNNER` to the
//! emulator, because the kernel cannot exec a foreign binary by itself (no binfmt_misc needed).
//! The child inherits the runner's environment: `LD_LIBRARY_PATH` with the target's profile
//! directory first (the loopback `liburma.so.0` and the workspace's cdylibs), `QEMU_LD_PREFIX`,
//! `CC` and `OST_TARGET_RUNNER`, so that its own children start the same way. A caller that sets
//! `LD_LIBRARY_PATH` itself names every directory the child needs. Host tools (`cc`, `make`,
//! `nm`, `readelf`) are started with a plain [`Command`].
//!
//! Under emulation everything runs 10 to 50 times slower than natively, so tests whose wall-clock
//! deadlines are tuned for native speed scale them by [`slowdown`].
//!
//! This file is also included by path (`#[path]`) by the urma-sys tests, which sit below the
//! testkit in the crate graph and do not use every function.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::process::Command;

/// A command running `exe`, an executable built for the target: directly, or through
/// `$OST_TARGET_RUNNER` when it is set.
pub fn command(exe: impl AsRef<OsStr>) -> Command {
    match std::env::var_os("OST_TARGET_RUNNER") {
        Some(runner) if !runner.is_empty() => {
            let mut cmd = Command::new(runner);
            cmd.arg(exe);
            cmd
        }
        _ => Command::new(exe),
    }
}

/// Whether the tests run under an emulator (`$OST_TARGET_RUNNER` is set).
pub fn emulated() -> bool {
    std::env::var_os("OST_TARGET_RUNNER").is_some_and(|r| !r.is_empty())
}

/// The factor for wall-clock deadlines tuned for native speed: 1 natively; under emulation
/// `$OST_TARGET_SLOWDOWN`, default 10.
pub fn slowdown() -> u32 {
    if !emulated() {
        return 1;
    }
    std::env::var("OST_TARGET_SLOWDOWN")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&f| f >= 1)
        .unwrap_or(10)
}

/// The directory of the loopback `liburma.so.0` that programs started from here load: the first
/// entry of `LD_LIBRARY_PATH` holding a `liburma.so.0`. `cargo test` and `cargo run` put the
/// loopback's `$OUT_DIR/lib` there (urma-loopback/build.rs), `cargo xtask` the same directory.
/// The genuine-core lane of the xtask puts a genuine URMA core's directory first instead (the
/// loopback is then its plugin): programs built and started from here use that core.
pub fn loopback_dir() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("LD_LIBRARY_PATH")?;
    std::env::split_paths(&path).find(|d| d.join("liburma.so.0").exists())
}

/// The loopback library itself, for a layer that loads it by path (`URMA_INTERPOSE_REAL`):
/// `liburma.so.0` in [`loopback_dir`], else the cdylib cargo copied to the profile directory.
/// Call it before putting anything else named `liburma.so.0` on `LD_LIBRARY_PATH`.
pub fn loopback_lib() -> std::path::PathBuf {
    loopback_dir()
        .map(|d| d.join("liburma.so.0"))
        .unwrap_or_else(|| crate::paths::profile_dir().join("liburma.so"))
}

/// The loopback plugin the genuine-core tests run (`URMA_LOOPBACK_PLUGIN`, which `cargo xtask
/// test-umdk` sets to the plugin it built); `None` when unset or empty (the tests then say so
/// and skip); panics when it names no file.
pub fn plugin_under_test() -> Option<std::path::PathBuf> {
    let p = std::path::PathBuf::from(
        std::env::var_os("URMA_LOOPBACK_PLUGIN").filter(|v| !v.is_empty())?,
    );
    assert!(
        p.is_file(),
        "URMA_LOOPBACK_PLUGIN={}: no such file",
        p.display()
    );
    Some(p)
}

/// Runs `cmd` to completion and returns its stdout; panics with its stdout and stderr when it
/// cannot start or does not succeed.
pub fn run(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&ost_build_support::checked(cmd).stdout).into_owned()
}
