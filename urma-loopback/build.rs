//! Build script of the loopback provider.
//!
//! * gives the cdylib the SONAME `liburma.so.0` (the plugin face, `--features plugin`:
//!   `liburma-loopback.so`, see [`plugin`]);
//! * creates `$OUT_DIR/lib/liburma.so.0 -> ../../../../deps/liburma.so` (the cdylib as rustc
//!   writes it into `<target>/<profile>/deps`, whether the loopback is built on its own or as a
//!   dependency, which cargo does not copy up to `<target>/<profile>`; the link dangles until then)
//!   and names `$OUT_DIR/lib` as a native search directory. Cargo puts every such directory
//!   inside the target dir on the loader path of `cargo test` and `cargo run`, so programs run
//!   by cargo find the loopback as `liburma.so.0`; `cargo xtask` reads the directory from cargo's
//!   build messages. Nothing is written outside `OUT_DIR`.
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_PLUGIN").is_some() {
        plugin();
        return;
    }
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liburma.so.0");
    // urma-sys asks the linker for -lurma (its link-only stub). The loopback defines every
    // symbol itself, so it must not record a NEEDED entry on liburma.so.0 (itself).
    println!("cargo:rustc-cdylib-link-arg=-Wl,--as-needed");

    let dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("lib");
    std::fs::create_dir_all(&dir).expect("create $OUT_DIR/lib");
    let link = dir.join("liburma.so.0");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("../../../../deps/liburma.so", &link)
        .unwrap_or_else(|e| panic!("symlink {}: {e}", link.display()));
    // Only liburma.so.0 is there, so `-lurma` (which looks for liburma.so) never resolves to it.
    println!("cargo:rustc-link-search=native={}", dir.display());
}

/// The plugin face (`--features plugin`): a provider of the genuine core, which loads it by path
/// from its plugin directory. Its own SONAME (the core's is `liburma.so.0`, which the plugin
/// needs: it calls the core's registration functions, resolved in whichever core loads it),
/// and `-Bsymbolic`, so that the plugin's references to its own functions never bind to a
/// function of the same name elsewhere in the process.
fn plugin() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liburma-loopback.so");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--as-needed");
}
