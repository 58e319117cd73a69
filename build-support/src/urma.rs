//! URMA headers and the `-lurma` link directory.

use crate::cprog::{Build, Compiler, Flavour};
use std::path::{Path, PathBuf};

/// The header every URMA include directory holds.
pub const API_H: &str = "ub/umdk/urma/urma_api.h";
/// Where a system UMDK installation puts its headers.
pub const SYSTEM_INCLUDE: &str = "/usr/include";
/// Environment variables the selection reads (for `cargo:rerun-if-env-changed`).
pub const ENV_VARS: &[&str] = &[
    "URMA_INCLUDE_DIR",
    "URMA_LIB_DIR",
    "URMA_SYS_BUNDLED_HEADERS",
];

fn env_nonempty(var: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(var).filter(|v| !v.is_empty())
}

/// The URMA include directory and whether it holds real (non-bundled) headers:
/// `URMA_SYS_BUNDLED_HEADERS=1` forces `bundled`; else `URMA_INCLUDE_DIR` (must hold
/// [`API_H`]); else the system UMDK headers if [`SYSTEM_INCLUDE`] has them; else `bundled`.
pub fn select_include_dir(bundled: &Path) -> (PathBuf, bool) {
    if env_nonempty("URMA_SYS_BUNDLED_HEADERS").is_some_and(|v| v != "0") {
        return (bundled.to_path_buf(), false);
    }
    if let Some(dir) = env_nonempty("URMA_INCLUDE_DIR") {
        let dir = PathBuf::from(dir);
        if !dir.join(API_H).is_file() {
            panic!(
                "URMA_INCLUDE_DIR={} does not contain {API_H}",
                dir.display()
            );
        }
        let is_bundled = dir.canonicalize().ok() == bundled.canonicalize().ok();
        return (dir, !is_bundled);
    }
    if Path::new(SYSTEM_INCLUDE).join(API_H).is_file() {
        return (PathBuf::from(SYSTEM_INCLUDE), true);
    }
    (bundled.to_path_buf(), false)
}

/// The directory to link `-lurma` from, and whether it is the link-only stub: `URMA_LIB_DIR`;
/// else, when building for the host (`native`), /usr/lib64 or /usr/lib/<arch>-linux-gnu if a
/// real `liburma.so` is there; else the stub built by [`build_link_stub`] into `<out>/link`.
pub fn select_link_dir(
    stub_src: &Path,
    out: &Path,
    native: bool,
    arch: &str,
    compiler: &cc::Tool,
) -> (PathBuf, bool) {
    if let Some(dir) = env_nonempty("URMA_LIB_DIR") {
        return (PathBuf::from(dir), false);
    }
    if native {
        for dir in [
            "/usr/lib64".to_string(),
            format!("/usr/lib/{arch}-linux-gnu"),
        ] {
            if Path::new(&dir).join("liburma.so").exists() {
                return (PathBuf::from(dir), false);
            }
        }
    }
    (build_link_stub(stub_src, &out.join("link"), compiler), true)
}

/// Builds the link-only import library `<dir>/liburma.so` (SONAME liburma.so.0) from
/// `stub_src`. There is never a `liburma.so.0` beside it, so the dynamic loader cannot pick it.
pub fn build_link_stub(stub_src: &Path, dir: &Path, compiler: &cc::Tool) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    let _ = std::fs::remove_file(dir.join("liburma.so.0"));
    Build::new(Flavour::Plain, dir.join("liburma.so"))
        .compiler(Compiler::Tool(compiler.clone()))
        .source(stub_src)
        .shared(Some("liburma.so.0"))
        .compile()
        .unwrap_or_else(|e| panic!("building the liburma link stub: {e}"));
    dir.to_path_buf()
}
