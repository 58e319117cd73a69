//! Builds `legacy-c/`, the C99 reference implementation of os_transport 1.0, beside the Rust
//! library: `ost_build_support::legacy::build` in the flavour of the cargo profile, into
//! `$OUT_DIR/legacy/` (`libos_transport.so.1.0.0` and its `.so.1`, `.so` links), with the URMA
//! headers and link directory that `urma-sys` publishes (`DEP_URMA_INCLUDE`,
//! `DEP_URMA_LINK_DIR`). The paths reach `rust/lib.rs` as `OST_LEGACY_LIB_PATH` and
//! `OST_LEGACY_DIR` (read with `env!`); each profile has its own `OUT_DIR`, so its own library.

use ost_build_support::legacy::{self, Flavour, Inputs};
use std::env;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let repo = manifest
        .parent()
        .expect("legacy-c has a parent")
        .to_path_buf();

    println!("cargo:rerun-if-changed=build.rs");
    let inputs = Inputs::from_build_script(repo);
    let dir = legacy::build(&cc::Build::new(), Flavour::Profile, &inputs, &out_dir);
    println!(
        "cargo:rustc-env=OST_LEGACY_LIB_PATH={}",
        dir.join(legacy::SONAME).display()
    );
    println!("cargo:rustc-env=OST_LEGACY_DIR={}", dir.display());
    // The inject flavour (docs/inject.md), for the fault-injection tests and `compat --inject`.
    let inject = legacy::build(&cc::Build::new(), Flavour::Inject, &inputs, &out_dir);
    println!(
        "cargo:rustc-env=OST_LEGACY_INJECT_LIB_PATH={}",
        inject.join(legacy::SONAME).display()
    );
    // For tests/c_smoke.rs, which builds the ASan/UBSan flavour with the same inputs.
    println!(
        "cargo:rustc-env=OST_LEGACY_URMA_LINK_DIR={}",
        inputs.urma_link_dir.display()
    );
    let target = env::var("TARGET").expect("cargo sets TARGET");
    println!("cargo:rustc-env=OST_LEGACY_TARGET={target}");
}
