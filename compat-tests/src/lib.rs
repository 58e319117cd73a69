//! compat-tests: the differential C-vs-Rust conformance harness for `libos_transport.so.1`
//! (`make compat`, docs/compat.md), and what every Rust test of a library under test shares, on
//! top of the testkit (crate `testkit`: the URMA fixture, a `libos_transport` loaded by path).
//!
//! * [`lib_under_test`]: the testkit's `libos_transport` loading ([`OsTransportLib`], the types of
//!   `os-transport-abi`), re-exported, and where the Rust library and the C reference are
//!   ([`rust_lib_path`], [`legacy_lib_path`]);
//! * [`fixture`]: the testkit's loopback URMA fixture, re-exported (process context
//!   [`Loopback`], endpoints [`EndpointPair`], buffers [`Buffer`], CR pollers [`Poller`]), with
//!   the `os_transport.h` argument views of its objects ([`PairArgs`], [`SegArgs`]);
//! * [`oracle`]: the tests' own model of `os_transport_user_data_t` and of the request-id
//!   encoding, written independently of the library's codec;
//! * [`interpose_ctl`]: the typed binding of the interposition layer's control API
//!   (`urma_interpose_*`);
//! * [`harness`]: the conformance harness itself, run by the `compat` binary.
//!
//! Re-exported from the testkit: [`loopback_ctl`] (the loopback's control plane: knobs, counters
//! and trace capture through the typed `urma_loopback_*` binding; its items also at the crate
//! root), [`target`] (the target-program runner) and the path helpers of `testkit::paths`.
//!
//! Test binaries link `liburma.so.0` through `urma-sys`. This crate depends on `urma-loopback`
//! so that `cargo test` and `cargo run` put the loopback's `liburma.so.0` on the loader path
//! (docs/architecture.md, "Build graph").
//!
//! ```no_run
//! use compat_tests::*;
//! let lb = Loopback::get();
//! let pair = EndpointPair::new(lb, &EndpointCfg::default());
//! let src = Buffer::new(lb, 14 << 20);
//! let dst = Buffer::new(lb, 14 << 20);
//! let remote_dst = dst.import(lb);
//! let recv_poller = Poller::start(&pair.receiver.jfc_handle(), PollMode::Poll, |_cr| {});
//! let send_poller = Poller::start(&pair.sender.jfc_handle(), PollMode::Poll, |_cr| {});
//! // ... os_transport_send / recv with pair.jetty_info(), src.info(), remote_dst.info() ...
//! send_poller.stop();
//! recv_poller.stop();
//! ```

#![allow(clippy::missing_safety_doc)]
// FFI config structs (with unions) read best as "zeroed, then set the fields that matter".
#![allow(clippy::field_reassign_with_default)]

pub mod fixture;
pub mod harness;
pub mod interpose_ctl;
pub mod lib_under_test;
pub mod oracle;

pub use fixture::*;
pub use lib_under_test::*;
pub use loopback_ctl::*;
pub use testkit::paths::*;
pub use testkit::{loopback_ctl, target};
