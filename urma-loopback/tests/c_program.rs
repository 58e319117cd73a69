//! Builds tests/c/smoke.c (with the repository's shared C URMA fixture, tests/c/urma_fixture.c)
//! against urma-sys's bundled header and the loopback header, links it with `-lurma` against the
//! loopback (`<target>/<profile>/liburma.so`) and runs it.

use std::path::PathBuf;
use std::process::Command;

use testkit::{cc, profile_dir, target};

/// The directory of the C test programs' URMA fixture: `tests/c` of the repository.
fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|d| d.join("tests/c"))
        .find(|d| d.join("urma_fixture.c").is_file())
        .expect("tests/c/urma_fixture.c above the crate")
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
    let st = Command::new(cc())
        .args([
            "-std=gnu11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pthread",
            "-o",
        ])
        .arg(&out)
        .arg(manifest.join("tests/c/smoke.c"))
        .arg(fixture_dir().join("urma_fixture.c"))
        .arg(format!("-I{}", urma_sys::bundled_include_dir()))
        .arg(format!("-I{}", manifest.join("include").display()))
        .arg(format!("-I{}", fixture_dir().display()))
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
