//! Cargo runs whose results the xtask needs: read from cargo's JSON build messages
//! (`--message-format=json-render-diagnostics`: diagnostics still go to the terminal), never
//! from guessed paths.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cmd::{fail, show};

/// What a cargo build produced that the xtask uses.
pub struct Built {
    /// `<target>[/<triple>]/<profile>`: the cdylibs and binaries.
    pub profile_dir: PathBuf,
    /// The loopback's `liburma.so.0` directory (`$OUT_DIR/lib` of urma-loopback's build script).
    pub loopback_dir: PathBuf,
    /// legacy-c's library directory (`$OUT_DIR/legacy` of its build script), if it was built.
    pub legacy_dir: Option<PathBuf>,
    /// The URMA include and `-lurma` directories urma-sys's build script selected
    /// (`URMA_SYS_INCLUDE_DIR`, `URMA_SYS_LINK_DIR`), for C the xtask builds itself.
    pub urma: Option<(PathBuf, PathBuf)>,
    /// Executables, by target name (test binaries from `--tests`/`--no-run`, binaries).
    pub executables: Vec<(String, PathBuf)>,
    /// The shared library of each cdylib built, by package name.
    pub cdylibs: Vec<(String, PathBuf)>,
}

impl Built {
    /// The executable of target `name` (the last one cargo reported).
    pub fn executable(&self, name: &str) -> &Path {
        last_named(&self.executables, name)
            .unwrap_or_else(|| fail(format!("cargo built no executable {name:?}")))
    }

    /// The shared library of package `package`'s cdylib (the last one cargo reported).
    pub fn cdylib(&self, package: &str) -> &Path {
        last_named(&self.cdylibs, package)
            .unwrap_or_else(|| fail(format!("cargo built no cdylib of {package:?}")))
    }
}

/// The path of the last `(name, path)` named `name`.
fn last_named<'a>(items: &'a [(String, PathBuf)], name: &str) -> Option<&'a Path> {
    items
        .iter()
        .rev()
        .find(|(n, _)| n == name)
        .map(|(_, p)| p.as_path())
}

/// The package name in a `package_id` (`path+file:///…/loopback#urma-loopback@0.1.0`, or the
/// older `urma-loopback 0.1.0 (path+file:///…)`).
fn package_name(id: &str) -> &str {
    match id.rsplit_once('#') {
        Some((url, rest)) => match rest.split_once('@') {
            Some((name, _)) => name,
            // `…/name#version`: the name is the last path segment.
            None => url.rsplit('/').next().unwrap_or(url),
        },
        None => id.split(' ').next().unwrap_or(id),
    }
}

/// What a cargo run reported, before the checks of [`build`].
struct Reported {
    loopback_dir: Option<PathBuf>,
    legacy_dir: Option<PathBuf>,
    urma: Option<(PathBuf, PathBuf)>,
    profile_dir: Option<PathBuf>,
    executables: Vec<(String, PathBuf)>,
    cdylibs: Vec<(String, PathBuf)>,
}

/// Runs `cmd` (a `cargo build`/`cargo test --no-run` with its arguments) with JSON messages and
/// collects what [`Built`] holds. The loopback must be part of the build.
pub fn build(cmd: Command) -> Built {
    let r = report(cmd);
    let loopback_dir = r
        .loopback_dir
        .unwrap_or_else(|| fail("the build did not run urma-loopback's build script"));
    let profile_dir = r
        .profile_dir
        .unwrap_or_else(|| fail("the build did not build the loopback cdylib"));
    if !loopback_dir.join("liburma.so.0").exists() {
        fail(format!(
            "{}/liburma.so.0 does not resolve to the loopback",
            loopback_dir.display()
        ));
    }
    Built {
        profile_dir,
        loopback_dir,
        legacy_dir: r.legacy_dir,
        urma: r.urma,
        executables: r.executables,
        cdylibs: r.cdylibs,
    }
}

/// Runs `cmd` (a `cargo build` with its arguments) and returns the shared library of package
/// `package`'s cdylib, as cargo reported it (e.g. the loopback's plugin face, which is not the
/// loopback [`build`] checks for).
pub fn build_cdylib(cmd: Command, package: &str) -> PathBuf {
    let cdylibs = report(cmd).cdylibs;
    last_named(&cdylibs, package)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| fail(format!("cargo built no cdylib of {package:?}")))
}

