//! Test-control API `urma_loopback_*` (declared in `include/urma_loopback.h`) and counters.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::knobs;
use crate::registry::{live_counts, Kind};
use crate::trace;
use crate::util::guard;

/// Global counters (all since process start or the last reset).
pub struct Counters {
    pub send_wrs: Counter,
    pub recv_wrs: Counter,
    pub post_errors: Counter,
    pub crs_generated: Counter,
    pub crs_polled: Counter,
    pub crs_dropped: Counter,
    pub crs_duplicated: Counter,
    pub crs_held: Counter,
    pub crs_overflow: Counter,
    pub crs_error: Counter,
    pub rnr_errors: Counter,
    pub bytes_copied: Counter,
    pub bytes_transferred: Counter,
    pub events_reported: Counter,
    pub events_acked: Counter,
    pub rnr_parked: Counter,
    pub rnr_delivered_late: Counter,
    pub rnr_expired: Counter,
}

pub static COUNTERS: Counters = Counters {
    send_wrs: Counter::new(),
    recv_wrs: Counter::new(),
    post_errors: Counter::new(),
    crs_generated: Counter::new(),
    crs_polled: Counter::new(),
    crs_dropped: Counter::new(),
    crs_duplicated: Counter::new(),
    crs_held: Counter::new(),
    crs_overflow: Counter::new(),
    crs_error: Counter::new(),
    rnr_errors: Counter::new(),
    bytes_copied: Counter::new(),
    bytes_transferred: Counter::new(),
    events_reported: Counter::new(),
    events_acked: Counter::new(),
    rnr_parked: Counter::new(),
    rnr_delivered_late: Counter::new(),
    rnr_expired: Counter::new(),
};

/// C mirror of `urma_loopback_counters_t` (see the header for field meanings).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct UrmaLoopbackCounters {
    pub send_wrs: u64,
    pub recv_wrs: u64,
    pub post_errors: u64,
    pub crs_generated: u64,
    pub crs_polled: u64,
    pub crs_dropped: u64,
    pub crs_duplicated: u64,
    pub crs_held: u64,
    pub crs_overflow: u64,
    pub crs_error: u64,
    pub rnr_errors: u64,
    pub bytes_copied: u64,
    pub bytes_transferred: u64,
    pub events_reported: u64,
    pub events_acked: u64,
    pub crs_in_flight: u64,
    pub live_contexts: u64,
    pub live_jfce: u64,
    pub live_jfc: u64,
    pub live_jfs: u64,
    pub live_jfr: u64,
    pub live_jetty: u64,
    pub live_tjetty: u64,
    pub live_segs: u64,
    pub live_imported_segs: u64,
    pub live_token_ids: u64,
    pub rnr_parked: u64,
    pub rnr_delivered_late: u64,
    pub rnr_expired: u64,
}

fn snapshot() -> UrmaLoopbackCounters {
    let c = &COUNTERS;
    let l = live_counts();
    let r = |a: &Counter| a.load(Ordering::Relaxed);
    UrmaLoopbackCounters {
        send_wrs: r(&c.send_wrs),
        recv_wrs: r(&c.recv_wrs),
        post_errors: r(&c.post_errors),
        crs_generated: r(&c.crs_generated),
        crs_polled: r(&c.crs_polled),
        crs_dropped: r(&c.crs_dropped),
        crs_duplicated: r(&c.crs_duplicated),
        crs_held: r(&c.crs_held),
        crs_overflow: r(&c.crs_overflow),
        crs_error: r(&c.crs_error),
        rnr_errors: r(&c.rnr_errors),
        bytes_copied: r(&c.bytes_copied),
        bytes_transferred: r(&c.bytes_transferred),
        events_reported: r(&c.events_reported),
        events_acked: r(&c.events_acked),
        crs_in_flight: knobs::in_flight(),
        live_contexts: l[Kind::Ctx as usize],
        live_jfce: l[Kind::Jfce as usize],
        live_jfc: l[Kind::Jfc as usize],
        live_jfs: l[Kind::Jfs as usize],
        live_jfr: l[Kind::Jfr as usize],
        live_jetty: l[Kind::Jetty as usize],
        live_tjetty: l[Kind::TJetty as usize],
        live_segs: l[Kind::Seg as usize],
        live_imported_segs: l[Kind::ISeg as usize],
        live_token_ids: l[Kind::TokenId as usize],
        rnr_parked: r(&c.rnr_parked),
        rnr_delivered_late: r(&c.rnr_delivered_late),
        rnr_expired: r(&c.rnr_expired),
    }
}

