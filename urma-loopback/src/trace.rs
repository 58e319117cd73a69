//! JSON-lines trace of posted WRs and generated / polled CRs.
//!
//! Sinks: a file (`URMA_LOOPBACK_TRACE=/path` at `urma_init`, or `urma_loopback_trace_open`) and
//! an in-memory capture (`urma_loopback_trace_capture` / `urma_loopback_trace_take`). Lines carry
//! no raw pointers, thread ids or timestamps; objects appear by symbolic name (`jfs1`, `seg2`, ...
//! assigned in creation order), addresses as offsets into their segment. The line format is
//! documented in `docs/loopback.md`.

use std::collections::HashMap;
use std::sync::RwLock;

use urma_loopback_ctl::trace_line::Sink;

use crate::util::{rlock, wlock};

/// The loopback's trace sinks (file and capture; `urma_loopback_ctl::trace_line`).
static SINK: Sink = Sink::new();

/// Whether any sink is active (cheap check before formatting a line).
pub fn enabled() -> bool {
    SINK.enabled()
}

/// Opens (truncates) a trace file; `None` closes the file sink.
pub fn open_file(path: Option<&str>) -> std::io::Result<()> {
    SINK.open_file(path)
}

/// Starts (clearing) or stops the in-memory capture (stopped lines are kept until [`take`]).
pub fn capture(on: bool) {
    SINK.capture(on)
}

/// Takes the captured lines (capture keeps running if it was on).
pub fn take() -> Vec<String> {
    SINK.take()
}

/// Stops every sink and forgets captured lines.
pub fn reset() {
    SINK.reset()
}

/// Emits one line (no trailing newline in `line`).
pub fn emit(line: String) {
    SINK.emit(line)
}

// ---- symbolic names of jetty/JFS/JFR ids (shared id space), for CR fields ----

static QNAMES: RwLock<Option<HashMap<u32, String>>> = RwLock::new(None);

/// Records the symbolic name of a jetty/JFS/JFR id.
pub fn name_qid(id: u32, name: &str) {
    wlock(&QNAMES)
        .get_or_insert_with(HashMap::new)
        .insert(id, name.to_string());
}

/// Symbolic name of a jetty/JFS/JFR id, or `"?<id>"`... never a raw number otherwise.
pub fn qname(id: u32) -> String {
    rlock(&QNAMES)
        .as_ref()
        .and_then(|m| m.get(&id).cloned())
        .unwrap_or_else(|| "unknown".to_string())
}

pub use urma_loopback_ctl::trace_line::{hex, json_str as s};

/// This process's uasid once it joined the host (0: in-process only), so that a recv CR from a
/// sender in another process names it `uasid<u>:<id>` instead of one of our own queues.
pub static LOCAL_UASID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The CR fields shared by `cr` and `poll` lines.
pub fn cr_fields(cr: &urma_sys::urma_cr_t) -> String {
    // SAFETY: the CR flag union is a plain u8.
    let flag = unsafe { cr.flag.value };
    let s_r = flag & 1;
    let local = qname(cr.local_id);
    let mine = LOCAL_UASID.load(std::sync::atomic::Ordering::Relaxed);
    let remote = if s_r == 1 && mine != 0 && cr.remote_id.uasid != mine {
        // A sender in another process: its ids are not ours to name.
        s(&format!("uasid{}:{}", cr.remote_id.uasid, cr.remote_id.id))
    } else if s_r == 1 {
        s(&qname(cr.remote_id.id))
    } else {
        "null".to_string()
    };
    // SAFETY: both union members are plain u64/u32 data; reading imm_data is always defined.
    let imm = unsafe { cr.__bindgen_anon_1.imm_data };
    let imm = if s_r == 1 {
        hex(imm)
    } else {
        "null".to_string()
    };
    format!(
        "\"s_r\":{},\"status\":{},\"opcode\":{},\"jetty\":{},\"user_ctx\":{},\"len\":{},\"local\":{},\"remote\":{},\"imm\":{}",
        s_r,
        { cr.status },
        { cr.opcode },
        (flag >> 1) & 1,
        hex(cr.user_ctx),
        cr.completion_len,
        s(&local),
        remote,
        imm
    )
}