fn report(mut cmd: Command) -> Reported {
    cmd.arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped());
    eprintln!("+ {}", show(&cmd));
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| fail(format!("cannot start cargo: {e}")));
    let out = child.stdout.take().expect("piped stdout");
    let mut loopback_dir = None;
    let mut legacy_dir = None;
    let mut urma = None;
    let mut profile_dir = None;
    let mut executables = Vec::new();
    let mut cdylibs = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line.unwrap_or_else(|e| fail(format!("reading cargo's output: {e}")));
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let package = msg["package_id"].as_str().map(package_name).unwrap_or("");
        match msg["reason"].as_str() {
            Some("build-script-executed") => {
                let out_dir = PathBuf::from(msg["out_dir"].as_str().unwrap_or_default());
                match package {
                    "urma-loopback" => loopback_dir = Some(out_dir.join("lib")),
                    "os-transport-legacy" => legacy_dir = Some(out_dir.join("legacy")),
                    "urma-sys" => {
                        let var = |name: &str| {
                            msg["env"].as_array()?.iter().find_map(|kv| {
                                if kv[0].as_str()? == name {
                                    kv[1].as_str().map(PathBuf::from)
                                } else {
                                    None
                                }
                            })
                        };
                        if let (Some(inc), Some(link)) =
                            (var("URMA_SYS_INCLUDE_DIR"), var("URMA_SYS_LINK_DIR"))
                        {
                            urma = Some((inc, link));
                        }
                    }
                    _ => {}
                }
            }
            Some("compiler-artifact") => {
                let name = msg["target"]["name"].as_str().unwrap_or_default();
                // A bin built as its own unit-test harness has the bin's name too; it is never
                // the program a goal means by that name.
                let bin_tests = msg["profile"]["test"].as_bool() == Some(true)
                    && msg["target"]["kind"]
                        .as_array()
                        .is_some_and(|k| k.iter().any(|k| k == "bin"));
                if let Some(exe) = msg["executable"].as_str().filter(|_| !bin_tests) {
                    executables.push((name.to_string(), PathBuf::from(exe)));
                }
                let is_cdylib = msg["target"]["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "cdylib"));
                if is_cdylib {
                    let so = msg["filenames"].as_array().and_then(|f| {
                        f.iter()
                            .filter_map(Value::as_str)
                            .find(|f| f.ends_with(".so"))
                    });
                    if let Some(so) = so {
                        cdylibs.push((package.to_string(), PathBuf::from(so)));
                    }
                }
                if package == "urma-loopback" {
                    // <profile dir>/liburma.so, or <profile dir>/deps/liburma.so when the
                    // loopback was built as a dependency only.
                    profile_dir = msg["filenames"]
                        .as_array()
                        .and_then(|f| f.first())
                        .and_then(Value::as_str)
                        .and_then(|f| Path::new(f).parent())
                        .map(|d| match d.file_name() {
                            Some(n) if n == "deps" => d.parent().unwrap_or(d).to_path_buf(),
                            _ => d.to_path_buf(),
                        });
                }
            }
            _ => {}
        }
    }
    let status = child
        .wait()
        .unwrap_or_else(|e| fail(format!("waiting for cargo: {e}")));
    if !status.success() {
        fail(format!("cargo failed ({status}): {}", show(&cmd)));
    }
    Reported {
        loopback_dir,
        legacy_dir,
        urma,
        profile_dir,
        executables,
        cdylibs,
    }
}

#[cfg(test)]
mod tests {
    use super::package_name;

    #[test]
    fn package_names_of_both_id_formats() {
        assert_eq!(
            package_name("path+file:///r/urma-loopback#urma-loopback@0.1.0"),
            "urma-loopback"
        );
        assert_eq!(
            package_name("path+file:///r/legacy-c#os-transport-legacy@1.0.0"),
            "os-transport-legacy"
        );
        assert_eq!(package_name("path+file:///r/xtask#1.0.0"), "xtask");
        assert_eq!(
            package_name("urma-loopback 0.1.0 (path+file:///r/urma-loopback)"),
            "urma-loopback"
        );
    }
}
