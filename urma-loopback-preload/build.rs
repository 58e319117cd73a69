//! Build script of the preload helper. urma-sys asks the linker for -lurma (its link-only stub);
//! the helper calls no URMA function (it finds the plugin's two functions with dlsym), so with
//! `--as-needed` it records no NEEDED entry on liburma.so.0 and loads into any process without
//! pulling a URMA library in.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--as-needed");
}
