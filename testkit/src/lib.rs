//! The one Rust test kit of the workspace.
//!
//! * [`fixture`]: the loopback URMA fixture: the process context ([`Loopback`]), JFCs ([`Cq`]),
//!   sender/receiver endpoints ([`EndpointPair`]), registered and imported segments
//!   ([`register_seg`], [`Buffer`], [`ImportedSeg`]) and CR pollers ([`Poller`]);
//! * [`loopback_ctl`]: the loopback's control plane (`urma-loopback-ctl`, re-exported);
//! * [`header_probe`]: a control API's C header checked against its Rust definition;
//! * [`paths`]: profile and target directories, repository root, C compiler;
//! * [`target`]: run a program built at test time for the target (natively or under qemu);
//! * [`cprog`]: build such a program (`ost_build_support::cprog`, re-exported).
//!
//! It knows URMA and the loopback, not `libos_transport`: compat-tests (the differential harness)
//! adds the `os_transport.h` argument views on top. Test binaries link `liburma.so.0` through
//! `urma-sys`; run them with `LD_LIBRARY_PATH=<target-dir>/<profile>` so that the loader picks
//! the loopback.

#![allow(clippy::missing_safety_doc)]
// FFI config structs (with unions) read best as "zeroed, then set the fields that matter".
#![allow(clippy::field_reassign_with_default)]

pub mod fixture;
pub mod header_probe;
pub mod paths;
pub mod target;

pub use fixture::*;
pub use ost_build_support::cprog;
pub use paths::*;
pub use urma_loopback_ctl as loopback_ctl;
