//! The data-path pieces both URMA providers of the project run on: the software loopback
//! (`urma-loopback`) and the interposition layer (`urma-interpose`), each built against this one
//! definition, and the tests and the harness that read what they produce.
//!
//! * [`opcode`]: the table of the URMA work-request opcodes, which every site that acts on an
//!   opcode consults (the provider's data paths, CR generation, both traces);
//! * [`faults`]: the fault plane, the one fault engine of the provider and of the layer (rules,
//!   WR / CR numbering, held and delayed CRs), over the striped counters of [`stripe`];
//! * [`spec`]: the knob-spec syntax and the reading of the fault keys both libraries have;
//! * [`trace_line`]: the trace's events with their one serialiser, its sinks and the symbolic
//!   object names, the same in both;
//! * [`message`]: the loopback's cross-process message format (also what the security tests speak
//!   when they play a malicious peer);
//! * the selector values the knobs, the fault plane and both control APIs share ([`Q_SEND`],
//!   [`CR_DROP`], [`ORDER_FIFO`], ...).
//!
//! The loopback's test-control binding (`urma_loopback_*`) is `urma-loopback-ctl`'s.

use std::ffi::c_int;

pub mod faults;
pub mod message;
pub mod opcode;
pub mod spec;
pub mod stripe;
pub mod trace_line;

/// `URMA_LOOPBACK_Q_SEND`: the send queues (`urma_post_jfs_wr`, `urma_post_jetty_send_wr`).
pub const Q_SEND: c_int = 1;
/// `URMA_LOOPBACK_Q_RECV`: the receive queues (`urma_post_jfr_wr`, `urma_post_jetty_recv_wr`).
pub const Q_RECV: c_int = 2;
/// `URMA_LOOPBACK_CR_DROP`.
pub const CR_DROP: c_int = 1;
/// `URMA_LOOPBACK_CR_DUP`.
pub const CR_DUP: c_int = 2;
/// `URMA_LOOPBACK_ORDER_FIFO`.
pub const ORDER_FIFO: c_int = 0;
/// `URMA_LOOPBACK_ORDER_REVERSE`.
pub const ORDER_REVERSE: c_int = 1;
/// `URMA_LOOPBACK_ORDER_SHUFFLE`.
pub const ORDER_SHUFFLE: c_int = 2;
