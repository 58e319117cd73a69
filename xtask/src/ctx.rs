//! What one run of the xtask knows: the goal table (with the `packaging/deps.sh` groups each goal
//! needs), the repository and target directories, and the loader path of the programs it runs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cargo;
use crate::cmd::run;

/// `(goal, deps.sh groups it needs, what it does)`. `help` prints this table.
pub const GOALS: &[(&str, &str, &str)] = &[
    (
        "build",
        "base",
        "every crate and target of the workspace (debug)",
    ),
    (
        "test",
        "base rpm bench fuzz aarch64 umdk",
        "everything a change must pass",
    ),
    (
        "test-umdk",
        "base umdk",
        "the genuine-core lane: the loopback as a plugin of the genuine URMA core (system's, or \
         built from UMDK_SRC), urma_sample, urma_perftest, the loopback's suites and compat over it",
    ),
    (
        "compat",
        "base",
        "the C-vs-Rust conformance report (target/compat/report.html, .md, .json, .xml); args: compat's",
    ),
    (
        "compat-device",
        "base",
        "compat --device over the loopback built without urma_loopback_* (hardware mode, short; \
         --split as one command and as two nodes)",
    ),
    (
        "legacy-asan-suite",
        "base",
        "compat-tests' case_legacy tests against the ASan/UBSan build of legacy-c",
    ),
    (
        "reliability-check",
        "base fuzz",
        "memcheck + helgrind (both gating) + fuzz smoke",
    ),
    (
        "reliability-memcheck",
        "base",
        "C consumer and fuzz seeds under valgrind memcheck",
    ),
    (
        "reliability-helgrind",
        "base",
        "fuzz seeds under helgrind (HELGRIND_STRICT=0: report only)",
    ),
    (
        "stress",
        "base",
        "long reliability variants (release): STRESS_REQS, STRESS_FUZZ_CRS",
    ),
    (
        "fuzz",
        "base fuzz",
        "libFuzzer run of FUZZ_TIME seconds (default 600)",
    ),
    (
        "fuzz-smoke",
        "base fuzz",
        "short libFuzzer run (FUZZ_SMOKE_RUNS inputs, default 20000)",
    ),
    (
        "bench",
        "base bench",
        "full benchmark (target/bench/report.md); BENCH_ARGS for ostbench",
    ),
    (
        "bench-quick",
        "base bench",
        "quick benchmark (target/bench/quick.md)",
    ),
    (
        "dist",
        "",
        "Source0 + Source1 of the RPM in target/rpm/SOURCES",
    ),
    (
        "rpm",
        "rpm",
        "rpmbuild -ba openeuler.spec (RPMBUILD_OPTS, DIST_TREE)",
    ),
    (
        "rpm-test",
        "rpm umdk",
        "make rpm, then the install test packaging/rpm-test.sh (over the genuine URMA core too: \
         the system's, or built from UMDK_SRC)",
    ),
    ("rpm-clean", "", "remove target/rpm and target/rpm-test"),
    (
        "stage",
        "",
        "cargo build (args passed on), then place liburma.so.0 and legacy-c in --dest DIR",
    ),
    (
        "test-aarch64",
        "base aarch64",
        "the workspace cross-built for aarch64, tests and compat under qemu",
    ),
    (
        "test-aarch64-quick",
        "base aarch64",
        "what differs on aarch64: layout, tests that start processes or use addresses as values",
    ),
    (
        "msrv",
        "base msrv",
        "build and test with Rust 1.82 and the locked dependencies",
    ),
    (
        "lint",
        "",
        "Cargo.lock up to date, no import circle (imports), cargo fmt --check, clippy -D warnings",
    ),
    (
        "imports",
        "",
        "no import circle between the module files of any crate of the workspace",
    ),
    ("fmt", "", "cargo fmt --all"),
    (
        "ledger",
        "",
        "render docs/divergences.md from compat-tests/ledger.json (the ledger's one source)",
    ),
    (
        "deps",
        "",
        "install what any goal needs (root), else print it",
    ),
    ("clean", "", "cargo clean"),
];

/// The repository and the target directory, and what has been done in this run.
pub struct Ctx {
    pub repo: PathBuf,
    pub target: PathBuf,
    deps_done: bool,
}

impl Ctx {
    pub fn new() -> Ctx {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask lives in the repository")
            .to_path_buf();
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| repo.join("target"));
        let target = if target.is_absolute() {
            target
        } else {
            repo.join(target)
        };
        // Every cargo and script run below uses this target dir.
        std::env::set_var("CARGO_TARGET_DIR", &target);
        std::env::set_current_dir(&repo).expect("cd to the repository");
        Ctx {
            repo,
            target,
            deps_done: false,
        }
    }

    /// Installs (as root) or lists what `goal` needs, once per run: `packaging/deps.sh`.
    pub fn deps(&mut self, goal: &str) {
        if self.deps_done {
            return;
        }
        self.deps_done = true;
        let groups = GOALS
            .iter()
            .find(|g| g.0 == goal)
            .map(|g| g.1)
            .unwrap_or("base");
        run(Command::new("./packaging/deps.sh")
            .arg("install")
            .args(groups.split_whitespace()));
    }

    /// The loader path for the programs the xtask runs itself: the loopback's `liburma.so.0`
    /// directory, then `profile_dir` (the libraries cargo built), then the caller's path.
    /// This is the one place the xtask sets `LD_LIBRARY_PATH`; `cargo test` and `cargo run`
    /// compute the same directories themselves.
    pub fn loader_path(&self, build: &cargo::Built, first: &[&Path]) -> OsString {
        let mut dirs: Vec<PathBuf> = first.iter().map(|p| p.to_path_buf()).collect();
        dirs.push(build.loopback_dir.clone());
        dirs.push(build.profile_dir.clone());
        if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
            dirs.extend(std::env::split_paths(&old));
        }
        std::env::join_paths(dirs).expect("no ':' in a library directory")
    }
}