fn reset_counters() {
    let c = &COUNTERS;
    for a in [
        &c.send_wrs,
        &c.recv_wrs,
        &c.post_errors,
        &c.crs_generated,
        &c.crs_polled,
        &c.crs_dropped,
        &c.crs_duplicated,
        &c.crs_overflow,
        &c.crs_error,
        &c.rnr_errors,
        &c.bytes_copied,
        &c.bytes_transferred,
        &c.events_reported,
        &c.events_acked,
        &c.rnr_parked,
        &c.rnr_delivered_late,
        &c.rnr_expired,
    ] {
        a.store(0, Ordering::Relaxed);
    }
}

/// Stripes of a [`Counter`].
const STRIPES: usize = 8;

/// One stripe on cache lines of its own.
#[repr(align(128))]
struct Stripe(AtomicU64);

/// A statistics counter striped over cache lines by thread: every post, CR and poll bumps a few
/// counters, and one shared word per counter bounced between the posting threads and the poller.
/// Reads sum the stripes (wrapping, so a gauge such as `crs_held` that one thread raises and
/// another lowers still reads right); like the plain atomics before, a read concurrent with
/// updates may miss some of them.
pub struct Counter([Stripe; STRIPES]);

impl Default for Counter {
    fn default() -> Self {
        Self::new()
    }
}

impl Counter {
    pub const fn new() -> Counter {
        Counter([const { Stripe(AtomicU64::new(0)) }; STRIPES])
    }

    fn mine(&self) -> &AtomicU64 {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
        }
        &self.0[STRIPE.try_with(|s| *s).unwrap_or(0)].0
    }

    pub fn fetch_add(&self, v: u64, o: Ordering) {
        self.mine().fetch_add(v, o);
    }

    pub fn fetch_sub(&self, v: u64, o: Ordering) {
        self.mine().fetch_sub(v, o);
    }

    pub fn load(&self, o: Ordering) -> u64 {
        self.0
            .iter()
            .fold(0u64, |acc, s| acc.wrapping_add(s.0.load(o)))
    }

    pub fn store(&self, v: u64, o: Ordering) {
        for (i, s) in self.0.iter().enumerate() {
            s.0.store(if i == 0 { v } else { 0 }, o);
        }
    }
}

/// Applies `URMA_LOOPBACK_KNOBS` and `URMA_LOOPBACK_TRACE` (called once, from `urma_init`).
pub fn apply_env() {
    if let Ok(spec) = std::env::var("URMA_LOOPBACK_KNOBS") {
        if let Err(item) = knobs::apply_spec(&spec) {
            crate::util::log_err(&format!("URMA_LOOPBACK_KNOBS: cannot parse '{item}'"));
        }
    }
    if let Ok(path) = std::env::var("URMA_LOOPBACK_TRACE") {
        if !path.is_empty() {
            if let Err(e) = trace::open_file(Some(&path)) {
                crate::util::log_err(&format!("URMA_LOOPBACK_TRACE={path}: {e}"));
            }
        }
    }
}

/// Resets knobs (held CRs are released first, FIFO), counters, the trace (file closed, capture
/// stopped and cleared) and the symbolic-name numbering. Live objects are not touched.
#[no_mangle]
pub extern "C" fn urma_loopback_reset() {
    guard((), || {
        knobs::reset();
        crate::datapath::clear_parked();
        reset_counters();
        trace::reset();
        crate::registry::reset_names();
    })
}

