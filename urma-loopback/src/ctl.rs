//! Test-control API `urma_loopback_*` (declared in `include/urma_loopback.h`): a thin C shim.
//!
//! Each export runs behind the panic boundary (after the DMA engine ran the WRs posted before
//! it, [`crate::boundary::entry`]) and hands over to the fault plane ([`crate::faults`], which checks
//! the arguments of the fault exports as the interposition layer's do), the provider's own
//! tunables ([`crate::knobs`]), the counters ([`crate::stats`]) or the trace ([`crate::trace`]). The types (counters layout, selector
//! values, prototypes) are the control plane's, from `urma-loopback-ctl`.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::Ordering;

use urma_loopback_ctl::{Api, Counters};

use crate::boundary::entry;
use crate::faults::{self, PLANE};
use crate::knobs;
use crate::registry::{live_counts, Kind};
use crate::stats::COUNTERS;
use crate::trace;

/// The control plane's binding (`urma_loopback_ctl::Api`) filled with this crate's exports: a
/// prototype that differs from the binding the tests call through does not compile.
const _: Api = Api {
    reset: urma_loopback_reset,
    get_counters: urma_loopback_get_counters,
    fail_post: urma_loopback_fail_post,
    fail_completion: urma_loopback_fail_completion,
    cr_action: urma_loopback_cr_action,
    hold_crs: urma_loopback_hold_crs,
    release_crs: urma_loopback_release_crs,
    set_cr_delay: urma_loopback_set_cr_delay,
    set_nocopy: urma_loopback_set_nocopy,
    set_delete_timeout: urma_loopback_set_delete_timeout,
    set_rnr_timeout: urma_loopback_set_rnr_timeout,
    apply_knobs: urma_loopback_apply_knobs,
    trace_open: urma_loopback_trace_open,
    trace_capture: urma_loopback_trace_capture,
    trace_take: urma_loopback_trace_take,
    free: urma_loopback_free,
};

fn snapshot() -> Counters {
    let c = &COUNTERS;
    let l = live_counts();
    let r = |a: &crate::stats::Counter| a.load(Ordering::Relaxed);
    Counters {
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
        crs_in_flight: faults::in_flight(),
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
        peer_refusals: r(&c.peer_refusals),
        peer_refused_objects: r(&c.peer_refused_objects),
        lock_order_violations: ranked_lock::lock_order_violations() as u64,
    }
}

/// Applies `URMA_LOOPBACK_KNOBS` and `URMA_LOOPBACK_TRACE` (called once, from `urma_init`).
pub fn apply_env() {
    if let Some(spec) = crate::util::env("URMA_LOOPBACK_KNOBS") {
        if let Err(item) = faults::apply_spec(&spec) {
            crate::util::log_err(&format!("URMA_LOOPBACK_KNOBS: cannot parse '{item}'"));
        }
    }
    if let Some(path) = crate::util::env("URMA_LOOPBACK_TRACE") {
        if !path.is_empty() {
            if let Err(e) = trace::SINK.open_file(Some(&path)) {
                crate::util::log_err(&format!("URMA_LOOPBACK_TRACE={path}: {e}"));
            }
        }
    }
}

/// Resets knobs (held CRs are released first, FIFO), counters, the trace (file closed, capture
/// stopped and cleared) and the symbolic-name numbering. Live objects are not touched.
#[no_mangle]
pub extern "C" fn urma_loopback_reset() {
    entry((), || {
        faults::reset();
        crate::datapath::clear_parked();
        crate::stats::reset();
        trace::SINK.reset();
        crate::registry::reset_names();
    })
}

