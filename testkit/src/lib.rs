//! The one Rust test kit of the workspace.
//!
//! * [`fixture`]: the loopback URMA fixture: the process context ([`Loopback`]), JFCs ([`Cq`]),
//!   sender/receiver endpoints ([`EndpointPair`]), registered and imported segments
//!   ([`register_seg`], [`Buffer`], [`ImportedSeg`]) and CR pollers ([`Poller`]);
//! * [`os_transport`]: a `libos_transport` build loaded by path ([`OsTransportLib`]: its ten
//!   entry points with the prototypes of `os-transport-abi`, whose types it re-exports), and the
//!   `os_transport.h` argument views of the fixture's objects ([`PairArgs`], [`SegArgs`]);
//! * [`peer`]: the endpoint information a receiver process tells a sender process
//!   ([`EndpointInfo`]) and its import;
//! * [`loopback_ctl`]: the loopback's control plane (`urma-loopback-ctl`, re-exported);
//! * [`header_probe`]: a control API's C header checked against its Rust definition;
//! * [`paths`]: profile and target directories, repository root, C compiler;
//! * [`target`]: run a program built at test time for the target (natively or under qemu);
//! * [`dl`]: a library loaded by path into the global scope, and its functions (the tests that
//!   drive the genuine URMA core);
//! * [`cprog`]: build such a program (`ost_build_support::cprog`, re-exported).
//!
//! compat-tests (the differential harness and the behavioural suite) and the benchmark build on
//! it; which build is the C reference is theirs to say. Test binaries link `liburma.so.0` through
//! `urma-sys`; run them with `LD_LIBRARY_PATH=<target-dir>/<profile>` so that the loader picks
//! the loopback.

#![allow(clippy::missing_safety_doc)]
// FFI config structs (with unions) read best as "zeroed, then set the fields that matter".
#![allow(clippy::field_reassign_with_default)]

pub mod dl;
pub mod fixture;
pub mod header_probe;
pub mod os_transport;
pub mod paths;
pub mod peer;
pub mod target;

pub use fixture::*;
pub use os_transport::{fn_from_ptr, rust_lib_path, OsTransportLib, PairArgs, SegArgs};
pub use ost_build_support::{archive, cprog};
pub use paths::*;
pub use peer::EndpointInfo;
pub use urma_loopback_ctl as loopback_ctl;
