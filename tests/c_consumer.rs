//! The drop-in claim, end to end: `tests/c/consumer.c`, an ordinary C application of
//! `libos_transport.so.1`, is compiled once (with the `cc` crate's compiler) against
//! `include/os_transport.h` and the bundled URMA header, linked with `-los_transport -lurma`
//! against the Rust cdylib, and then the **same binary** is run twice over the loopback
//! `liburma.so.0`: with the Rust library first on `LD_LIBRARY_PATH`, and with the legacy C library
//! (`<target>/legacy`) first. Both runs must pass every check of the program.
mod common;

use common::{profile_dir, repo, run, rust_lib, scratch};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `<target>/legacy` (or the directory of `$LEGACY_LIB`).
fn legacy_dir() -> PathBuf {
    match std::env::var_os("LEGACY_LIB") {
        Some(p) if !p.is_empty() => PathBuf::from(p)
            .parent()
            .expect("LEGACY_LIB has a directory")
            .to_path_buf(),
        _ => profile_dir().parent().expect("<target>").join("legacy"),
    }
}

/// A directory holding `libos_transport.so` (link time) and `libos_transport.so.1` (the SONAME,
/// run time), both pointing at the Rust cdylib, as an installed package would.
fn rust_install_dir(root: &Path) -> PathBuf {
    let d = root.join("rust-lib");
    std::fs::create_dir_all(&d).expect("mkdir");
    for name in ["libos_transport.so", "libos_transport.so.1"] {
        let l = d.join(name);
        let _ = std::fs::remove_file(&l);
        std::os::unix::fs::symlink(rust_lib(), &l).expect("symlink");
    }
    d
}

fn compile(root: &Path, rust_dir: &Path) -> PathBuf {
    let target = env!("OST_BUILD_TARGET");
    let tool = cc::Build::new()
        .target(target)
        .host(target)
        .opt_level(0)
        .debug(false)
        .cargo_metadata(false)
        .get_compiler();
    let exe = root.join("consumer");
    let mut cmd = tool.to_command();
    cmd.args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pthread"])
        .arg(format!("-I{}", repo().join("include").display()))
        .arg(format!("-I{}", repo().join("urma-sys/include").display()))
        .arg("-o")
        .arg(&exe)
        .arg(repo().join("tests/c/consumer.c"))
        .arg(format!("-L{}", rust_dir.display()))
        .arg("-los_transport")
        .arg(format!("-L{}", profile_dir().display()))
        .arg("-lurma")
        .args(["-lpthread", "-ldl"]);
    run(&mut cmd);
    exe
}

fn run_with(exe: &Path, first: &Path) -> String {
    let path = format!("{}:{}", first.display(), profile_dir().display());
    let out = compat_tests::target::command(exe)
        .env("LD_LIBRARY_PATH", path)
        .env_remove("OST_LOG_FILE_PATH")
        .output()
        .expect("run consumer");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("consumer ok: "),
        "consumer with {} first failed ({}):\n{text}",
        first.display(),
        out.status
    );
    text
}

#[test]
fn same_c_binary_runs_against_rust_and_legacy() {
    assert!(
        profile_dir().join("liburma.so.0").exists(),
        "no loopback liburma.so.0 in {}",
        profile_dir().display()
    );
    let legacy = legacy_dir();
    assert!(
        legacy.join("libos_transport.so.1").exists(),
        "legacy library not built in {} (build the workspace: cargo build --workspace)",
        legacy.display()
    );
    let root = scratch("c-consumer");
    let rust_dir = rust_install_dir(&root);
    let exe = compile(&root, &rust_dir);

    // The binary depends on the SONAMEs only, never on a path.
    let dynamic = run(Command::new("readelf").arg("-d").arg(&exe));
    assert!(
        dynamic.contains("[libos_transport.so.1]") && dynamic.contains("[liburma.so.0]"),
        "{dynamic}"
    );
    assert!(!dynamic.contains("RPATH") && !dynamic.contains("RUNPATH"));

    let with_rust = run_with(&exe, &rust_dir);
    assert!(
        with_rust.contains(&rust_dir.join("libos_transport.so.1").display().to_string()),
        "the Rust library was not the one loaded: {with_rust}"
    );
    let with_legacy = run_with(&exe, &legacy);
    assert!(
        with_legacy.contains(&legacy.join("libos_transport.so.1").display().to_string()),
        "the legacy library was not the one loaded: {with_legacy}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