/// Copies the counters into `*out`. Returns 0, or -1 when `out` is NULL.
#[no_mangle]
pub unsafe extern "C" fn urma_loopback_get_counters(out: *mut Counters) -> c_int {
    entry(-1, || {
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
    entry(-1, || PLANE.add_fail_post(queue, nth, status))
}

/// The Nth send WR (1-based since reset) is accepted but completes with `cr_status` (a
/// `urma_cr_status_t`): no data moves, no recv WR is consumed, the send CR is always generated.
#[no_mangle]
pub extern "C" fn urma_loopback_fail_completion(nth: u64, cr_status: u32) -> c_int {
    entry(-1, || PLANE.add_fail_cr(nth, cr_status))
}

/// The Nth CR generated (1-based since reset, send and recv sides together) is dropped
/// (`action` 1) or delivered twice (`action` 2).
#[no_mangle]
pub extern "C" fn urma_loopback_cr_action(nth: u64, action: c_int) -> c_int {
    entry(-1, || PLANE.add_cr_action(nth, action))
}

/// While `hold` is true, generated CRs are kept aside instead of entering their JFC.
#[no_mangle]
pub extern "C" fn urma_loopback_hold_crs(hold: bool) {
    entry((), || PLANE.set_hold(hold))
}

/// Releases the held CRs: `order` 0 = FIFO, 1 = reversed, 2 = shuffled (deterministic from
/// `seed`); `delay_ms` 0 = now, else from a background thread after that delay. Returns the count.
#[no_mangle]
pub extern "C" fn urma_loopback_release_crs(order: c_int, seed: u64, delay_ms: u32) -> u64 {
    entry(0, || faults::release_held(order, seed, delay_ms))
}

/// Every CR generated from now on becomes visible `ms` milliseconds later (0 = off). Order is
/// preserved.
#[no_mangle]
pub extern "C" fn urma_loopback_set_cr_delay(ms: u32) {
    entry((), || PLANE.set_delay(u64::from(ms)))
}

/// No-copy mode: WRs are validated and complete normally but no payload byte is copied.
#[no_mangle]
pub extern "C" fn urma_loopback_set_nocopy(on: bool) {
    entry((), || knobs::NOCOPY.store(on, Ordering::Release))
}

/// Bound of `urma_delete_jfc` waiting for unacked events (default 2000 ms).
#[no_mangle]
pub extern "C" fn urma_loopback_set_delete_timeout(ms: u32) {
    entry((), || {
        knobs::DELETE_TIMEOUT_MS.store(ms as u64, Ordering::Release)
    })
}

/// Receiver-not-ready timeout: how long a SEND/SEND_IMM/WRITE_IMM that finds no recv WR waits
/// (parked) for one before failing with `URMA_CR_RNR_RETRY_CNT_EXC_ERR`. 0 = fail at once.
#[no_mangle]
pub extern "C" fn urma_loopback_set_rnr_timeout(ms: u32) {
    entry((), || knobs::set_rnr_timeout_ms(ms as u64))
}

/// Applies a knob spec (syntax of `URMA_LOOPBACK_KNOBS`). Returns the number of items applied,
/// or -1 if an item does not parse (items before it stay applied).
#[no_mangle]
pub unsafe extern "C" fn urma_loopback_apply_knobs(spec: *const c_char) -> c_int {
    entry(-1, || {
        if spec.is_null() {
            return -1;
        }
        // SAFETY: spec is a non-NULL NUL-terminated string per the header.
        let s = unsafe { CStr::from_ptr(spec) }
            .to_string_lossy()
            .into_owned();
        match faults::apply_spec(&s) {
            Ok(n) => n as c_int,
            Err(_) => -1,
        }
    })
}

/// Opens a trace file (`urma_datapath::trace_line::open_trace_file`: created 0600 or emptied,
/// never a link or another user's file); NULL closes it. Returns 0 or -1.
#[no_mangle]
pub unsafe extern "C" fn urma_loopback_trace_open(path: *const c_char) -> c_int {
    entry(-1, || {
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
        match trace::SINK.open_file(p.as_deref()) {
            Ok(()) => 0,
            Err(_) => -1,
        }
    })
}

/// Starts (discarding earlier lines) or stops the in-memory trace capture.
#[no_mangle]
pub extern "C" fn urma_loopback_trace_capture(on: bool) {
    entry((), || trace::SINK.capture(on))
}

/// Takes the captured lines as one malloc'd NUL-terminated string, one JSON object per line,
/// each ending with '\n'. `*len` (if not NULL) gets the length without the NUL. Free with
/// `urma_loopback_free` (or free()). Returns NULL only when out of memory.
#[no_mangle]
pub unsafe extern "C" fn urma_loopback_trace_take(len: *mut usize) -> *mut c_char {
    // SAFETY: len is NULL or writable (per the header).
    entry(std::ptr::null_mut(), || unsafe { trace::SINK.take_c(len) })
}

/// Frees memory returned by the control API.
#[no_mangle]
pub unsafe extern "C" fn urma_loopback_free(p: *mut c_void) {
    // SAFETY: p is NULL or was returned by malloc in urma_loopback_trace_take.
    entry((), || unsafe { libc::free(p) })
}
