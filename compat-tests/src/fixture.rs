//! The loopback URMA fixture is the testkit's ([`testkit::fixture`], re-exported here); this
//! module adds the `os_transport.h` argument views of its objects.

pub use testkit::fixture::*;

use std::ffi::c_void;

use crate::lib_under_test::{
    ost_buffer_info_t, ost_device_info_t, urma_jetty_info_t, JETTY_MODE_DUPLEX,
};

/// `os_transport_send` / `os_transport_recv` arguments of an [`EndpointPair`].
pub trait PairArgs {
    /// `urma_jetty_info_t` for `os_transport_send` (jfs, jetty, tjetty of the sender).
    fn jetty_info(&self) -> urma_jetty_info_t;
    /// `ost_device_info_t` for `os_transport_recv` (receiver jfr/jetty, destination `dst`).
    fn device_info(&self, dst: *mut c_void) -> ost_device_info_t;
}

impl PairArgs for EndpointPair {
    fn jetty_info(&self) -> urma_jetty_info_t {
        urma_jetty_info_t {
            jfs: self.sender.jfs,
            jetty: self.sender.jetty,
            tjetty: self.sender.tjetty,
            jetty_mode: JETTY_MODE_DUPLEX,
        }
    }

    fn device_info(&self, dst: *mut c_void) -> ost_device_info_t {
        ost_device_info_t {
            jfr: self.receiver.jfr,
            jetty: self.receiver.jetty,
            dst,
        }
    }
}

/// `ost_buffer_info_t` of a segment: {addr, tseg}.
pub trait SegArgs {
    /// For a [`Buffer`]: {addr, local tseg}; for an [`ImportedSeg`]: {addr, imported tseg} (the
    /// `remote_dst` of a send).
    fn info(&self) -> ost_buffer_info_t;
}

impl SegArgs for Buffer {
    fn info(&self) -> ost_buffer_info_t {
        ost_buffer_info_t {
            addr: self.addr(),
            tseg: self.tseg,
        }
    }
}

impl SegArgs for ImportedSeg {
    fn info(&self) -> ost_buffer_info_t {
        ost_buffer_info_t {
            addr: self.addr,
            tseg: self.tseg,
        }
    }
}
