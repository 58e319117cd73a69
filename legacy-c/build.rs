//! Builds `legacy-c/`, the C99 reference implementation of os_transport 1.0, beside the Rust
//! library.
//!
//! 1. Compiles `src/*.c` to objects with the `cc` crate (`-std=c99 -Wall -Wextra -Werror -pthread
//!    -fPIC -fvisibility=hidden -D_POSIX_C_SOURCE=200809L`), include dirs `<repo>/include` and the
//!    URMA headers published by `urma-sys` as `DEP_URMA_INCLUDE`.
//! 2. Links them with the same compiler into `<target>/legacy/libos_transport.so.1.0.0`
//!    (SONAME `libos_transport.so.1`, `-Wl,-z,defs`, `-L$DEP_URMA_LINK_DIR -lurma -lpthread`), with
//!    the symlinks `libos_transport.so.1` and `libos_transport.so`, plus the flags of `LDFLAGS`
//!    (the distribution's hardening flags in an RPM build). `<target>` is derived from
//!    `OUT_DIR` = `<target>/<profile>/build/<pkg>-<hash>/out`.
//! 3. Exposes the path to `rust/lib.rs`'s test as `OST_LEGACY_LIB_PATH` (read with `env!`).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

const SOURCES: &[&str] = &[
    "src/os_transport.c",
    "src/ost_log.c",
    "src/ost_thread_pool.c",
    "src/ost_urma.c",
];
const HEADERS: &[&str] = &["src/ost_log.h", "src/ost_thread_pool.h", "src/ost_urma.h"];
const REAL_NAME: &str = "libos_transport.so.1.0.0";
const SONAME: &str = "libos_transport.so.1";
const DEV_NAME: &str = "libos_transport.so";

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let repo = manifest
        .parent()
        .expect("legacy-c has a parent directory")
        .to_path_buf();
    let public_include = repo.join("include");

    println!("cargo:rerun-if-changed=build.rs");
    for f in SOURCES.iter().chain(HEADERS) {
        println!("cargo:rerun-if-changed={}", manifest.join(f).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        public_include.join("os_transport.h").display()
    );
    println!("cargo:rerun-if-env-changed=DEP_URMA_INCLUDE");
    println!("cargo:rerun-if-env-changed=DEP_URMA_LINK_DIR");
    println!("cargo:rerun-if-env-changed=LDFLAGS");

    let urma_include = env::var_os("DEP_URMA_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("urma-sys").join("include"));
    let urma_link_dir = env::var_os("DEP_URMA_LINK_DIR")
        .map(PathBuf::from)
        .expect("DEP_URMA_LINK_DIR: urma-sys (links = \"urma\") must publish cargo:link_dir");

    // 1. objects
    let mut build = cc::Build::new();
    build
        .cargo_metadata(false)
        .pic(true)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .flag("-std=c99")
        .flag("-pthread")
        .flag("-fvisibility=hidden")
        .define("_POSIX_C_SOURCE", "200809L")
        .include(&public_include)
        .include(&urma_include)
        .include(manifest.join("src"));
    for f in SOURCES {
        build.file(manifest.join(f));
    }
    let objects = build.compile_intermediates();

    // 2. shared object, linked with the same compiler
    let legacy_dir = target_dir_from_out_dir(&out_dir).join("legacy");
    fs::create_dir_all(&legacy_dir).expect("create <target>/legacy");
    let tmp = out_dir.join(format!("{REAL_NAME}.tmp"));
    let compiler = build.get_compiler();
    let mut cmd = compiler.to_command();
    cmd.args(&objects)
        .arg("-shared")
        .arg("-pthread")
        .arg(format!("-Wl,-soname,{SONAME}"))
        .arg("-Wl,-z,defs")
        .arg("-o")
        .arg(&tmp)
        .arg(format!("-L{}", urma_link_dir.display()))
        .arg("-lurma")
        .arg("-lpthread");
    // The `cc` crate passes CFLAGS to the compile step only; the link step takes LDFLAGS here.
    if let Ok(ldflags) = env::var("LDFLAGS") {
        cmd.args(ldflags.split_whitespace());
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running the C compiler to link {REAL_NAME}: {e}"));
    assert!(status.success(), "linking {REAL_NAME} failed: {cmd:?}");

    // Atomic replacement: a debug and a release build may share <target>/legacy.
    let real = legacy_dir.join(REAL_NAME);
    if let Err(e) = fs::rename(&tmp, &real) {
        fs::copy(&tmp, &real).unwrap_or_else(|e2| panic!("install {}: {e} / {e2}", real.display()));
    }
    symlink_replace(REAL_NAME, &legacy_dir.join(SONAME), &out_dir);
    symlink_replace(SONAME, &legacy_dir.join(DEV_NAME), &out_dir);

    // 3. path for rust/lib.rs
    println!(
        "cargo:rustc-env=OST_LEGACY_LIB_PATH={}",
        legacy_dir.join(SONAME).display()
    );
    println!("cargo:rustc-env=OST_LEGACY_DIR={}", legacy_dir.display());
}

/// `<target>/<profile>/build/<pkg>-<hash>/out` -> `<target>`.
fn target_dir_from_out_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .nth(4)
        .unwrap_or_else(|| panic!("unexpected OUT_DIR layout: {}", out_dir.display()))
        .to_path_buf()
}

/// Creates or atomically replaces `link` with a relative symlink to `target`.
fn symlink_replace(target: &str, link: &Path, scratch: &Path) {
    let name = link.file_name().expect("link name").to_string_lossy();
    let tmp = scratch.join(format!("{name}.link.tmp"));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)
        .unwrap_or_else(|e| panic!("symlink {} -> {target}: {e}", tmp.display()));
    if fs::rename(&tmp, link).is_err() {
        // Different file systems: fall back to remove + create.
        let _ = fs::remove_file(link);
        std::os::unix::fs::symlink(target, link)
            .unwrap_or_else(|e| panic!("symlink {} -> {target}: {e}", link.display()));
    }
}
