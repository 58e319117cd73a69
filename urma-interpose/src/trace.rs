//! The layer's trace: JSON lines in the loopback's format (`docs/loopback.md`), so that the
//! harness's normaliser reads either. The layer says what it saw as `trace_line::Event`s (names,
//! SGE lists, CRs); the control-plane crate writes their lines, for both libraries.
//!
//! Lines: `post_send` and `post_recv` for every WR that reached a post call (with its status:
//! the provider's, or the injected one); `cr` for every CR the provider returned from a poll,
//! after an injected status rewrite, with its `fate` (`deliver`, `drop`, `dup`); `poll` for
//! every CR handed to the application. A WR rejected by the provider is traced with the status of
//! the post and WRs after it are not traced; when a provider fails a post without naming the bad
//! WR, the first WR of the chain carries the status.
//!
//! Sinks: a file (`URMA_INTERPOSE_TRACE=/path` at load, or `urma_interpose_trace_open`) and an
//! in-memory capture (`urma_interpose_trace_capture` / `urma_interpose_trace_take`).

use urma_datapath::faults::Fate;
use urma_datapath::opcode::{self, Layout};
use urma_datapath::trace_line::{CrNames, Event, Sge, Sink};
use urma_sys as u;

use crate::objects::{self, qname};

/// The layer's trace sinks (file and capture; `urma_datapath::trace_line`): the control exports (`ctl`)
/// open, capture, take and reset it directly.
pub static SINK: Sink = Sink::new();

/// Whether any sink is active.
pub fn enabled() -> bool {
    SINK.enabled()
}

/// Largest SGE count read from one list (a corrupt count must not make the layer read far).
const MAX_TRACED_SGE: u32 = 4096;

/// The SGE list as the trace shows it: segment name and offset from the segment's base.
///
/// # Safety
/// `sg` must describe `num_sge` readable entries (the post call's contract).
unsafe fn sges(sg: &u::urma_sg_t) -> Vec<Sge<'static>> {
    if sg.sge.is_null() || sg.num_sge == 0 {
        return Vec::new();
    }
    let n = sg.num_sge.min(MAX_TRACED_SGE) as usize;
    // SAFETY: the caller guarantees num_sge readable entries; n <= num_sge.
    let v = unsafe { std::slice::from_raw_parts(sg.sge, n) };
    v.iter()
        .map(|e| {
            let (seg, off) = if e.tseg.is_null() {
                (None, None)
            } else {
                match objects::seg(e.tseg as usize) {
                    Some(s) => (Some(s.name), Some(e.addr as i128 - s.base as i128)),
                    None => (Some("unknown".to_string()), None),
                }
            };
            Sge {
                seg: seg.map(Into::into),
                off,
                len: e.len,
            }
        })
        .collect()
}

/// One `post_send` line.
///
/// # Safety
/// `w` must be a WR the caller handed to a post call (its SGE lists readable).
pub unsafe fn post_send(q: &str, w: &u::urma_jfs_wr_t, ret: i32) {
    // SAFETY: the flag union is a plain u32.
    let flags = unsafe { w.flag.value };
    let op = opcode::info(w.opcode);
    let with_imm = |v| op.is_some_and(|o| o.imm).then_some(v);
    let (src, dst, imm) = match op.map(|o| o.layout) {
        Some(Layout::Rw) => {
            // SAFETY: rw is the active member for this layout (the post contract).
            let rw = unsafe { &w.__bindgen_anon_1.rw };
            // SAFETY: the WR's SGE lists are readable (the caller's contract).
            unsafe { (sges(&rw.src), sges(&rw.dst), with_imm(rw.notify_data)) }
        }
        Some(Layout::Send) => {
            // SAFETY: send is the active member for this layout.
            let sd = unsafe { &w.__bindgen_anon_1.send };
            // SAFETY: as above.
            (unsafe { sges(&sd.src) }, Vec::new(), with_imm(sd.imm_data))
        }
        Some(Layout::None) | None => (Vec::new(), Vec::new(), None),
    };
    let target = (!w.tjetty.is_null())
        .then(|| objects::tjetty(w.tjetty as usize).unwrap_or_else(|| "unknown".into()));
    SINK.event(&Event::PostSend {
        q,
        opcode: w.opcode,
        flags,
        user_ctx: w.user_ctx,
        target: target.as_deref(),
        imm,
        src: &src,
        dst: &dst,
        ret,
    });
}

/// One `post_recv` line.
///
/// # Safety
/// `w` must be a recv WR the caller handed to a post call.
pub unsafe fn post_recv(q: &str, w: &u::urma_jfr_wr_t, ret: i32) {
    // SAFETY: the WR's SGE list is readable (the caller's contract).
    let sge = unsafe { sges(&w.src) };
    SINK.event(&Event::PostRecv {
        q,
        user_ctx: w.user_ctx,
        sge: &sge,
        ret,
    });
}

/// The names of a CR's queues: from the jetty / JFS / JFR ids the layer saw created.
struct Queues;

impl CrNames for Queues {
    fn local(&self, cr: &u::urma_cr_t) -> String {
        qname(cr.local_id)
    }

    fn remote(&self, cr: &u::urma_cr_t) -> String {
        qname(cr.remote_id.id)
    }
}

/// One `cr` line: a CR the provider returned, and what the layer does with it.
pub fn cr(jfc: &str, cr: &u::urma_cr_t, fate: Fate) {
    SINK.event(&Event::Cr {
        jfc,
        cr,
        names: &Queues,
        fate,
    });
}

/// One `poll` line: a CR handed to the application.
pub fn poll(jfc: &str, cr: &u::urma_cr_t) {
    SINK.event(&Event::Poll {
        jfc,
        cr,
        names: &Queues,
    });
}
