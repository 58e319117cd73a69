//! The vocabulary of a scenario run: the libraries under test, the endpoint setup, the sides, how CRs are delivered and in which order, and the symbolic forms of values and CRs in the trace.

use urma_sys as u;

use crate::fixture::{CrExt, RecvKind};
use crate::harness::record::{self, ud};
use crate::lib_under_test::OsTransportLib;
use crate::oracle::dec;

/// A loaded library under test with its log-callback slot.
pub struct Lib {
    pub lib: OsTransportLib,
    /// 0 = reference C build, 1 = Rust build.
    pub slot: u32,
    /// "legacy" or "rust".
    pub name: &'static str,
}

impl Lib {
    /// Loads `path` and registers the recording log callback (threshold DEBUG) once.
    pub fn load(
        path: &std::path::Path,
        slot: u32,
        name: &'static str,
    ) -> Result<&'static Lib, String> {
        let lib = OsTransportLib::load(path)?;
        // SAFETY: valid function pointer of the loaded library; the callback is a static fn.
        let r = unsafe { (lib.os_transport_log_reg)(-1, record::log_callback(slot)) };
        if r != 0 {
            return Err(format!(
                "{}: os_transport_log_reg returned {r}",
                path.display()
            ));
        }
        Ok(Box::leak(Box::new(Lib { lib, slot, name })))
    }
}

/// `(uint32_t)-1` prints as `ERR`.
pub fn r32(v: u32) -> String {
    if v == u32::MAX {
        "ERR".into()
    } else {
        v.to_string()
    }
}

/// Stream key of a CR: `req:0x<rid>` (decoded immediate for receive-side CRs, the user_ctx
/// request id for send-side ones).
pub fn cr_key(cr: &u::urma_cr_t) -> String {
    if cr.is_recv() {
        format!("req:0x{:x}", dec(cr.imm() & ((1 << 60) - 1)))
    } else {
        format!("req:0x{:x}", cr.user_ctx & ((1 << 60) - 1))
    }
}

/// One-line description of a CR handed to the library.
pub fn cr_line(cr: &u::urma_cr_t) -> String {
    if cr.is_recv() {
        let imm = cr.imm();
        let d = (imm & !((1u64 << 60) - 1)) | dec(imm & ((1 << 60) - 1));
        format!(
            "recv opc={} status={} imm={}",
            { cr.opcode },
            { cr.status },
            ud(d)
        )
    } else {
        format!(
            "send opc={} status={} uctx={}",
            { cr.opcode },
            { cr.status },
            ud(cr.user_ctx)
        )
    }
}

/// How receive-side CRs reach the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The poller hands each CR over at once (as an application would).
    Pass,
    /// The poller holds them; the scenario delivers them in this order, one at a time.
    Held(Order),
}

/// Delivery order of held receive-side CRs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Arrival order.
    Fifo,
    /// Reverse arrival order.
    Reverse,
    /// Deterministic shuffle from a seed.
    Shuffle(u64),
}

impl Order {
    /// Applies the order to `v`.
    pub fn apply<T>(&self, v: &mut [T]) {
        match *self {
            Order::Fifo => {}
            Order::Reverse => v.reverse(),
            Order::Shuffle(seed) => {
                let mut s = seed | 1;
                for i in (1..v.len()).rev() {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    v.swap(i, (s % (i as u64 + 1)) as usize);
                }
            }
        }
    }

    /// Short name.
    pub fn name(&self) -> String {
        match self {
            Order::Fifo => "fifo".into(),
            Order::Reverse => "reverse".into(),
            Order::Shuffle(s) => format!("shuffle({s})"),
        }
    }
}

/// Endpoint and library set-up of a run.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub recv_kind: RecvKind,
    pub event_mode: bool,
    /// Bytes of each of the source and destination buffers.
    pub buf_len: usize,
    /// Loopback no-copy mode (no payload moves; data is not checked).
    pub nocopy: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            recv_kind: RecvKind::Jetty,
            event_mode: false,
            buf_len: 4 << 20,
            nocopy: false,
        }
    }
}

/// Which library a call goes to (the same one outside the interop matrix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Send,
    Recv,
}

/// How `os_transport_send` gets its queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendVia {
    /// `jfs` set (and the jetty as fallback).
    Jfs,
    /// `jfs` NULL, `jetty` set.
    Jetty,
    /// Both NULL.
    None,
}
