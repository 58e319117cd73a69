//! What the in-process path ([`crate::datapath`]) and the responder of another process's WRs
//! ([`crate::xproc`]) share: the SGE checks against segments, the receiving end of a target, and
//! CR generation (send CRs, recv CRs, and the knobs, trace and delivery every CR goes through).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use urma_datapath::opcode::OpInfo;
use urma_datapath::trace_line::Event;
use urma_sys as u;
use urma_sys::flags;

use crate::faults::{Fate, PLANE};
use crate::objects::{AnySeg, Plan, RecvQ, RecvWr, Seg, SendQ, Sge, Target};
use crate::queues::Jfc;
use crate::stats::COUNTERS;
use crate::trace;
use crate::util::zeroed;

/// Checks SGEs against their segments. `remote` = the SGEs address imported segments and need
/// `access` (URMA_ACCESS_READ / _WRITE); local SGEs must address registered segments.
pub(crate) fn check_sges(v: &[Sge], remote: bool, access: u32) -> bool {
    v.iter().all(|e| {
        let Some(s) = &e.seg else { return e.len == 0 };
        if e.len == 0 {
            return true;
        }
        let seg: &Arc<Seg> = s.seg();
        if !seg.alive.load(Ordering::Acquire) {
            return false;
        }
        match (&**s, remote) {
            (AnySeg::Local(_), false) => {}
            (AnySeg::Imported(i), true) => {
                if seg.token_policy != u::URMA_TOKEN_NONE && i.token != seg.token {
                    return false;
                }
                if seg.access & u::URMA_ACCESS_LOCAL_ONLY != 0 || seg.access & access == 0 {
                    return false;
                }
            }
            _ => return false,
        }
        let end = e.addr as u128 + e.len as u128;
        e.addr >= seg.va && end <= seg.va as u128 + seg.len as u128
    })
}

pub(crate) fn total(v: &[Sge]) -> u64 {
    v.iter().map(|e| e.len as u64).sum()
}

/// Information about the receiving end of a two-sided operation.
pub(crate) struct RecvEnd<'a> {
    pub id: u32,
    pub is_jetty: bool,
    pub obj: usize,
    pub rq: &'a Arc<RecvQ>,
    pub alive: bool,
}

/// The receiving end of a local target (`None`: the target is in another process).
pub(crate) fn recv_end(t: &Target) -> Option<RecvEnd<'_>> {
    Some(match t {
        Target::Jetty(j) => RecvEnd {
            id: j.sq.id,
            is_jetty: true,
            obj: j.c.key(),
            rq: &j.rq,
            alive: j.alive.load(Ordering::Acquire),
        },
        Target::Jfr(r) => RecvEnd {
            id: r.id,
            is_jetty: false,
            obj: r.c.key(),
            rq: &r.rq,
            alive: r.alive.load(Ordering::Acquire),
        },
        Target::Remote { .. } => return None,
    })
}

/// Generates the send-side CR of a WR whose execution ended with `status`.
pub(crate) fn finish_send(sq: &SendQ, p: &Plan, status: u32, mut bytes: u32) {
    if status != u::URMA_CR_SUCCESS {
        bytes = 0;
    }
    if status != u::URMA_CR_SUCCESS || p.flags & flags::JFS_WR_FLAG_COMPLETE_ENABLE != 0 {
        let mut cr: u::urma_cr_t = zeroed();
        cr.status = status;
        cr.user_ctx = p.user_ctx;
        // Send CRs carry opcode 0 (URMA_CR_OPC_SEND) deterministically: the field is
        // meaningless on the send side.
        cr.opcode = u::URMA_CR_OPC_SEND;
        cr.flag.value = if sq.is_jetty { flags::CR_FLAG_JETTY } else { 0 };
        cr.completion_len = bytes;
        cr.local_id = sq.id;
        cr.user_data = sq.obj_addr;
        emit_cr(&sq.jfc, cr, false);
    }
}

/// Emits the recv CR of a two-sided message (`op`, `imm`, `flags` of the sender's WR) that
/// consumed `recv` with `rstatus`; `from` is the sending JFS/jetty.
#[allow(clippy::too_many_arguments)]
pub(crate) fn recv_cr(
    end: &RecvEnd<'_>,
    recv: &RecvWr,
    rstatus: u32,
    n: u64,
    op: &OpInfo,
    imm: u64,
    wflags: u32,
    from: u::urma_jetty_id_t,
) {
    let mut cr: u::urma_cr_t = zeroed();
    cr.status = rstatus;
    cr.user_ctx = recv.user_ctx;
    // Only two-sided opcodes reach a receiving end, and each of their rows names its recv CR
    // opcode (a test of the table checks it).
    cr.opcode = op.recv_cr.unwrap_or_default();
    cr.flag.value = flags::CR_FLAG_S_R
        | if end.is_jetty {
            flags::CR_FLAG_JETTY
        } else {
            0
        };
    cr.completion_len = if rstatus == u::URMA_CR_SUCCESS {
        n as u32
    } else {
        0
    };
    cr.local_id = end.id;
    cr.remote_id = from;
    cr.__bindgen_anon_1.imm_data = if op.imm { imm } else { 0 };
    cr.user_data = end.obj;
    let solicited = wflags & flags::JFS_WR_FLAG_SOLICITED_ENABLE != 0;
    emit_cr(&end.rq.jfc, cr, solicited);
}

/// Generates one CR: counters, drop/dup knobs, trace, then delivery (hold/delay aware).
pub fn emit_cr(jfc: &Arc<Jfc>, cr: u::urma_cr_t, solicited: bool) {
    let nth = PLANE.next_cr();
    COUNTERS.crs_generated.fetch_add(1, Ordering::Relaxed);
    if cr.status != u::URMA_CR_SUCCESS {
        COUNTERS.crs_error.fetch_add(1, Ordering::Relaxed);
    }
    let fate = PLANE.cr_fate(nth);
    trace::event(&Event::Cr {
        jfc: &jfc.name,
        cr: &cr,
        names: &trace::Queues,
        fate,
    });
    match fate {
        Fate::Drop => {
            COUNTERS.crs_dropped.fetch_add(1, Ordering::Relaxed);
        }
        Fate::Deliver => crate::faults::deliver(jfc, cr, solicited),
        Fate::Dup => {
            COUNTERS.crs_duplicated.fetch_add(1, Ordering::Relaxed);
            crate::faults::deliver(jfc, cr, solicited);
            crate::faults::deliver(jfc, cr, solicited);
        }
    }
}