/// Copies the counters into `*out`. Returns 0, or -1 when `out` is NULL.
#[no_mangle]
pub unsafe extern "C" fn urma_loopback_get_counters(out: *mut UrmaLoopbackCounters) -> c_int {
    guard(-1, || {
        if out.is_null() {
            return -1;
        }
        // SAFETY: out is non-NULL and, per the header, points to a writable counters struct.
        unsafe { out.write(snapshot()) };
        0
    })
}

/// The Nth WR (1-based, counted per `queue` since reset) of `queue` (1 = send, 2 = recv) is
/// rejected by its post call with `status` (and `*bad_wr` pointing at it).
#[no_mangle]
pub extern "C" fn urma_loopback_fail_post(queue: c_int, nth: u64, status: c_int) -> c_int {
    guard(-1, || {
        if !(queue == knobs::Q_SEND || queue == knobs::Q_RECV) || nth == 0 {
            return -1;
        }
        knobs::edit(|k| k.fail_post.push((queue, nth, status)));
        0
    })
}

/// The Nth send WR (1-based since reset) is accepted but completes with `cr_status` (a
/// `urma_cr_status_t`): no data moves, no recv WR is consumed, the send CR is always generated.
#[no_mangle]
pub extern "C" fn urma_loopback_fail_completion(nth: u64, cr_status: u32) -> c_int {
    guard(-1, || {
        if nth == 0 {
            return -1;
        }
        knobs::edit(|k| k.fail_cr.push((nth, cr_status)));
        0
    })
}

/// The Nth CR generated (1-based since reset, send and recv sides together) is dropped
/// (`action` 1) or delivered twice (`action` 2).
#[no_mangle]
pub extern "C" fn urma_loopback_cr_action(nth: u64, action: c_int) -> c_int {
    guard(-1, || {
        if nth == 0 || !(action == knobs::ACT_DROP || action == knobs::ACT_DUP) {
            return -1;
        }
        knobs::edit(|k| k.cr_action.push((nth, action)));
        0
    })
}

/// While `hold` is true, generated CRs are kept aside instead of entering their JFC.
#[no_mangle]
pub extern "C" fn urma_loopback_hold_crs(hold: bool) {
    guard((), || knobs::edit(|k| k.hold = hold))
}

/// Releases the held CRs: `order` 0 = FIFO, 1 = reversed, 2 = shuffled (deterministic from
/// `seed`); `delay_ms` 0 = now, else from a background thread after that delay. Returns the count.
#[no_mangle]
pub extern "C" fn urma_loopback_release_crs(order: c_int, seed: u64, delay_ms: u32) -> u64 {
    guard(0, || knobs::release_held(order, seed, delay_ms))
}

/// Every CR generated from now on becomes visible `ms` milliseconds later (0 = off). Order is
/// preserved.
#[no_mangle]
pub extern "C" fn urma_loopback_set_cr_delay(ms: u32) {
    guard((), || knobs::edit(|k| k.delay_ms = ms as u64))
}

/// No-copy mode: WRs are validated and complete normally but no payload byte is copied.
#[no_mangle]
pub extern "C" fn urma_loopback_set_nocopy(on: bool) {
    guard((), || knobs::NOCOPY.store(on, Ordering::Release))
}

/// Bound of `urma_delete_jfc` waiting for unacked events (default 2000 ms).
#[no_mangle]
pub extern "C" fn urma_loopback_set_delete_timeout(ms: u32) {
    guard((), || {
        knobs::DELETE_TIMEOUT_MS.store(ms as u64, Ordering::Release)
    })
}

/// Receiver-not-ready timeout: how long a SEND/SEND_IMM/WRITE_IMM that finds no recv WR waits
/// (parked) for one before failing with `URMA_CR_RNR_RETRY_CNT_EXC_ERR`. 0 = fail at once.
#[no_mangle]
pub extern "C" fn urma_loopback_set_rnr_timeout(ms: u32) {
    guard((), || {
        crate::datapath::RNR_TIMEOUT_MS.store(ms as u64, Ordering::Release)
    })
}

