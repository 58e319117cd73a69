//! Builds tests/c/smoke.c against urma-sys's bundled header and the loopback header, links it
//! with `-lurma` against the loopback (`<target>/<profile>/liburma.so`) and runs it.

use std::path::PathBuf;
use std::process::Command;

#[path = "../../../compat-tests/src/target.rs"]
mod target;

fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

#[test]
fn c_program_links_and_runs_against_the_loopback() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("loopback-c-smoke");
    let lib_dir = profile_dir();
    assert!(
        lib_dir.join("liburma.so").exists(),
        "loopback not built in {}",
        lib_dir.display()
    );
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&out)
        .arg(manifest.join("tests/c/smoke.c"))
        .arg(format!("-I{}", urma_sys::bundled_include_dir()))
        .arg(format!("-I{}", manifest.join("include").display()))
        .arg(format!("-L{}", lib_dir.display()))
        .arg("-lurma")
        .status()
        .expect("run the C compiler");
    assert!(st.success(), "compiling smoke.c failed");
    // Inherits LD_LIBRARY_PATH: cargo puts the loopback's liburma.so.0 on it (build.rs).
    let o = target::command(&out).output().unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("c-smoke ok"), "{text}");
}
