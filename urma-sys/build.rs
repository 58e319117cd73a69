//! urma-sys build script.
//!
//! 1. Header selection: `URMA_INCLUDE_DIR` (a directory holding
//!    `ub/umdk/urma/urma_api.h`), else the system UMDK headers if
//!    `/usr/include/ub/umdk/urma/urma_api.h` exists, else the bundled
//!    ABI-exact headers in `include/`. `URMA_SYS_BUNDLED_HEADERS=1` forces the
//!    bundled ones. Published to dependents as `DEP_URMA_INCLUDE`.
//! 2. Bindings: with feature `bindgen` they are generated (libclang) from the
//!    headers in use into `$OUT_DIR/bindings.rs`; otherwise the committed
//!    `src/bindings_<arch>.rs` (made from the bundled headers) is used. With real UMDK
//!    headers and no `bindgen` feature, `abi/abi_static_check.c` (the ABI facts
//!    as `_Static_assert`s) is compiled against them first: the build fails
//!    unless their layout is the one the committed bindings encode, so no
//!    libclang is needed when it matches.
//! 3. Linking (`links = "urma"`): `-lurma` from `URMA_LIB_DIR`, else (native
//!    builds only) from /usr/lib64 or /usr/lib/<arch>-linux-gnu if a real
//!    `liburma.so` is there, else from a link-only import stub built into `$OUT_DIR/link/liburma.so`
//!    (SONAME liburma.so.0, no `.so.0` file beside it). Published as
//!    `DEP_URMA_LINK_DIR`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

#[cfg(feature = "bindgen")]
include!("bindgen_config.rs");

const API_H: &str = "ub/umdk/urma/urma_api.h";
const SYSTEM_INCLUDE: &str = "/usr/include";

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));

    for var in [
        "URMA_INCLUDE_DIR",
        "URMA_LIB_DIR",
        "URMA_SYS_BUNDLED_HEADERS",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=bindgen_config.rs");
    println!("cargo:rerun-if-changed=src/bindings_x86_64.rs");
    println!("cargo:rerun-if-changed=src/bindings_aarch64.rs");
    println!("cargo:rerun-if-changed=stub/liburma_link_stub.c");
    println!("cargo:rerun-if-changed={SYSTEM_INCLUDE}/{API_H}");
    println!("cargo:rustc-check-cfg=cfg(urma_sys_generated_bindings)");

    // ---- 1. headers ------------------------------------------------------
    let bundled = manifest.join("include");
    let (include_dir, real_headers) = select_include_dir(&bundled);
    for h in ["urma_api.h", "urma_types.h", "urma_opcode.h"] {
        println!(
            "cargo:rerun-if-changed={}",
            include_dir.join("ub/umdk/urma").join(h).display()
        );
    }
    println!("cargo:include={}", include_dir.display());
    println!(
        "cargo:rustc-env=URMA_SYS_INCLUDE_DIR={}",
        include_dir.display()
    );

    // ---- 2. bindings -----------------------------------------------------
    if generate_bindings(&include_dir, real_headers, &out) {
        println!("cargo:rustc-cfg=urma_sys_generated_bindings");
    } else if real_headers {
        // The committed bindings encode the bundled layout: only use them with
        // other headers if those have exactly that layout.
        check_real_headers(&manifest, &include_dir, &out);
    }

    // ---- 3. linking ------------------------------------------------------
    let (link_dir, stub) = select_link_dir(&manifest, &out);
    println!("cargo:rustc-link-search=native={}", link_dir.display());
    println!("cargo:rustc-env=URMA_SYS_LINK_DIR={}", link_dir.display());
    println!("cargo:rustc-env=URMA_SYS_LINK_STUB={}", u8::from(stub));
    println!("cargo:rustc-link-lib=dylib=urma");
    println!("cargo:link_dir={}", link_dir.display());
}

