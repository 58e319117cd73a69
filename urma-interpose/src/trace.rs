//! The layer's trace: JSON lines in the loopback's format (`docs/loopback.md`), so that the
//! harness's normaliser reads either.
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

use urma_loopback_ctl::opcode::{self, Layout};
use urma_loopback_ctl::trace_line::{self, hex, json_str as js, Sink};
use urma_sys as u;

use crate::objects::{self, qname};

/// The layer's trace sinks (file and capture; `urma_loopback_ctl::trace_line`): the control exports (`ctl`)
/// open, capture, take and reset it directly.
pub static SINK: Sink = Sink::new();

/// Whether any sink is active.
pub fn enabled() -> bool {
    SINK.enabled()
}

fn emit(line: String) {
    SINK.emit(line)
}

fn opt_name(n: Option<String>) -> String {
    n.map(|n| js(&n)).unwrap_or_else(|| "null".into())
}

/// Largest SGE count read from one list (a corrupt count must not make the layer read far).
const MAX_TRACED_SGE: u32 = 4096;

/// The SGE list as `[{"seg":..,"off":..,"len":..}]`, offsets from the segment's base.
///
/// # Safety
/// `sg` must describe `num_sge` readable entries (the post call's contract).
unsafe fn sges(sg: &u::urma_sg_t) -> String {
    if sg.sge.is_null() || sg.num_sge == 0 {
        return "[]".into();
    }
    let n = sg.num_sge.min(MAX_TRACED_SGE) as usize;
    // SAFETY: the caller guarantees num_sge readable entries; n <= num_sge.
    let v = unsafe { std::slice::from_raw_parts(sg.sge, n) };
    let items: Vec<String> = v
        .iter()
        .map(|e| {
            if e.tseg.is_null() {
                return format!("{{\"seg\":null,\"off\":null,\"len\":{}}}", e.len);
            }
            match objects::seg(e.tseg as usize) {
                Some(s) => format!(
                    "{{\"seg\":{},\"off\":{},\"len\":{}}}",
                    js(&s.name),
                    e.addr as i128 - s.base as i128,
                    e.len
                ),
                None => format!("{{\"seg\":\"unknown\",\"off\":null,\"len\":{}}}", e.len),
            }
        })
        .collect();
    format!("[{}]", items.join(","))
}

/// One `post_send` line.
///
/// # Safety
/// `w` must be a WR the caller handed to a post call (its SGE lists readable).
pub unsafe fn post_send(q: &str, w: &u::urma_jfs_wr_t, ret: i32) {
    // SAFETY: the flag union is a plain u32.
    let flags = unsafe { w.flag.value };
    let op = opcode::info(w.opcode);
    let imm = |v| {
        if op.is_some_and(|o| o.imm) {
            hex(v)
        } else {
            "null".into()
        }
    };
    let (src, dst, imm) = match op.map(|o| o.layout) {
        Some(Layout::Rw) => {
            // SAFETY: rw is the active member for this layout (the post contract).
            let rw = unsafe { &w.__bindgen_anon_1.rw };
            // SAFETY: the WR's SGE lists are readable (the caller's contract).
            unsafe { (sges(&rw.src), sges(&rw.dst), imm(rw.notify_data)) }
        }
        Some(Layout::Send) => {
            // SAFETY: send is the active member for this layout.
            let sd = unsafe { &w.__bindgen_anon_1.send };
            // SAFETY: as above.
            (unsafe { sges(&sd.src) }, "[]".into(), imm(sd.imm_data))
        }
        Some(Layout::None) | None => ("[]".into(), "[]".into(), "null".into()),
    };
    let target = if w.tjetty.is_null() {
        "null".into()
    } else {
        opt_name(Some(
            objects::tjetty(w.tjetty as usize).unwrap_or_else(|| "unknown".into()),
        ))
    };
    emit(format!(
        "{{\"ev\":\"post_send\",\"q\":{},\"op\":{},\"opcode\":{},\"flags\":{},\"user_ctx\":{},\"target\":{},\"imm\":{},\"src\":{},\"dst\":{},\"ret\":{}}}",
        js(q),
        js(opcode::name(w.opcode)),
        w.opcode,
        flags,
        hex(w.user_ctx),
        target,
        imm,
        src,
        dst,
        ret
    ));
}

/// One `post_recv` line.
///
/// # Safety
/// `w` must be a recv WR the caller handed to a post call.
pub unsafe fn post_recv(q: &str, w: &u::urma_jfr_wr_t, ret: i32) {
    // SAFETY: the WR's SGE list is readable (the caller's contract).
    let sge = unsafe { sges(&w.src) };
    emit(format!(
        "{{\"ev\":\"post_recv\",\"q\":{},\"user_ctx\":{},\"sge\":{},\"ret\":{}}}",
        js(q),
        hex(w.user_ctx),
        sge,
        ret
    ));
}

fn cr_fields(cr: &u::urma_cr_t) -> String {
    trace_line::cr_fields(cr, &qname(cr.local_id), || qname(cr.remote_id.id))
}

/// One `cr` line: a CR the provider returned, and what the layer does with it.
pub fn cr(jfc: &str, cr: &u::urma_cr_t, fate: &str) {
    emit(format!(
        "{{\"ev\":\"cr\",\"jfc\":{},{},\"fate\":{}}}",
        js(jfc),
        cr_fields(cr),
        js(fate)
    ));
}

/// One `poll` line: a CR handed to the application.
pub fn poll(jfc: &str, cr: &u::urma_cr_t) {
    emit(format!(
        "{{\"ev\":\"poll\",\"jfc\":{},{}}}",
        js(jfc),
        cr_fields(cr)
    ));
}
