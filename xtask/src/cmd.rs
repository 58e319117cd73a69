//! Running commands and failing a goal: what every other module of the xtask uses. Uses no
//! module of the crate.

use std::process::Command;

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

/// The loopback's security suites (urma-loopback/tests/security.rs, which makes users, and
/// plugin_safety.rs, which makes a setuid-root program) need root. As root, and always in CI,
/// they must run (`cmd` gets `URMA_SECURITY_REQUIRED`); a developer's run without root skips
/// them (each says so).
pub fn security_required(cmd: &mut Command) -> &mut Command {
    if is_root() || std::env::var_os("CI").is_some() {
        cmd.env("URMA_SECURITY_REQUIRED", "1");
    } else {
        println!("xtask: not root, so the loopback's security suite is skipped");
    }
    cmd
}

/// Whether this process runs as root (its effective uid, from `/proc/self/status`).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let uids = s.lines().find_map(|l| l.strip_prefix("Uid:"))?.to_string();
            uids.split_whitespace().nth(1).map(|e| e == "0")
        })
        .unwrap_or(false)
}

/// The `urma_*` functions `lib` defines in its dynamic symbol table (`nm -D --defined-only`).
pub fn urma_exports(lib: &std::path::Path) -> Vec<String> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .unwrap_or_else(|e| fail(format!("nm: {e}")));
    if !out.status.success() {
        fail(format!("nm -D {} failed", lib.display()));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|n| n.starts_with("urma_"))
        .map(str::to_string)
        .collect()
}
