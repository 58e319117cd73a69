//! urma-sys build script.
//!
//! The selections of 1. and 3. are `ost_build_support::urma`; `cargo xtask` reads their result
//! (`URMA_SYS_INCLUDE_DIR`, `URMA_SYS_LINK_DIR`) from cargo's build messages, never selects again.
//!
//! 1. Header selection: `URMA_INCLUDE_DIR` (a directory holding
//!    `ub/umdk/urma/urma_api.h`), else the system UMDK headers if
//!    `/usr/include/ub/umdk/urma/urma_api.h` exists, else the bundled
//!    ABI-exact headers in `include/`. `URMA_SYS_BUNDLED_HEADERS=1` forces the
//!    bundled ones. Published to dependents as `DEP_URMA_INCLUDE`.
//! 2. Bindings: with feature `bindgen` they are generated (libclang) from the
//!    headers in use into `$OUT_DIR/bindings.rs`; otherwise the committed
//!    `src/bindings_<arch>.rs` (made from the bundled headers) is used. With real UMDK
//!    headers and no `bindgen` feature, `abi/abi_static_check.c` and
//!    `abi/provider_static_check.c` (the ABI facts of the API and of the provider
//!    interface as `_Static_assert`s) are compiled against them first: the build
//!    fails unless their layout is the one the committed bindings encode, so no
//!    libclang is needed when it matches.
//! 3. Linking (`links = "urma"`): `-lurma` from `URMA_LIB_DIR`, else (native
//!    builds only) from /usr/lib64 or /usr/lib/<arch>-linux-gnu if a real
//!    `liburma.so` is there, else from a link-only import stub built into `$OUT_DIR/link/liburma.so`
//!    (SONAME liburma.so.0, no `.so.0` file beside it). Published as
//!    `DEP_URMA_LINK_DIR`.

use ost_build_support::urma::{self, API_H, SYSTEM_INCLUDE};
use std::env;
use std::path::{Path, PathBuf};

#[cfg(feature = "bindgen")]
include!("bindgen_config.rs");

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));

    for var in urma::ENV_VARS {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=bindgen_config.rs");
    println!("cargo:rerun-if-changed=src/bindings_x86_64.rs");
    println!("cargo:rerun-if-changed=src/bindings_aarch64.rs");
    println!("cargo:rerun-if-changed=stub/liburma_link_stub.c");
    // A system UMDK header decides the selection: watch it, or while there is none the
    // directory it would appear in (a missing file would make cargo rerun this script, and
    // rebuild everything above urma-sys, on every build).
    let system_api_h = Path::new(SYSTEM_INCLUDE).join(API_H);
    if system_api_h.exists() {
        println!("cargo:rerun-if-changed={}", system_api_h.display());
    } else {
        println!("cargo:rerun-if-changed={SYSTEM_INCLUDE}");
    }
    println!("cargo:rustc-check-cfg=cfg(urma_sys_generated_bindings)");

    // ---- 1. headers ------------------------------------------------------
    let bundled = manifest.join("include");
    let (include_dir, real_headers) = urma::select_include_dir(&bundled);
    for h in [
        "urma_api.h",
        "urma_types.h",
        "urma_opcode.h",
        "urma_provider.h",
    ] {
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
    // The host's UMDK library is only usable when building for the host.
    let target = env::var("TARGET").expect("TARGET");
    let native = env::var("HOST").ok().as_deref() == Some(target.as_str());
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("CARGO_CFG_TARGET_ARCH");
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .get_compiler();
    let (link_dir, stub) = urma::select_link_dir(
        &manifest.join("stub/liburma_link_stub.c"),
        &out,
        native,
        &arch,
        &compiler,
    );
    println!("cargo:rustc-link-search=native={}", link_dir.display());
    println!("cargo:rustc-env=URMA_SYS_LINK_DIR={}", link_dir.display());
    println!("cargo:rustc-env=URMA_SYS_LINK_STUB={}", u8::from(stub));
    println!("cargo:rustc-link-lib=dylib=urma");
    println!("cargo:link_dir={}", link_dir.display());
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

/// Compiles abi/abi_static_check.c and abi/provider_static_check.c (generated from the ABI
/// facts of the public API and of the provider interface: sizes, offsets, constants, prototypes
/// as _Static_assert) against `include_dir`. No libclang needed. Fails the build if the headers
/// differ from the layout the committed bindings encode.
fn check_real_headers(manifest: &Path, include_dir: &Path, out: &Path) {
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .get_compiler();
    for (check, header) in [
        ("abi/abi_static_check.c", "urma_api.h"),
        ("abi/provider_static_check.c", "urma_provider.h"),
    ] {
        let check = manifest.join(check);
        println!("cargo:rerun-if-changed={}", check.display());
        if !include_dir.join("ub/umdk/urma").join(header).exists() {
            println!(
                "cargo:warning=urma-sys: no {header} in {}: its bindings are those of the bundled \
                 header, unchecked against these headers",
                include_dir.display()
            );
            continue;
        }
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
                "urma-sys: the URMA headers in {} do not have the ABI the committed bindings were \
                 made for ({header}, see below). Build with `--features urma-sys/bindgen` (needs \
                 libclang) to generate bindings from these headers, or set \
                 URMA_SYS_BUNDLED_HEADERS=1.\n{}",
                include_dir.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
    println!(
        "cargo:warning=urma-sys: UMDK headers in {} match the bundled ABI: using the committed bindings",
        include_dir.display()
    );
}
