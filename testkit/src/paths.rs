//! Where things are: the build's profile and target directories, the repository, the C compiler.
//!
//! Also included by path (`#[path]`) by the urma-sys tests, which sit below the testkit in the
//! crate graph; [`repo`] assumes the including crate is one directory below the repository root,
//! as urma-sys and the testkit are.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `<target>/<profile>` of the running test binary (`<target>/<profile>/deps/<bin>` or
/// `<target>/<profile>/<bin>`): where `liburma.so.0` (the loopback), `libos_transport.so` and
/// the other cdylibs of the workspace are built.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().expect("exe dir").to_path_buf();
    if dir
        .file_name()
        .is_some_and(|n| n == "deps" || n == "examples")
    {
        dir.parent().expect("profile dir").to_path_buf()
    } else {
        dir
    }
}

/// `<target>/<profile>/interpose`: a directory whose only file is `liburma.so.0`, a link to the
/// interposition layer as rustc writes it (`../deps/liburma_interpose.so`). Put it first on
/// `LD_LIBRARY_PATH` to load the layer in front of the real `liburma.so.0`. The link is made here,
/// at run time, by whoever needs it (build scripts write nothing outside their `OUT_DIR`); it
/// dangles until `urma-interpose` is built, so callers check `liburma.so.0` exists.
pub fn interpose_dir() -> PathBuf {
    let dir = profile_dir().join("interpose");
    let link = dir.join("liburma.so.0");
    let want = Path::new("../deps/liburma_interpose.so");
    if std::fs::read_link(&link).ok().as_deref() != Some(want) {
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::remove_file(&link);
        // Another process may make the same link at the same time: its result is as good.
        let _ = std::os::unix::fs::symlink(want, &link);
    }
    dir
}

/// `<target>` of the running test binary.
pub fn target_dir() -> PathBuf {
    profile_dir().parent().expect("target dir").to_path_buf()
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The C compiler for the target: `$CC`, else `cc` (the cargo target runner sets `CC` to the
/// cross compiler under emulation).
pub fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_string())
}
