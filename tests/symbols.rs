//! The shared object exports exactly the ten public functions, unversioned, with SONAME
//! libos_transport.so.1 (docs/abi.md "Exported symbols").
mod common;

use common::{run, rust_lib, PUBLIC};
use std::collections::BTreeSet;
use std::process::Command;

#[test]
fn exports_exactly_the_ten_public_functions() {
    let out = run(Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(rust_lib()));
    let syms: BTreeSet<String> = out
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .map(str::to_string)
        .collect();
    let want: BTreeSet<String> = PUBLIC.iter().map(|s| s.to_string()).collect();
    assert_eq!(syms, want, "nm -D --defined-only output:\n{out}");
    for l in out.lines() {
        assert_eq!(
            l.split_whitespace().nth(1),
            Some("T"),
            "every export is a text symbol: {l}"
        );
    }
}

#[test]
fn exports_are_unversioned_and_version_script_matches() {
    let out = run(Command::new("readelf")
        .args(["--dyn-syms", "-W"])
        .arg(rust_lib()));
    for name in PUBLIC {
        let line = out.lines().find(|l| {
            l.split_whitespace()
                .last()
                .is_some_and(|s| s.split('@').next() == Some(name))
        });
        let line = line.unwrap_or_else(|| panic!("{name} missing from --dyn-syms"));
        assert!(!line.contains('@'), "{name} must be unversioned: {line}");
        assert!(
            line.contains("GLOBAL") && line.contains("FUNC") && line.contains("DEFAULT"),
            "{line}"
        );
    }
    assert!(
        !out.lines()
            .any(|l| l.contains(" UND ") && l.contains("_ZN")),
        "no mangled Rust imports"
    );
    let vd = run(Command::new("readelf").arg("-V").arg(rust_lib()));
    assert!(
        !vd.contains("Version definition section"),
        "no version definitions of our own:\n{vd}"
    );
}

#[test]
fn soname_is_libos_transport_so_1() {
    let out = run(Command::new("readelf").arg("-d").arg(rust_lib()));
    assert!(
        out.contains("Library soname: [libos_transport.so.1]"),
        "{out}"
    );
    assert!(
        out.contains("Shared library: [liburma.so.0]"),
        "links liburma.so.0:\n{out}"
    );
}

#[test]
fn no_urma_namespace_squatting_or_rust_symbols() {
    let out = run(Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(rust_lib()));
    for l in out.lines() {
        let s = l.split_whitespace().nth(2).unwrap_or("");
        assert!(
            !s.starts_with("urma_")
                && !s.starts_with("_ZN")
                && !s.starts_with("_R")
                && !s.contains("rust"),
            "{s}"
        );
    }
}

/// The default build pays nothing for the inject flavour (docs/inject.md): no point name and no
/// `[OS_TRANSPORT_INJECT]` text is in the file, so no point is evaluated.
#[test]
fn default_library_has_no_inject_points() {
    let bytes = std::fs::read(rust_lib()).expect("read the library");
    for needle in [
        &b"os_transport.urma.write"[..],
        b"os_transport.notify_callback",
        b"OS_TRANSPORT_INJECT",
    ] {
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "{} found in the default library",
            String::from_utf8_lossy(needle)
        );
    }
}
