//! The layer's control API (`urma_interpose_*`, prototypes in `include/urma_interpose.h`, the
//! Rust binding `urma_loopback_ctl::interpose::Api`), reached with `dlsym`, and the load-time
//! constructor: the real library loaded, the environment applied. The fault exports check their
//! arguments as the loopback's do (the fault plane's `add_*`).
//!
//! * `URMA_INTERPOSE_TRACE=/path`: trace file (truncated) from load on;
//! * `URMA_INTERPOSE_KNOBS=spec`: faults from load on (spec of `urma_interpose_apply_knobs`).

use std::ffi::{c_char, c_int, c_void, CStr};

use urma_loopback_ctl::interpose::Api;

use crate::faults::{self, Counters};
use crate::{guard, objects, trace};

/// The control plane's binding of this API (`urma_loopback_ctl::interpose::Api`, which the
/// harness resolves) filled with this crate's exports: a prototype that differs from the binding
/// does not compile. The header is checked against the same binding by `tests/header.rs`.
const _: Api = Api {
    active: urma_interpose_active,
    reset: urma_interpose_reset,
    fail_post: urma_interpose_fail_post,
    fail_completion: urma_interpose_fail_completion,
    cr_action: urma_interpose_cr_action,
    send_cr_action: urma_interpose_send_cr_action,
    recv_cr_action: urma_interpose_recv_cr_action,
    hold_crs: urma_interpose_hold_crs,
    release_crs: urma_interpose_release_crs,
    set_cr_delay: urma_interpose_set_cr_delay,
    apply_knobs: urma_interpose_apply_knobs,
    get_counters: urma_interpose_get_counters,
    trace_open: urma_interpose_trace_open,
    trace_capture: urma_interpose_trace_capture,
    trace_take: urma_interpose_trace_take,
    free: urma_interpose_free,
};

pub const TRACE_ENV: &str = "URMA_INTERPOSE_TRACE";
pub const KNOBS_ENV: &str = "URMA_INTERPOSE_KNOBS";

/// Load-time set-up: the real library is loaded before `main` (so that its own extensions, e.g.
/// the loopback's `urma_loopback_*`, are found by `dlsym(RTLD_DEFAULT, ..)` from the start), the
/// trace file and knobs of the environment are applied.
extern "C" fn on_load() {
    guard((), || {
        let _ = crate::real::real();
        apply_env();
    })
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

/// Applies `URMA_INTERPOSE_TRACE` and `URMA_INTERPOSE_KNOBS` (errors on stderr).
pub fn apply_env() {
    if let Ok(p) = std::env::var(TRACE_ENV) {
        if let Err(e) = trace::SINK.open_file(Some(&p)) {
            crate::say!("urma-interpose: {TRACE_ENV}={p}: {e}");
        }
    }
    if let Ok(spec) = std::env::var(KNOBS_ENV) {
        if let Err(item) = faults::apply_spec(&spec) {
            crate::say!("urma-interpose: {KNOBS_ENV}: cannot parse {item:?}");
        }
    }
}

/// Whether the real library is loaded (false: every URMA call fails; the reason was printed).
#[no_mangle]
pub extern "C" fn urma_interpose_active() -> bool {
    guard(false, || crate::real::real().is_some())
}

/// Clears the faults (held CRs become ready, FIFO), the WR / CR numbering, the counters, the
/// trace sinks and captured lines, and restarts the symbolic names.
#[no_mangle]
pub extern "C" fn urma_interpose_reset() {
    guard((), || {
        faults::reset();
        trace::SINK.reset();
        objects::reset_names();
    })
}

/// The Nth WR of `queue` (1 = send, 2 = recv) fails with `status`, not forwarded. 0, or -1
/// for an unknown queue or `nth` 0.
#[no_mangle]
pub extern "C" fn urma_interpose_fail_post(queue: c_int, nth: u64, status: c_int) -> c_int {
    guard(-1, || faults::add_fail_post(queue, nth, status))
}

/// The Nth send WR is forwarded as a NOP whose CR gets `cr_status` (nothing executed). 0, or
/// -1 for `nth` 0.
#[no_mangle]
pub extern "C" fn urma_interpose_fail_completion(nth: u64, cr_status: u32) -> c_int {
    guard(-1, || faults::add_fail_cr(nth, cr_status))
}

/// The Nth CR polled from the provider is dropped (`action` 1) or duplicated (2). 0, or -1.
#[no_mangle]
pub extern "C" fn urma_interpose_cr_action(nth: u64, action: c_int) -> c_int {
    guard(-1, || faults::add_cr_action(nth, action))
}

/// The CR of the Nth send WR is dropped (`action` 1) or duplicated (2). 0, or -1.
#[no_mangle]
pub extern "C" fn urma_interpose_send_cr_action(nth: u64, action: c_int) -> c_int {
    guard(-1, || faults::add_send_cr_action(nth, action))
}

/// The Nth receive-side CR polled is dropped (`action` 1) or duplicated (2). 0, or -1.
#[no_mangle]
pub extern "C" fn urma_interpose_recv_cr_action(nth: u64, action: c_int) -> c_int {
    guard(-1, || faults::add_recv_cr_action(nth, action))
}

/// Holds every CR polled from now on (until `urma_interpose_release_crs`), or stops holding.
#[no_mangle]
pub extern "C" fn urma_interpose_hold_crs(on: bool) {
    guard((), || faults::set_hold(on))
}

/// Hands the held CRs over at later polls: `order` 0 FIFO, 1 reversed, 2 shuffled by `seed`;
/// after `delay_ms`. Returns how many were held, or `u64::MAX` for an unknown order.
#[no_mangle]
pub extern "C" fn urma_interpose_release_crs(order: c_int, seed: u64, delay_ms: u32) -> u64 {
    guard(u64::MAX, || {
        if !(faults::ORDER_FIFO..=faults::ORDER_SHUFFLE).contains(&order) {
            return u64::MAX;
        }
        faults::release(order, seed, delay_ms)
    })
}

/// Every CR polled from now on is handed over at least `ms` later (0: off).
#[no_mangle]
pub extern "C" fn urma_interpose_set_cr_delay(ms: u32) {
    guard((), || faults::set_delay(ms as u64))
}

/// Applies a knob spec (see `faults::apply_spec`). Returns the number of items applied, or -1
/// (NULL, not UTF-8, or an item that does not parse; items before it are applied).
///
/// # Safety
/// `spec` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn urma_interpose_apply_knobs(spec: *const c_char) -> c_int {
    guard(-1, || {
        if spec.is_null() {
            return -1;
        }
        // SAFETY: non-NULL NUL-terminated string (the caller's contract).
        let Ok(s) = unsafe { CStr::from_ptr(spec) }.to_str() else {
            return -1;
        };
        match faults::apply_spec(s) {
            Ok(n) => n as c_int,
            Err(item) => {
                crate::say!("urma-interpose: knob spec: cannot parse {item:?}");
                -1
            }
        }
    })
}

