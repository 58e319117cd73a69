//! The loopback URMA fixture and the `os_transport.h` argument views of its objects are the
//! testkit's ([`testkit::fixture`], [`testkit::os_transport`]), re-exported here.

pub use testkit::fixture::*;
pub use testkit::os_transport::{PairArgs, SegArgs};
