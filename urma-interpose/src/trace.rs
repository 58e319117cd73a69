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

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use urma_sys as u;

use crate::lock;
use crate::objects::{self, qname};

struct Sinks {
    file: Option<std::fs::File>,
    capture: Option<Vec<String>>,
}

static ON: AtomicBool = AtomicBool::new(false);
static SINKS: Mutex<Sinks> = Mutex::new(Sinks {
    file: None,
    capture: None,
});
static STOPPED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether any sink is active.
pub fn enabled() -> bool {
    ON.load(Ordering::Acquire)
}

fn refresh(s: &Sinks) {
    ON.store(s.file.is_some() || s.capture.is_some(), Ordering::Release);
}

/// Opens (truncates) a trace file; `None` closes the file sink.
pub fn open_file(path: Option<&str>) -> std::io::Result<()> {
    let f = match path {
        Some(p) => Some(std::fs::File::create(p)?),
        None => None,
    };
    let mut s = lock(&SINKS);
    s.file = f;
    refresh(&s);
    Ok(())
}

/// Starts (clearing) or stops the in-memory capture; stopped lines are kept until [`take`].
pub fn capture(on: bool) {
    let mut s = lock(&SINKS);
    if on {
        s.capture = Some(Vec::new());
        lock(&STOPPED).clear();
    } else if let Some(c) = s.capture.take() {
        lock(&STOPPED).extend(c);
    }
    refresh(&s);
}

/// Takes the captured lines (the capture keeps running if it was on).
pub fn take() -> Vec<String> {
    let mut out = std::mem::take(&mut *lock(&STOPPED));
    if let Some(c) = lock(&SINKS).capture.as_mut() {
        out.append(c);
    }
    out
}

/// Stops every sink and forgets captured lines.
pub fn reset() {
    let mut s = lock(&SINKS);
    s.capture = None;
    s.file = None;
    refresh(&s);
    lock(&STOPPED).clear();
}

fn emit(line: String) {
    let mut s = lock(&SINKS);
    if let Some(f) = s.file.as_mut() {
        let _ = f.write_all(line.as_bytes());
        let _ = f.write_all(b"\n");
    }
    if let Some(c) = s.capture.as_mut() {
        c.push(line);
    }
}

/// `"0x%016x"`.
fn hex(v: u64) -> String {
    format!("\"0x{v:016x}\"")
}

/// A JSON string literal.
fn js(v: &str) -> String {
    let mut o = String::with_capacity(v.len() + 2);
    o.push('"');
    for ch in v.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
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

/// Name of an opcode (the loopback's spelling).
pub fn opcode_name(op: u32) -> &'static str {
    match op {
        u::URMA_OPC_WRITE => "WRITE",
        u::URMA_OPC_WRITE_IMM => "WRITE_IMM",
        u::URMA_OPC_WRITE_NOTIFY => "WRITE_NOTIFY",
        u::URMA_OPC_READ => "READ",
        u::URMA_OPC_CAS => "CAS",
        u::URMA_OPC_SWAP => "SWAP",
        u::URMA_OPC_FADD => "FADD",
        u::URMA_OPC_FSUB => "FSUB",
        u::URMA_OPC_FAND => "FAND",
        u::URMA_OPC_FOR => "FOR",
        u::URMA_OPC_FXOR => "FXOR",
        u::URMA_OPC_SEND => "SEND",
        u::URMA_OPC_SEND_IMM => "SEND_IMM",
        u::URMA_OPC_SEND_INVALIDATE => "SEND_INVALIDATE",
        u::URMA_OPC_NOP => "NOP",
        u::URMA_OPC_WRITE_ATOMIC => "WRITE_ATOMIC",
        u::URMA_OPC_FLUSH_DMA => "FLUSH_DMA",
        _ => "UNKNOWN",
    }
}

/// One `post_send` line.
///
/// # Safety
/// `w` must be a WR the caller handed to a post call (its SGE lists readable).
pub unsafe fn post_send(q: &str, w: &u::urma_jfs_wr_t, ret: i32) {
    // SAFETY: the flag union is a plain u32.
    let flags = unsafe { w.flag.value };
    let (src, dst, imm) = match w.opcode {
        u::URMA_OPC_WRITE | u::URMA_OPC_WRITE_IMM | u::URMA_OPC_READ => {
            // SAFETY: rw is the active member for these opcodes (the post contract).
            let rw = unsafe { &w.__bindgen_anon_1.rw };
            let imm = if w.opcode == u::URMA_OPC_WRITE_IMM {
                hex(rw.notify_data)
            } else {
                "null".into()
            };
            // SAFETY: the WR's SGE lists are readable (the caller's contract).
            unsafe { (sges(&rw.src), sges(&rw.dst), imm) }
        }
        u::URMA_OPC_SEND | u::URMA_OPC_SEND_IMM => {
            // SAFETY: send is the active member for these opcodes.
            let sd = unsafe { &w.__bindgen_anon_1.send };
            let imm = if w.opcode == u::URMA_OPC_SEND_IMM {
                hex(sd.imm_data)
            } else {
                "null".into()
            };
            // SAFETY: as above.
            (unsafe { sges(&sd.src) }, "[]".into(), imm)
        }
        _ => ("[]".into(), "[]".into(), "null".into()),
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
        js(opcode_name(w.opcode)),
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
    // SAFETY: the CR flag union is a plain u8.
    let flag = unsafe { cr.flag.value };
    let s_r = flag & 1;
    let (remote, imm) = if s_r == 1 {
        // SAFETY: both union members are plain integers; imm_data is always readable.
        let imm = unsafe { cr.__bindgen_anon_1.imm_data };
        (js(&qname(cr.remote_id.id)), hex(imm))
    } else {
        ("null".into(), "null".into())
    };
    format!(
        "\"s_r\":{},\"status\":{},\"opcode\":{},\"jetty\":{},\"user_ctx\":{},\"len\":{},\"local\":{},\"remote\":{},\"imm\":{}",
        s_r,
        { cr.status },
        { cr.opcode },
        (flag >> 1) & 1,
        hex(cr.user_ctx),
        cr.completion_len,
        js(&qname(cr.local_id)),
        remote,
        imm
    )
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
