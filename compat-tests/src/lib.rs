//! compat-tests: the differential C-vs-Rust conformance harness, on top of the shared testkit,
//! for `libos_transport.so.1`.
//!
//! Testkit modules:
//! * [`lib_under_test`]: load a `libos_transport` build by path ([`OsTransportLib`]) with typed
//!   function pointers and `#[repr(C)]` mirrors of the public types;
//! * [`fixture`]: the testkit's loopback URMA fixture (crate `testkit`): process context
//!   ([`Loopback`]), sender/receiver endpoints ([`EndpointPair`]), registered/imported buffers
//!   ([`Buffer`]) and CR pollers ([`Poller`]), plus their `os_transport.h` argument views
//!   ([`PairArgs`], [`SegArgs`]);
//! * [`loopback_ctl`]: the loopback's control plane (`urma-loopback-ctl`, re-exported): knobs,
//!   counters and trace capture through the typed `urma_loopback_*` binding;
//! * [`target`], [`paths`](testkit::paths): the testkit's target-program runner and path helpers
//!   (re-exported).
//!
//! Test binaries link `liburma.so.0` through `urma-sys`; run them with
//! `LD_LIBRARY_PATH=<target-dir>/<profile>` so the loader picks the loopback.
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
pub mod lib_under_test;
pub mod oracle;

pub use fixture::*;
pub use lib_under_test::*;
pub use loopback_ctl::*;
pub use testkit::paths::*;
pub use testkit::{loopback_ctl, target};
