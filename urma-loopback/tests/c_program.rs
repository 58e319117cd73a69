//! Builds the C programs of tests/c (smoke.c; fork.c, the DMA engine after fork), each with the
//! repository's shared C URMA fixture (tests/c/urma_fixture.c), against urma-sys's bundled header
//! and the loopback header, links them with `-lurma` against the loopback
//! (`<target>/<profile>/liburma.so`) and runs them.

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

/// Compiles `tests/c/<name>.c` with the C URMA fixture against the bundled and loopback headers,
/// links it with `-lurma`, runs it and returns its stdout + stderr after asserting it exited
/// with 0.
fn build_and_run(name: &str) -> String {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("loopback-c-{name}"));
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
        .arg(manifest.join(format!("tests/c/{name}.c")))
        .arg(fixture_dir().join("urma_fixture.c"))
        .arg(format!("-I{}", urma_sys::bundled_include_dir()))
        .arg(format!("-I{}", manifest.join("include").display()))
        .arg(format!("-I{}", fixture_dir().display()))
        .arg(format!("-L{}", lib_dir.display()))
        .arg("-lurma")
        .status()
        .expect("run the C compiler");
    assert!(st.success(), "compiling {name}.c failed");
    // Inherits LD_LIBRARY_PATH: cargo puts the loopback's liburma.so.0 on it (build.rs).
    let o = target::command(&out).output().unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    text
}

#[test]
fn c_program_links_and_runs_against_the_loopback() {
    let text = build_and_run("smoke");
    assert!(text.contains("c-smoke ok"), "{text}");
}

#[test]
fn a_forked_child_posts_on_inherited_objects_with_an_engine_of_its_own() {
    let text = build_and_run("fork");
    assert!(text.contains("c-fork ok"), "{text}");
}
