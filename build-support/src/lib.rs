//! The one place that knows how the project's C parts are built. Used as a build-dependency by
//! `urma-sys`, `legacy-c` and `bench`, as a library by the `xtask` build driver and by the tests
//! (through `testkit`, which re-exports [`cprog`]), so that the sources, flags and output layout
//! exist once.
//!
//! * [`urma`]: the URMA header selection and the `-lurma` link directory (with the link-only
//!   stub), as published by `urma-sys` to its dependents (`DEP_URMA_INCLUDE`, `DEP_URMA_LINK_DIR`).
//! * [`archive`]: `libos_transport.a`, the library as a static archive whose only global symbols
//!   are the ten API functions (for the packaging and its tests).
//! * [`cprog`]: every C program and small C library of the tests, the harness and the xtask (a
//!   [`cprog::Build`] in a [`cprog::Flavour`]: plain, ASan/UBSan, libFuzzer, for valgrind),
//!   including the link stub above.
//! * [`legacy`]: `legacy-c/`, the C reference implementation, built in one of its [`Flavour`]s
//!   into its own directory (`<out>/<flavour dir>/libos_transport.so.1.0.0` plus the SONAME and
//!   development symlinks).
//! * [`umdk`]: the genuine UMDK URMA core and UMDK's programs (`urma_sample`, `urma_perftest`):
//!   the system's, or built from `$UMDK_SRC` into the caller's output directory.
//!
//! Everything is written below the output directory the caller passes (a build script's
//! `OUT_DIR`, or the xtask's directory under the target dir); nothing here writes elsewhere.
//!
//! The `cc` crate reads `TARGET`, `HOST`, `OPT_LEVEL` and `DEBUG` from the environment inside a
//! build script. Outside one (the xtask), [`compiler_for`] fills them in explicitly.

pub mod archive;
pub mod cprog;
pub mod legacy;
pub mod umdk;
pub mod urma;

pub use legacy::Flavour;

/// A `cc::Build` that emits no `cargo:` lines and, when `target` is given, does not depend on the
/// variables cargo sets for build scripts (for use outside a build script).
pub fn compiler_for(target: Option<&str>) -> cc::Build {
    let mut b = cc::Build::new();
    b.cargo_metadata(false).cargo_warnings(false);
    if let Some(t) = target {
        b.target(t).host(t).opt_level(0).debug(true);
    }
    b
}

/// Runs `cmd`, panicking with the command line if it cannot start or fails.
pub(crate) fn run(cmd: &mut std::process::Command, what: &str) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(status.success(), "{what} failed ({status}): {cmd:?}");
}

/// Runs `cmd` with its output captured and returns it; panics with the command line and the
/// output when it cannot start or fails.
pub fn checked(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