/// Copies the counters into `*out`. 0, or -1 for NULL.
///
/// # Safety
/// `out` is NULL or points to a writable `urma_interpose_counters_t`.
#[no_mangle]
pub unsafe extern "C" fn urma_interpose_get_counters(out: *mut Counters) -> c_int {
    guard(-1, || {
        if out.is_null() {
            return -1;
        }
        // SAFETY: non-NULL, writable (the caller's contract).
        unsafe { *out = faults::counters() };
        0
    })
}

/// Opens a trace file (`trace_line::open_trace_file`: created 0600 or emptied, never a link or
/// another user's file); NULL closes it. 0, or -1 when it cannot be opened so.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn urma_interpose_trace_open(path: *const c_char) -> c_int {
    guard(-1, || {
        let p = if path.is_null() {
            None
        } else {
            // SAFETY: non-NULL NUL-terminated string (the caller's contract).
            match unsafe { CStr::from_ptr(path) }.to_str() {
                Ok(s) => Some(s.to_string()),
                Err(_) => return -1,
            }
        };
        match trace::SINK.open_file(p.as_deref()) {
            Ok(()) => 0,
            Err(e) => {
                crate::say!("urma-interpose: trace file: {e}");
                -1
            }
        }
    })
}

/// Starts (clearing) or stops the in-memory capture.
#[no_mangle]
pub extern "C" fn urma_interpose_trace_capture(on: bool) {
    guard((), || trace::SINK.capture(on))
}

/// Takes the captured lines as one malloc'd NUL-terminated string, each line ending with
/// '\n'; `*len` (if not NULL) gets its length. Free with `urma_interpose_free`. NULL only when
/// out of memory.
///
/// # Safety
/// `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn urma_interpose_trace_take(len: *mut usize) -> *mut c_char {
    // SAFETY: len is NULL or writable (the caller's contract).
    guard(std::ptr::null_mut(), || unsafe { trace::SINK.take_c(len) })
}

/// Frees a string returned by `urma_interpose_trace_take`.
///
/// # Safety
/// `p` is NULL or a pointer returned by `urma_interpose_trace_take`, freed once.
#[no_mangle]
pub unsafe extern "C" fn urma_interpose_free(p: *mut c_void) {
    // SAFETY: the caller's contract: NULL or our malloc'd pointer.
    guard((), || unsafe { libc::free(p) })
}
