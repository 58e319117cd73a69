//! Link settings of the cdylib: SONAME libos_transport.so.1 and the export list os_transport.map;
//! the target triple for the tests.
use std::path::PathBuf;

fn main() {
    let dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let map = dir.join("os_transport.map");
    println!("cargo:rerun-if-changed=os_transport.map");
    println!("cargo:rerun-if-changed=build.rs");
    // Target triple for tests that drive the `cc` crate outside a build script (tests/c_consumer.rs).
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    println!("cargo:rustc-env=OST_BUILD_TARGET={target}");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libos_transport.so.1");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map.display()
    );
}
