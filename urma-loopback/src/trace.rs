//! JSON-lines trace of posted WRs and generated / polled CRs: the loopback's sinks and the names
//! of its queues; the events and their one serialiser are `urma_datapath::trace_line`'s.
//!
//! Sinks: a file (`URMA_LOOPBACK_TRACE=/path` at `urma_init`, or `urma_loopback_trace_open`) and
//! an in-memory capture (`urma_loopback_trace_capture` / `urma_loopback_trace_take`). Lines carry
//! no raw pointers, thread ids or timestamps; objects appear by symbolic name (`jfs1`, `seg2`, ...
//! assigned in creation order), addresses as offsets into their segment. The line format is
//! documented in `docs/loopback.md`.

use ranked_lock::{rank, RwLock};
use std::collections::HashMap;

use urma_datapath::trace_line::{CrNames, Event, Sink};

use crate::util::{rlock, wlock};

/// The loopback's trace sinks (file and capture; `urma_datapath::trace_line`): the control exports (`ctl`)
/// open, capture, take and reset it directly.
pub static SINK: Sink = Sink::new();

/// Whether any sink is active (cheap check before gathering what an event names).
pub fn enabled() -> bool {
    SINK.enabled()
}

/// Writes one event (its line is made only while a sink is active).
pub fn event(e: &Event<'_>) {
    SINK.event(e)
}

// ---- symbolic names of jetty/JFS/JFR ids (shared id space), for CR fields ----

static QNAMES: RwLock<Option<HashMap<u32, String>>, { rank::QUEUE_NAMES }> = RwLock::new(None);

/// Records the symbolic name of a jetty/JFS/JFR id.
pub fn name_qid(id: u32, name: &str) {
    wlock(&QNAMES)
        .get_or_insert_with(HashMap::new)
        .insert(id, name.to_string());
}

/// Symbolic name of a jetty/JFS/JFR id; `unknown` for an id without one (never a raw number).
pub fn qname(id: u32) -> String {
    rlock(&QNAMES)
        .as_ref()
        .and_then(|m| m.get(&id).cloned())
        .unwrap_or_else(|| "unknown".to_string())
}

/// This process's uasid once it joined the host (0: in-process only), so that a recv CR from a
/// sender in another process names it `uasid<u>:<id>` instead of one of our own queues.
pub static LOCAL_UASID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The names of a CR's queues (`local`, `remote` of `cr` and `poll` lines).
pub struct Queues;

impl CrNames for Queues {
    fn local(&self, cr: &urma_sys::urma_cr_t) -> String {
        qname(cr.local_id)
    }

    fn remote(&self, cr: &urma_sys::urma_cr_t) -> String {
        let mine = LOCAL_UASID.load(std::sync::atomic::Ordering::Relaxed);
        if mine != 0 && cr.remote_id.uasid != mine {
            // A sender in another process: its ids are not ours to name.
            format!("uasid{}:{}", cr.remote_id.uasid, cr.remote_id.id)
        } else {
            qname(cr.remote_id.id)
        }
    }
}
