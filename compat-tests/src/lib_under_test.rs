//! The libraries under test: a `libos_transport` build loaded by path is the testkit's
//! ([`testkit::os_transport`], re-exported here with the ABI types); this module adds where the
//! C reference is ([`legacy_lib_path`]).

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
