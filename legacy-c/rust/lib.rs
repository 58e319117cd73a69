//! Locates the C reference implementation of os_transport 1.0 (`legacy-c/`), which this crate's
//! build script compiles and links into its `OUT_DIR` (`$OUT_DIR/legacy/`), one per cargo profile.
//!
//! Only the path is exposed: tests and the conformance harness load the library by path with
//! `dlopen`, so nothing here links against it.

use std::path::PathBuf;

/// Absolute path of `$OUT_DIR/legacy/libos_transport.so.1` (a symlink to
/// `libos_transport.so.1.0.0`), as built by `legacy-c/build.rs` for this profile.
pub fn legacy_lib_path() -> PathBuf {
    PathBuf::from(env!("OST_LEGACY_LIB_PATH"))
}

/// Absolute path of `$OUT_DIR/legacy-inject/libos_transport.so.1`: the inject flavour
/// (`OS_TRANSPORT_WITH_INJECT=1`, docs/inject.md), built beside the default one.
pub fn legacy_inject_lib_path() -> PathBuf {
    PathBuf::from(env!("OST_LEGACY_INJECT_LIB_PATH"))
}

/// Absolute path of `$OUT_DIR/legacy/`.
pub fn legacy_lib_dir() -> PathBuf {
    PathBuf::from(env!("OST_LEGACY_DIR"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_is_built_with_its_soname_symlinks() {
        let path = legacy_lib_path();
        assert_eq!(
            path.file_name().and_then(|n| n.to_str()),
            Some("libos_transport.so.1")
        );
        let dir = legacy_lib_dir();
        assert_eq!(path.parent(), Some(dir.as_path()));
        for name in [
            "libos_transport.so.1.0.0",
            "libos_transport.so.1",
            "libos_transport.so",
        ] {
            assert!(
                dir.join(name).exists(),
                "{} missing",
                dir.join(name).display()
            );
        }
        assert_eq!(
            std::fs::read_link(dir.join("libos_transport.so.1"))
                .expect("libos_transport.so.1 is a symlink")
                .to_str(),
            Some("libos_transport.so.1.0.0")
        );
    }
}
