//! Build script of ostbench.
//!
//! 1. `c/vgreq.c` (callgrind client requests) into a static library linked into `ostbench`;
//!    the requests are compiled in when `<valgrind/callgrind.h>` exists.
//! 2. `c/alloc_count.c` into `$OUT_DIR/libostbench_alloc.so`, the LD_PRELOAD counting allocator
//!    (path exported as `OSTBENCH_ALLOC_SO`).
//! 3. The C reference in its `-O2 -g` flavour (`ost_build_support::legacy`, the one build of
//!    legacy-c) into `$OUT_DIR/legacy-O2/libos_transport.so.1` (path exported as
//!    `OSTBENCH_LEGACY_O2`): the optimisation a distribution builds it with, whatever the profile.

use ost_build_support::legacy::{self, Flavour, Inputs};
use std::env;
use std::path::PathBuf;
use std::process::Command;

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
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=c");
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
    let inputs = Inputs::from_build_script(repo);
    let dir = legacy::build(&cc::Build::new(), Flavour::O2, &inputs, &out);
    println!(
        "cargo:rustc-env=OSTBENCH_LEGACY_O2={}",
        dir.join(legacy::SONAME).display()
    );
}
