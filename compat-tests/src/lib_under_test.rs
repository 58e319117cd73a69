//! The libraries under test: a `libos_transport` build loaded by path is the testkit's
//! ([`testkit::os_transport`], re-exported here with the ABI types); this module adds where the
//! C reference is ([`legacy_lib_path`]).

use ost_supervise::Capture;
use std::path::PathBuf;

pub use testkit::os_transport::*;
pub use testkit::paths::{profile_dir, target_dir};

/// The C reference library: `$LEGACY_LIB`, else the one legacy-c's build script built for this
/// profile (`os_transport_legacy::legacy_lib_path`).
pub fn legacy_lib_path() -> PathBuf {
    match std::env::var_os("LEGACY_LIB") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => os_transport_legacy::legacy_lib_path(),
    }
}

/// The inject flavour of both libraries and the tool that arms them (docs/inject.md).
pub struct InjectBuild {
    /// The Rust library built with the cargo feature `inject`.
    pub rust: PathBuf,
    /// legacy-c's inject flavour (`os_transport_legacy::legacy_inject_lib_path`).
    pub legacy: PathBuf,
    /// `mlcachedirect-inject`.
    pub tool: PathBuf,
}

/// The inject flavours and the tool. The Rust flavour and the tool are built on first use, by
/// one `cargo build -p os-transport --features inject -p mlcachedirect-inject` into
/// `<target>/inject` (a target directory of its own, so that the default
/// `libos_transport.so` of this profile is never replaced), in this profile.
pub fn inject_build() -> &'static InjectBuild {
    static BUILD: std::sync::OnceLock<InjectBuild> = std::sync::OnceLock::new();
    BUILD.get_or_init(|| {
        let dir = target_dir().join("inject");
        let profile = profile_dir();
        let release = profile.file_name().is_some_and(|n| n == "release");
        // A cross build's profile directory is `<target>/<triple>/<profile>`: build for the same
        // triple (`make test-aarch64`).
        let triple = target_dir()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| n.contains("-linux-"));
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        cmd.current_dir(testkit::paths::repo())
            .args([
                "build",
                "-q",
                "-p",
                "os-transport",
                "-p",
                "mlcachedirect-inject",
            ])
            .args(["--features", "os-transport/inject"])
            .args(release.then_some("--release"))
            .args(triple.iter().flat_map(|t| ["--target", t.as_str()]))
            .arg("--target-dir")
            .arg(&dir);
        let end = ost_supervise::spawn("cargo build (inject flavour)", &mut cmd, Capture::Pipes)
            .unwrap_or_else(|e| panic!("{e}"))
            .finish(std::time::Duration::from_secs(1800));
        assert!(
            end.success(),
            "cargo build of the inject flavour failed:\n{}",
            end.output()
        );
        let out = triple
            .map_or(dir.clone(), |t| dir.join(t))
            .join(if release { "release" } else { "debug" });
        InjectBuild {
            rust: out.join("libos_transport.so"),
            legacy: os_transport_legacy::legacy_inject_lib_path(),
            tool: out.join("mlcachedirect-inject"),
        }
    })
}
