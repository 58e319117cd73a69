//! Helpers shared by the root integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

#[allow(unused_imports)] // each test binary uses a subset
pub use testkit::{
    paths::{cc, profile_dir, repo},
    target::run,
};

/// The ten functions of `os_transport.h`: the exports of the shared library and the only global
/// symbols of the static archive (the list the archive's build keeps global).
#[allow(unused_imports)] // each test binary uses a subset
pub use testkit::archive::API as PUBLIC;

/// The Rust cdylib under test.
pub fn rust_lib() -> PathBuf {
    profile_dir().join("libos_transport.so")
}

/// A scratch directory unique to this test process.
pub fn scratch(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("ost-{name}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&d).expect("mkdir scratch");
    d
}
pub mod lb;
