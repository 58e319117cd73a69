//! Running programs that a test built for the target it runs on.
//!
//! Tests that compile a C program at run time (with `$CC`, default `cc`) and run it spawn the
//! result through [`command`]. Natively that is a plain [`Command`]. When the tests are
//! cross-built and run under qemu user emulation (`make test-aarch64`), the cargo target runner
//! (`.cargo/target-runner`) sets `CC` to the cross compiler and `OST_TARGET_RUNNER` to the
//! emulator, because the kernel cannot exec a foreign binary by itself (no binfmt_misc needed).
//!
//! This file is also included by path (`#[path]`) by the urma-sys and loopback tests, which do
//! not depend on compat-tests.

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
