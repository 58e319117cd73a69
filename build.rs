//! Link settings of the cdylib: SONAME libos_transport.so.1; the target triple for the tests.
//!
//! The export list needs no linker argument: for a cdylib rustc itself hands the linker an
//! anonymous version script that exports exactly the `#[no_mangle]` functions (the ten public
//! ones, all in `src/ffi.rs`) and makes everything else local. A second anonymous version script
//! of our own is rejected by GNU ld ("anonymous version tag cannot be combined with other version
//! tags"; lld, the default linker of recent rustc on x86_64, merges them), so there is none.
//! `tests/symbols.rs` pins the exported set, that it is unversioned, and the SONAME.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Target triple for tests that drive the `cc` crate outside a build script (tests/c_consumer.rs).
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    println!("cargo:rustc-env=OST_BUILD_TARGET={target}");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libos_transport.so.1");
}
