//! Build script of ostbench.
//!
//! 1. `c/vgreq.c` (callgrind client requests) into a static library linked into `ostbench`;
//!    the requests are compiled in when `<valgrind/callgrind.h>` exists.
//! 2. `c/alloc_count.c` into `$OUT_DIR/libostbench_alloc.so`, the LD_PRELOAD counting allocator
//!    (path exported as `OSTBENCH_ALLOC_SO`).
//! 3. The C reference `legacy-c/src/*.c` with the flags of `legacy-c/Makefile`'s release build
//!    (`-O2 -g`) into `$OUT_DIR/legacy-O2/libos_transport.so.1` (path exported as
//!    `OSTBENCH_LEGACY_O2`). `<target>/legacy/` is shared by the debug and the release profile and
//!    holds whichever was built last (`-O0` after a debug build), so the benchmark compiles its own
//!    optimised copy instead of depending on build order.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const LEGACY_SOURCES: &[&str] = &[
    "os_transport.c",
    "ost_log.c",
    "ost_thread_pool.c",
    "ost_urma.c",
];

fn valgrind_include() -> Option<PathBuf> {
    if let Some(d) = env::var_os("OSTBENCH_VALGRIND_INCLUDE") {
        return Some(PathBuf::from(d));
    }
    ["/usr/include", "/usr/local/include"]
        .iter()
        .map(PathBuf::from)
        .find(|d| d.join("valgrind/callgrind.h").exists())
}

fn run(mut cmd: Command, what: &str) {
    let st = cmd
        .status()
        .unwrap_or_else(|e| panic!("{what}: cannot run the C compiler: {e}"));
    assert!(st.success(), "{what} failed: {cmd:?}");
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let repo = manifest.parent().expect("repo root").to_path_buf();
    let legacy_src = repo.join("legacy-c").join("src");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=c");
    println!("cargo:rerun-if-changed={}", legacy_src.display());
    println!(
        "cargo:rerun-if-changed={}",
        repo.join("include/os_transport.h").display()
    );
    println!("cargo:rerun-if-env-changed=OSTBENCH_VALGRIND_INCLUDE");

    // 1. client requests
    let mut vg = cc::Build::new();
    vg.file(manifest.join("c/vgreq.c")).opt_level(2);
    match valgrind_include() {
        Some(inc) => {
            vg.include(inc).define("OSTBENCH_HAVE_VALGRIND", None);
            println!("cargo:rustc-env=OSTBENCH_HAVE_VALGRIND=1");
        }
        None => {
            println!(
                "cargo:warning=<valgrind/callgrind.h> not found: callgrind measurements disabled"
            );
            println!("cargo:rustc-env=OSTBENCH_HAVE_VALGRIND=0");
        }
    }
    vg.compile("ostbench_vgreq");

    let compiler = cc::Build::new().opt_level(2).get_compiler();

    // 2. counting allocator
    let alloc_so = out.join("libostbench_alloc.so");
    let mut cmd = compiler.to_command();
    cmd.args(["-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-o"])
        .arg(&alloc_so)
        .arg(manifest.join("c/alloc_count.c"));
    run(cmd, "building libostbench_alloc.so");
    println!("cargo:rustc-env=OSTBENCH_ALLOC_SO={}", alloc_so.display());

    // 3. optimised C reference
    let urma_include = env::var_os("DEP_URMA_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("urma-sys").join("include"));
    let urma_link_dir = env::var_os("DEP_URMA_LINK_DIR")
        .map(PathBuf::from)
        .expect("DEP_URMA_LINK_DIR (urma-sys publishes cargo:link_dir)");
    let dir = out.join("legacy-O2");
    std::fs::create_dir_all(&dir).expect("create legacy-O2");
    let real = dir.join("libos_transport.so.1.0.0");
    let mut cmd = compiler.to_command();
    cmd.args([
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-pthread",
        "-fPIC",
        "-fvisibility=hidden",
        "-D_POSIX_C_SOURCE=200809L",
        "-O2",
        "-g",
    ])
    .arg(format!("-I{}", repo.join("include").display()))
    .arg(format!("-I{}", urma_include.display()))
    .arg(format!("-I{}", legacy_src.display()));
    for s in LEGACY_SOURCES {
        cmd.arg(legacy_src.join(s));
    }
    cmd.args([
        "-shared",
        "-Wl,-soname,libos_transport.so.1",
        "-Wl,-z,defs",
        "-o",
    ])
    .arg(&real)
    .arg(format!("-L{}", urma_link_dir.display()))
    .args(["-lurma", "-lpthread"]);
    run(cmd, "building the -O2 C reference");
    let link = dir.join("libos_transport.so.1");
    replace_symlink("libos_transport.so.1.0.0", &link);
    println!("cargo:rustc-env=OSTBENCH_LEGACY_O2={}", link.display());
}

fn replace_symlink(target: &str, link: &Path) {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link)
        .unwrap_or_else(|e| panic!("symlink {}: {e}", link.display()));
}
