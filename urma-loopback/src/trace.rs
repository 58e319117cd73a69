//! JSON-lines trace of posted WRs and generated / polled CRs.
//!
//! Sinks: a file (`URMA_LOOPBACK_TRACE=/path` at `urma_init`, or `urma_loopback_trace_open`) and
//! an in-memory capture (`urma_loopback_trace_capture` / `urma_loopback_trace_take`). Lines carry
//! no raw pointers, thread ids or timestamps; objects appear by symbolic name (`jfs1`, `seg2`, ...
//! assigned in creation order), addresses as offsets into their segment. The line format is
//! documented in `docs/loopback.md`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};

use crate::util::{lock, rlock, wlock};

struct Sinks {
    file: Option<std::fs::File>,
    capture: Option<Vec<String>>,
}

static ON: AtomicBool = AtomicBool::new(false);
static SINKS: Mutex<Sinks> = Mutex::new(Sinks {
    file: None,
    capture: None,
});

/// Whether any sink is active (cheap check before formatting a line).
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

/// Starts (clearing) or stops the in-memory capture. Stopping keeps the captured lines until
/// [`take`]; starting discards them.
pub fn capture(on: bool) {
    let mut s = lock(&SINKS);
    if on {
        s.capture = Some(Vec::new());
        lock(&STOPPED).clear();
    } else if let Some(c) = s.capture.take() {
        STOPPED.lock().unwrap_or_else(|e| e.into_inner()).extend(c);
    }
    refresh(&s);
}

static STOPPED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Takes the captured lines (capture keeps running if it was on).
pub fn take() -> Vec<String> {
    let mut out = std::mem::take(&mut *lock(&STOPPED));
    let mut s = lock(&SINKS);
    if let Some(c) = s.capture.as_mut() {
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

/// Emits one line (no trailing newline in `line`).
pub fn emit(line: String) {
    let mut s = lock(&SINKS);
    if let Some(f) = s.file.as_mut() {
        let _ = f.write_all(line.as_bytes());
        let _ = f.write_all(b"\n");
    }
    if let Some(c) = s.capture.as_mut() {
        c.push(line);
    }
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

/// `"0x%016x"`.
pub fn hex(v: u64) -> String {
    format!("\"0x{v:016x}\"")
}

/// JSON string literal (names are plain ASCII identifiers; still escaped defensively).
pub fn s(v: &str) -> String {
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

/// The CR fields shared by `cr` and `poll` lines.
pub fn cr_fields(cr: &urma_sys::urma_cr_t) -> String {
    // SAFETY: the CR flag union is a plain u8.
    let flag = unsafe { cr.flag.value };
    let s_r = flag & 1;
    let local = qname(cr.local_id);
    let remote = if s_r == 1 {
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
