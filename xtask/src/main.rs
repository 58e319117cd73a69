//! `cargo xtask <goal>`: the project's one build driver. The Makefile's goals are aliases of
//! these (`make test` = `cargo xtask test`), so every step is Rust: a failing step stops with the
//! command that failed, not with a shell exit code.
//!
//! What it adds to plain cargo: the system packages a goal needs (`packaging/deps.sh`), the
//! loader path of the programs it runs ([`Ctx::loader_path`]: the loopback's `liburma.so.0` and
//! the profile's libraries, found from cargo's build messages, see [`cargo`]), the C builds that
//! are not a crate's (the ASan flavour of legacy-c, the fuzz and valgrind programs), and the
//! checks that read tool output (Helgrind's report, [`helgrind`]).

mod cargo;
mod goals;
mod helgrind;
mod imports;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// `(goal, deps.sh groups it needs, what it does)`. `help` prints this table.
pub const GOALS: &[(&str, &str, &str)] = &[
    (
        "build",
        "base",
        "every crate and target of the workspace (debug)",
    ),
    (
        "test",
        "base rpm bench fuzz aarch64",
        "everything a change must pass",
    ),
    (
        "compat",
        "base",
        "the C-vs-Rust conformance report (target/compat/report.md); args: compat's",
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
        "rpm",
        "make rpm, then the install test packaging/rpm-test.sh",
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
        "no import circle between the module files of a crate (urma-loopback, xtask: report only)",
    ),
    ("fmt", "", "cargo fmt --all"),
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
    fn new() -> Ctx {
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

/// `cargo` with the arguments given (the rustup proxy: `+toolchain` works).
pub fn cargo() -> Command {
    Command::new(std::env::var_os("XTASK_CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Runs `cmd`, echoing it; exits with its status when it fails.
pub fn run(cmd: &mut Command) {
    if let Err(code) = try_run(cmd) {
        eprintln!("xtask: failed ({code}): {}", show(cmd));
        std::process::exit(if code == 0 { 1 } else { code });
    }
}

/// Runs `cmd`, echoing it; `Err(exit code)` when it fails (1 if killed or not started).
pub fn try_run(cmd: &mut Command) -> Result<(), i32> {
    eprintln!("+ {}", show(cmd));
    match cmd.status() {
        Ok(st) if st.success() => Ok(()),
        Ok(st) => Err(st.code().unwrap_or(1)),
        Err(e) => {
            eprintln!("xtask: cannot start {:?}: {e}", cmd.get_program());
            Err(127)
        }
    }
}

/// The command line of `cmd`, with the environment it sets, as a shell would show it.
pub fn show(cmd: &Command) -> String {
    let mut s = String::new();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            s += &format!("{}={} ", k.to_string_lossy(), v.to_string_lossy());
        }
    }
    s += &cmd.get_program().to_string_lossy();
    for a in cmd.get_args() {
        s.push(' ');
        s += &a.to_string_lossy();
    }
    s
}

/// `$var` as a string, or `default`.
pub fn env_or(var: &str, default: &str) -> String {
    std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// Fails the goal with `msg`.
pub fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("xtask: {msg}");
    std::process::exit(1)
}

fn help() {
    println!("cargo xtask <goal> [args]   (make <goal> runs the same)\n");
    for (goal, _, what) in GOALS {
        println!("  {goal:<20} {what}");
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(goal) = args.next() else {
        help();
        return ExitCode::SUCCESS;
    };
    let rest: Vec<String> = args.collect();
    if goal == "help" || goal == "--help" || goal == "-h" {
        help();
        return ExitCode::SUCCESS;
    }
    if !GOALS.iter().any(|g| g.0 == goal) {
        eprintln!("xtask: unknown goal {goal:?}\n");
        help();
        return ExitCode::from(2);
    }
    let mut ctx = Ctx::new();
    goals::dispatch(&mut ctx, &goal, &rest);
    ExitCode::SUCCESS
}