fn select_include_dir(bundled: &Path) -> (PathBuf, bool) {
    if env::var_os("URMA_SYS_BUNDLED_HEADERS").is_some_and(|v| !v.is_empty() && v != "0") {
        return (bundled.to_path_buf(), false);
    }
    if let Some(dir) = env::var_os("URMA_INCLUDE_DIR").filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        if !dir.join(API_H).is_file() {
            panic!(
                "urma-sys: URMA_INCLUDE_DIR={} does not contain {API_H}",
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

/// Returns true if `$OUT_DIR/bindings.rs` was written.
#[cfg(feature = "bindgen")]
fn generate_bindings(include_dir: &Path, _real_headers: bool, out: &Path) -> bool {
    let target = env::var("TARGET").expect("TARGET");
    let bindings = urma_bindgen_builder(include_dir, &target)
        .generate()
        .unwrap_or_else(|e| panic!("urma-sys: bindgen failed on {}: {e}", include_dir.display()));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("urma-sys: cannot write $OUT_DIR/bindings.rs");
    true
}

#[cfg(not(feature = "bindgen"))]
fn generate_bindings(_include_dir: &Path, _real_headers: bool, _out: &Path) -> bool {
    false
}

/// The directory to link `-lurma` from, and whether it is the link stub.
fn select_link_dir(manifest: &Path, out: &Path) -> (PathBuf, bool) {
    if let Some(dir) = env::var_os("URMA_LIB_DIR").filter(|v| !v.is_empty()) {
        return (PathBuf::from(dir), false);
    }
    // The host's UMDK library is only usable when building for the host.
    let target = env::var("TARGET").expect("TARGET");
    if env::var("HOST").ok().as_deref() == Some(target.as_str()) {
        let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("CARGO_CFG_TARGET_ARCH");
        for dir in [
            "/usr/lib64".to_string(),
            format!("/usr/lib/{arch}-linux-gnu"),
        ] {
            if Path::new(&dir).join("liburma.so").exists() {
                return (PathBuf::from(dir), false);
            }
        }
    }
    (build_link_stub(manifest, out), true)
}

/// Compiles abi/abi_static_check.c (generated from the ABI facts: sizes,
/// offsets, constants, prototypes as _Static_assert) against `include_dir`.
/// No libclang needed. Fails the build if the headers differ from the layout
/// the committed bindings encode.
fn check_real_headers(manifest: &Path, include_dir: &Path, out: &Path) {
    let check = manifest.join("abi/abi_static_check.c");
    println!("cargo:rerun-if-changed={}", check.display());
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .get_compiler();
    let mut cmd = compiler.to_command();
    cmd.args(["-std=gnu11", "-fsyntax-only"])
        .arg(format!("-I{}", include_dir.display()))
        .arg(&check)
        .current_dir(out);
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("urma-sys: cannot run the C compiler ({cmd:?}): {e}"));
    if !output.status.success() {
        panic!(
            "urma-sys: the URMA headers in {} do not have the ABI the committed bindings were made \
             for (see below). Build with `--features urma-sys/bindgen` (needs libclang) to generate \
             bindings from these headers, or set URMA_SYS_BUNDLED_HEADERS=1.\n{}",
            include_dir.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    println!(
        "cargo:warning=urma-sys: UMDK headers in {} match the bundled ABI: using the committed bindings",
        include_dir.display()
    );
}

/// Builds the link-only import library `$OUT_DIR/link/liburma.so`.
fn build_link_stub(manifest: &Path, out: &Path) -> PathBuf {
    let dir = out.join("link");
    std::fs::create_dir_all(&dir).expect("urma-sys: cannot create $OUT_DIR/link");
    // A liburma.so.0 here would make the stub loadable: make sure there is none.
    let _ = std::fs::remove_file(dir.join("liburma.so.0"));
    let src = manifest.join("stub/liburma_link_stub.c");
    let lib = dir.join("liburma.so");
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .get_compiler();
    let mut cmd: Command = compiler.to_command();
    cmd.args(["-shared", "-fPIC", "-O2", "-Wl,-soname,liburma.so.0", "-o"])
        .arg(&lib)
        .arg(&src);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("urma-sys: cannot run the C compiler ({cmd:?}): {e}"));
    if !status.success() {
        panic!("urma-sys: building the liburma link stub failed: {cmd:?} exited with {status}");
    }
    dir
}
