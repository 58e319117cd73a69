//! Builds the C reference implementation of os_transport 1.0 (`legacy-c/`): this crate's build
//! script compiles and links it beside the Rust library into `<target>/legacy/`.
//!
//! The crate exposes no API: tests and the conformance harness find the library at run time
//! (`compat_tests::legacy_lib_path`: `$LEGACY_LIB`, else `<target>/legacy/` of the running
//! binary), which also works for the installed harness, where a build-time path would not.

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    #[test]
    fn library_is_built_with_its_soname_symlinks() {
        let path = PathBuf::from(env!("OST_LEGACY_LIB_PATH"));
        assert_eq!(
            path.file_name().and_then(|n| n.to_str()),
            Some("libos_transport.so.1")
        );
        let dir = PathBuf::from(env!("OST_LEGACY_DIR"));
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
