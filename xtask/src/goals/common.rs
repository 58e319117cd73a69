//! What the goals share: the workspace build, compat's arguments and report files, the host triple, the URMA inputs of the C builds, the aarch64 cargo command.

use crate::cargo::{self, Built};
use crate::cmd::{cargo as cargo_cmd, env_or, fail, run};
use crate::ctx::Ctx;
use ost_build_support::legacy::Inputs;
use std::path::Path;
use std::process::Command;

/// `cargo build --workspace --all-targets` (debug), after the system packages `goal` needs.
pub(super) fn build(ctx: &mut Ctx, goal: &str) -> Built {
    ctx.deps(goal);
    let mut cmd = cargo_cmd();
    cmd.args(["build", "--workspace", "--all-targets"]);
    cargo::build(cmd)
}

/// Set for the report test (compat-tests/tests/report_files.rs): a missing Chromium or xmllint
/// fails it instead of skipping it.
pub(super) const REPORT_TOOLS_REQUIRED: &str = "COMPAT_REPORT_TOOLS_REQUIRED";

/// The report test on the reports a run wrote into `dir` (`report.*`, `report-split.*`):
/// `report.html` in headless Chromium (its numbers against `report.json`, a filter, the
/// screenshot `report.png` beside it) and `report.xml` against the JUnit schema.
pub(super) fn report_files(dir: &Path) {
    run(cargo_cmd()
        .args(["test", "-q", "-p", "compat-tests", "--test", "report_files"])
        .env("COMPAT_REPORT_DIR", dir)
        .env(REPORT_TOOLS_REQUIRED, "1"));
}

/// Fails unless `dir` has the four renderings of the report `stem`.
pub(super) fn reports_written(dir: &Path, stem: &str) {
    for ext in ["json", "md", "html", "xml"] {
        let p = dir.join(format!("{stem}.{ext}"));
        if !p.is_file() {
            fail(format!("{} was not written", p.display()));
        }
    }
}

/// `COMPAT_ARGS` split on white space, then `args`.
pub(super) fn compat_args(args: &[String]) -> Vec<String> {
    env_or("COMPAT_ARGS", "")
        .split_whitespace()
        .map(str::to_string)
        .chain(args.iter().cloned())
        .collect()
}

/// The URMA headers and `-lurma` directory for C built here: the ones urma-sys's build script
/// selected in `built` (the selection exists once, in `ost_build_support::urma`).
pub(super) fn urma_inputs(ctx: &Ctx, built: &Built) -> Inputs {
    let (urma_include, urma_link_dir) = built
        .urma
        .clone()
        .unwrap_or_else(|| fail("the build did not report urma-sys's URMA directories"));
    Inputs {
        repo: ctx.repo.clone(),
        urma_include,
        urma_link_dir,
    }
}

/// The host triple (`rustc -vV`).
pub(super) fn host_triple() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .unwrap_or_else(|e| fail(format!("rustc -vV: {e}")));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .unwrap_or_else(|| fail("rustc -vV printed no host"))
}

/// cargo with the aarch64 target (the runner and linker of .cargo/config.toml).
pub(super) fn a64() -> Command {
    let mut c = cargo_cmd();
    c.args(["--config", &format!("build.target=\"{AARCH64}\"")]);
    c
}

/// The aarch64 target triple.
pub(super) const AARCH64: &str = "aarch64-unknown-linux-gnu";
/// The minimum supported Rust.
pub(super) const MSRV: &str = "1.82";
