//! The state the C callbacks share with the measurement (`notify_callback` and the log callback take no context): chunk counters, latency stamps and samples.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

pub(super) const STAMP_SLOTS: usize = 4096;
pub(super) const SAMPLE_CAP: usize = 1 << 20;

pub(crate) struct Shared {
    base: Instant,
    /// Poll time of the receive CR of (client_key % STAMP_SLOTS, chunk_id), ns since `base`.
    pub(super) stamps: Box<[AtomicU64]>,
    pub(super) samples: Box<[AtomicU64]>,
    pub(super) nsamples: AtomicUsize,
    record: AtomicBool,
    pub(crate) chunks: AtomicU64,
    pub(crate) cb_errors: AtomicU64,
    pub(super) logs: AtomicU64,
    pub(super) log_errors: AtomicU64,
    /// Paced cells: the pollers measure the CPU time they spend handing CRs to the library, so
    /// that the rest of their time (the application's own polling loop or event wait, and in poll
    /// mode its idle spinning) can be told apart.
    pub(super) split_cpu: AtomicBool,
    pub(super) poll_busy_ns: AtomicU64,
}

pub(crate) fn shared() -> &'static Shared {
    static S: OnceLock<Shared> = OnceLock::new();
    S.get_or_init(|| Shared {
        base: Instant::now(),
        stamps: (0..STAMP_SLOTS * 8).map(|_| AtomicU64::new(0)).collect(),
        samples: (0..SAMPLE_CAP).map(|_| AtomicU64::new(0)).collect(),
        nsamples: AtomicUsize::new(0),
        record: AtomicBool::new(false),
        chunks: AtomicU64::new(0),
        cb_errors: AtomicU64::new(0),
        logs: AtomicU64::new(0),
        log_errors: AtomicU64::new(0),
        split_cpu: AtomicBool::new(false),
        poll_busy_ns: AtomicU64::new(0),
    })
}

/// Starts (clearing the samples) or stops the recording of latency samples.
pub(crate) fn record_latencies(on: bool) {
    let s = shared();
    if on {
        s.nsamples.store(0, Ordering::Relaxed);
    }
    s.record.store(on, Ordering::Release);
}

/// Whether the pollers measure the CPU time of their calls into the library (paced windows).
pub(crate) fn split_poller_cpu(on: bool) {
    shared().split_cpu.store(on, Ordering::Relaxed);
}

pub(super) fn now_ns(s: &Shared) -> u64 {
    s.base.elapsed().as_nanos() as u64
}

pub(super) fn stamp_index(rid: u64, chunk: u64) -> usize {
    (rid as usize % STAMP_SLOTS) * 8 + (chunk as usize & 7)
}

pub(super) unsafe extern "C" fn on_chunk(ud: *mut c_void) -> c_int {
    let s = shared();
    let t1 = now_ns(s);
    if ud.is_null() {
        s.cb_errors.fetch_add(1, Ordering::Relaxed);
        return 0;
    }
    // SAFETY: the library passes a pointer to an os_transport_user_data_t (a u64), valid
    // during the call.
    let v = unsafe { *(ud as *const u64) };
    let rid = v & ((1u64 << 60) - 1);
    let chunk = v >> 61;
    if s.record.load(Ordering::Relaxed) {
        let t0 = s.stamps[stamp_index(rid, chunk)].load(Ordering::Acquire);
        if t0 != 0 && t1 >= t0 {
            let i = s.nsamples.fetch_add(1, Ordering::Relaxed);
            if i < SAMPLE_CAP {
                s.samples[i].store(t1 - t0, Ordering::Relaxed);
            }
        }
    }
    s.chunks.fetch_add(1, Ordering::Relaxed);
    0
}

pub(super) unsafe extern "C" fn on_log(level: c_int, _msg: *const c_char) {
    let s = shared();
    s.logs.fetch_add(1, Ordering::Relaxed);
    // ERROR = 0xFF02
    if level & 0xFF == 2 {
        s.log_errors.fetch_add(1, Ordering::Relaxed);
    }
}