/// Applies a knob spec (syntax of `URMA_LOOPBACK_KNOBS`). Returns the number of items applied,
/// or -1 if an item does not parse (items before it stay applied).
#[no_mangle]
pub unsafe extern "C" fn urma_loopback_apply_knobs(spec: *const c_char) -> c_int {
    guard(-1, || {
        if spec.is_null() {
            return -1;
        }
        // SAFETY: spec is a non-NULL NUL-terminated string per the header.
        let s = unsafe { CStr::from_ptr(spec) }
            .to_string_lossy()
            .into_owned();
        match knobs::apply_spec(&s) {
            Ok(n) => n as c_int,
            Err(_) => -1,
        }
    })
}

/// Opens (truncating) a trace file; NULL closes it. Returns 0 or -1.
#[no_mangle]
pub unsafe extern "C" fn urma_loopback_trace_open(path: *const c_char) -> c_int {
    guard(-1, || {
        let p = if path.is_null() {
            None
        } else {
            // SAFETY: non-NULL NUL-terminated string per the header.
            Some(
                unsafe { CStr::from_ptr(path) }
                    .to_string_lossy()
                    .into_owned(),
            )
        };
        match trace::open_file(p.as_deref()) {
            Ok(()) => 0,
            Err(_) => -1,
        }
    })
}

/// Starts (discarding earlier lines) or stops the in-memory trace capture.
#[no_mangle]
pub extern "C" fn urma_loopback_trace_capture(on: bool) {
    guard((), || trace::capture(on))
}

/// Takes the captured lines as one malloc'd NUL-terminated string, one JSON object per line,
/// each ending with '\n'. `*len` (if not NULL) gets the length without the NUL. Free with
/// `urma_loopback_free` (or free()). Returns NULL only when out of memory.
#[no_mangle]
pub unsafe extern "C" fn urma_loopback_trace_take(len: *mut usize) -> *mut c_char {
    guard(std::ptr::null_mut(), || {
        let lines = trace::take();
        let mut text = String::new();
        for l in lines {
            text.push_str(&l);
            text.push('\n');
        }
        let n = text.len();
        // SAFETY: malloc of n + 1 bytes; checked for NULL before use.
        let p = unsafe { libc::malloc(n + 1) } as *mut u8;
        if p.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: p has n + 1 writable bytes; text has n readable bytes; no overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), p, n);
            *p.add(n) = 0;
            if !len.is_null() {
                *len = n;
            }
        }
        p as *mut c_char
    })
}

/// Frees memory returned by the control API.
#[no_mangle]
pub unsafe extern "C" fn urma_loopback_free(p: *mut c_void) {
    // SAFETY: p is NULL or was returned by malloc in urma_loopback_trace_take.
    guard((), || unsafe { libc::free(p) })
}

#[cfg(test)]
mod counter_tests {
    use super::Counter;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn striped_counter_sums_every_thread_and_resets() {
        let c = Counter::new();
        std::thread::scope(|s| {
            for _ in 0..12 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        c.fetch_add(1, Relaxed);
                    }
                });
            }
        });
        assert_eq!(c.load(Relaxed), 12_000);
        c.store(0, Relaxed);
        assert_eq!(c.load(Relaxed), 0);
        c.store(5, Relaxed);
        assert_eq!(c.load(Relaxed), 5);
    }

    #[test]
    fn a_gauge_raised_and_lowered_on_different_threads_reads_right() {
        let c = Counter::new();
        std::thread::scope(|s| {
            s.spawn(|| c.fetch_add(7, Relaxed));
        });
        std::thread::scope(|s| {
            s.spawn(|| {
                // Likely another stripe: that stripe wraps below zero, the sum does not.
                std::thread::spawn(|| ()).join().unwrap();
                c.fetch_sub(3, Relaxed)
            });
        });
        c.fetch_sub(4, Relaxed);
        assert_eq!(c.load(Relaxed), 0);
    }
}
