//! Build script of the interposition layer.
//!
//! * gives the cdylib the SONAME `liburma.so.0` (the dynamic loader must take it for the real
//!   library);
//! * creates `<target-dir>/<profile>/interpose/liburma.so.0 -> ../liburma_interpose.so`, a
//!   directory of its own so that it never collides with the loopback's
//!   `<target-dir>/<profile>/liburma.so.0`: put that directory first in `LD_LIBRARY_PATH` to use
//!   the layer.
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liburma.so.0");
    // urma-sys asks the linker for -lurma (its link-only stub). The layer defines every URMA
    // symbol itself and reaches the real library with dlopen, so it must not record a NEEDED
    // entry on liburma.so.0 (that would be itself).
    println!("cargo:rustc-cdylib-link-arg=-Wl,--as-needed");

    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    // OUT_DIR = <target>/<profile>/build/<pkg>-<hash>/out
    if let Some(profile_dir) = out_dir.ancestors().nth(3) {
        make_link(&profile_dir.join("interpose"));
    }
}

fn make_link(dir: &Path) {
    if let Err(e) = std::fs::create_dir_all(dir) {
        println!("cargo:warning=could not create {}: {e}", dir.display());
        return;
    }
    let link = dir.join("liburma.so.0");
    let want = Path::new("../liburma_interpose.so");
    if std::fs::read_link(&link)
        .map(|t| t == want)
        .unwrap_or(false)
    {
        return;
    }
    let _ = std::fs::remove_file(&link);
    // Relative, so the target dir can move; it dangles until rustc has written the library.
    if let Err(e) = std::os::unix::fs::symlink(want, &link) {
        println!("cargo:warning=could not create {}: {e}", link.display());
    }
}
