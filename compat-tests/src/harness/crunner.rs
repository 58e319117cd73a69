//! The C runner: `compat-tests/c/runner.c`, an unmodified C consumer of `os_transport.h`,
//! compiled at run time (`testkit::cprog`, with `$CC`, default `cc`) against
//! `include/os_transport.h`, `urma-sys/include` and `urma-loopback/include`, linked with
//! `-los_transport -l:liburma.so.0`, and run once per library with `LD_LIBRARY_PATH=<dir with
//! that libos_transport.so.1>:<dir with the loopback liburma.so.0>:<the harness's path>`. It
//! prints the raw trace format; both traces are normalised and compared like the in-process
//! ones.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ost_supervise::Capture;
use serde_json::Value;

use super::ledger::Ledger;
use super::outcome::{judge, Options, Outcome, RunResult};
use testkit::cprog::{Build, Flavour, Lib};
use testkit::paths::repo;

/// The C runner's scenarios.
pub const SCENARIOS: &[(&str, &str)] = &[
    (
        "c-basic-2m+1",
        "C consumer: send + recv of 2 MiB + 1, untimed send wait, data checked",
    ),
    (
        "c-basic-6m+5-event",
        "C consumer: 6 MiB + 5 with event-mode pollers (JFCE)",
    ),
    ("c-basic-14m", "C consumer: send + recv of 14 MiB"),
    ("c-len-1", "C consumer: send + recv of 1 byte"),
    (
        "c-bad-inputs",
        "C consumer: NULL arguments, len 0, keys 2^40, no queue, double destroy",
    ),
    (
        "c-timeout",
        "C consumer: recv waits with 0 ms and 20 ms timeouts, cancel by id",
    ),
];

/// A directory holding `libos_transport.so.1` and `libos_transport.so` symlinks to `lib`.
fn lib_dir(out: &Path, name: &str, lib: &Path) -> Result<PathBuf, String> {
    let d = out.join(format!("lib-{name}"));
    std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    let target = std::fs::canonicalize(lib).map_err(|e| format!("{}: {e}", lib.display()))?;
    for n in ["libos_transport.so.1", "libos_transport.so"] {
        let l = d.join(n);
        let _ = std::fs::remove_file(&l);
        std::os::unix::fs::symlink(&target, &l).map_err(|e| format!("{}: {e}", l.display()))?;
    }
    Ok(d)
}

/// The directory of the loopback `liburma.so.0`: `$COMPAT_URMA_DIR`, else the one on this
/// process's loader path ([`crate::target::loopback_dir`]), else the Rust library's directory.
pub fn urma_dir(opts: &Options) -> PathBuf {
    match std::env::var_os("COMPAT_URMA_DIR") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => crate::target::loopback_dir().unwrap_or_else(|| {
            opts.rust_lib
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."))
        }),
    }
}

/// Builds the runner into `<out>/c-runner/runner`, or takes the prebuilt one of
/// `--c-runner-exe` (linked like this build: `-los_transport -lurma -ldl`).
pub fn build(opts: &Options) -> Result<(PathBuf, PathBuf, PathBuf), String> {
    let dir = opts.out.join("c-runner");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let legacy_dir = lib_dir(&dir, "legacy", &opts.legacy_lib)?;
    let rust_dir = lib_dir(&dir, "rust", &opts.rust_lib)?;
    if let Some(exe) = &opts.c_runner_exe {
        if !exe.is_file() {
            return Err(format!("--c-runner-exe {}: no such file", exe.display()));
        }
        return Ok((exe.clone(), legacy_dir, rust_dir));
    }
    let src = repo().join("compat-tests/c/runner.c");
    if !src.exists() {
        return Err(format!("{} not found", src.display()));
    }
    let exe = Build::urma_program(&repo(), Flavour::Plain, src, dir.join("runner"))
        .lib(Lib::OsTransport(legacy_dir.clone()))
        .lib(Lib::Urma(urma_dir(opts)))
        .compile()
        .map_err(|e| format!("compiling compat-tests/c/runner.c failed: {e}"))?;
    Ok((exe, legacy_dir, rust_dir))
}

/// Runs `runner <id>` with `libdir`, then `urma`, first on the library path (then this
/// process's: a genuine URMA core there also needs its `liburma_common.so.0`); parses its JSON
/// lines.
pub fn run_one(exe: &Path, libdir: &Path, urma: &Path, id: &str) -> RunResult {
    let mut path = std::ffi::OsString::from(format!("{}:{}", libdir.display(), urma.display()));
    if let Some(rest) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(rest);
    }
    let mut cmd = crate::target::command(exe);
    cmd.arg(id)
        .env("LD_LIBRARY_PATH", path)
        .env_remove("URMA_LOOPBACK_TRACE")
        .env_remove("URMA_LOOPBACK_KNOBS");
    let end = ost_supervise::spawn(&format!("C runner {id}"), &mut cmd, Capture::Pipes)?
        .finish(Duration::from_secs(60));
    let (out, err) = (end.stdout, end.stderr);
    match end.status {
        None => return Err(format!("C runner {id}: no exit within 60 s (killed)")),
        Some(status) if !status.success() => {
            return Err(format!(
                "C runner {id} exited with {status}: {}",
                err.trim()
            ))
        }
        Some(_) => {}
    }
    let mut v = Vec::new();
    let want = std::fs::canonicalize(libdir.join("libos_transport.so.1")).ok();
    let mut lib_ok = false;
    for l in out.lines().filter(|l| !l.trim().is_empty()) {
        let j: Value =
            serde_json::from_str(l).map_err(|e| format!("C runner {id}: bad line {l:?}: {e}"))?;
        if j.get("k").and_then(|k| k.as_str()) == Some("lib") {
            let got = j
                .get("path")
                .and_then(|p| p.as_str())
                .and_then(|p| std::fs::canonicalize(p).ok());
            lib_ok = got.is_some() && got == want;
            continue;
        }
        v.push(j);
    }
    if !lib_ok {
        return Err(format!(
            "C runner {id}: the loaded libos_transport is not {}",
            libdir.join("libos_transport.so.1").display()
        ));
    }
    Ok(v)
}

/// Builds the runner and compares its traces on both libraries.
pub fn run_all(opts: &Options, ledger: &Ledger, only: &[String]) -> Result<Vec<Outcome>, String> {
    let (exe, ldir, rdir) = build(opts)?;
    let ud = urma_dir(opts);
    let names: [(u64, &str); 2] = [(0, "legacy"), (0, "rust")];
    let mut v = Vec::new();
    for (id, desc) in SCENARIOS {
        if !only.is_empty() && !only.iter().any(|o| o == id) {
            continue;
        }
        let t = Instant::now();
        let l = run_one(&exe, &ldir, &ud, id);
        let r = run_one(&exe, &rdir, &ud, id);
        v.push(judge(
            id,
            "c-runner",
            desc,
            l,
            r,
            &names,
            ledger,
            None,
            None,
            t.elapsed().as_millis(),
        ));
    }
    Ok(v)
}
