//! Build script of the loopback provider.
//!
//! * gives the cdylib the SONAME `liburma.so.0`;
//! * creates `<target-dir>/<profile>/liburma.so.0 -> liburma.so` so that the dynamic loader finds
//!   the loopback through `LD_LIBRARY_PATH=<target-dir>/<profile>`.
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liburma.so.0");
    // urma-sys asks the linker for -lurma (its link-only stub). The loopback defines every
    // symbol itself, so it must not record a NEEDED entry on liburma.so.0 (itself).
    println!("cargo:rustc-cdylib-link-arg=-Wl,--as-needed");

    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    // OUT_DIR = <target>/<profile>/build/<pkg>-<hash>/out
    if let Some(profile_dir) = out_dir.ancestors().nth(3) {
        make_link(profile_dir);
    }
}

fn make_link(profile_dir: &Path) {
    let link = profile_dir.join("liburma.so.0");
    // The link is relative so that the target dir can move; it may dangle until rustc has
    // written liburma.so at the end of this build.
    if std::fs::symlink_metadata(&link).is_ok() {
        if std::fs::read_link(&link)
            .map(|t| t == Path::new("liburma.so"))
            .unwrap_or(false)
        {
            return;
        }
        let _ = std::fs::remove_file(&link);
    }
    if let Err(e) = std::os::unix::fs::symlink("liburma.so", &link) {
        println!("cargo:warning=could not create {}: {e}", link.display());
    }
}
