//! What one run of the xtask knows: the `packaging/deps.sh` groups of its goal, the repository and target directories, and the loader path of the programs it runs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cargo;
use crate::cmd::run;

/// The repository and the target directory, and what has been done in this run.
pub struct Ctx {
    pub repo: PathBuf,
    pub target: PathBuf,
    deps_done: bool,
    /// The `packaging/deps.sh` groups of a goal (the goal table's, given by `main`).
    deps_of: fn(&str) -> &'static str,
}

impl Ctx {
    pub fn new(deps_of: fn(&str) -> &'static str) -> Ctx {
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
            deps_of,
        }
    }

    /// Installs (as root) or lists what `goal` needs, once per run: `packaging/deps.sh`.
    pub fn deps(&mut self, goal: &str) {
        if self.deps_done {
            return;
        }
        self.deps_done = true;
        let groups = (self.deps_of)(goal);
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
