//! Build script of the interposition layer: gives the cdylib the SONAME `liburma.so.0` (the
//! dynamic loader must take it for the real library). Nothing is written: the directory that
//! presents the layer as `liburma.so.0` is made at run time by `testkit::paths::interpose_dir`.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liburma.so.0");
    // urma-sys asks the linker for -lurma (its link-only stub). The layer defines every URMA
    // symbol itself and reaches the real library with dlopen, so it must not record a NEEDED
    // entry on liburma.so.0 (that would be itself).
    println!("cargo:rustc-cdylib-link-arg=-Wl,--as-needed");
}
