//! `lint` and `imports`.

use crate::cmd::{cargo as cargo_cmd, fail, run};
use crate::ctx::Ctx;

/// No module file of a crate in an import circle (the crates of `imports::REPORT_ONLY` are
/// printed, not enforced).
pub(super) fn imports(ctx: &Ctx) {
    if let Err(e) = crate::imports::check(&ctx.repo) {
        fail(e);
    }
}

pub(super) fn lint(ctx: &Ctx) {
    // Cargo.lock matches the manifests.
    run(cargo_cmd()
        .args(["metadata", "--locked", "--format-version", "1"])
        .stdout(std::process::Stdio::null()));
    imports(ctx);
    run(cargo_cmd().args(["fmt", "--all", "--", "--check"]));
    run(cargo_cmd().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]));
    // The loopback's plugin face is built on its own (docs/loopback.md, "The two faces"), so the
    // workspace run above never compiles src/plugin.rs.
    run(cargo_cmd()
        .args(["clippy", "-p", "urma-loopback", "--features", "plugin"])
        .arg("--target-dir")
        .arg(ctx.target.join("xtask/plugin"))
        .args(["--", "-D", "warnings"]));
    // Likewise the library's inject flavour (docs/inject.md), in the target directory the tests
    // build it in: src/inject/ffi.rs is compiled only with the feature.
    run(cargo_cmd()
        .args(["clippy", "-p", "os-transport", "--features", "inject"])
        .arg("--target-dir")
        .arg(ctx.target.join("inject"))
        .args(["--", "-D", "warnings"]));
}
