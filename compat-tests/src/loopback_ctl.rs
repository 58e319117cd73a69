//! Safe wrappers over the loopback provider's control API (`urma_loopback_*`, see
//! `urma-sys/loopback/include/urma_loopback.h`).
//!
//! The functions are resolved at run time with `dlsym` in the already loaded `liburma.so.0`
//! (they are not in the link-only stub that `urma-sys` links against); the first call panics
//! with a clear message if the `liburma.so.0` in use is not the loopback.

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::OnceLock;

/// Queue selector of [`fail_post`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    Send = 1,
    Recv = 2,
}

/// Action of [`cr_action`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrAction {
    Drop = 1,
    Duplicate = 2,
}

/// Order of [`release_crs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseOrder {
    Fifo,
    Reverse,
    /// Deterministic shuffle from the seed.
    Shuffle(u64),
}

/// Mirror of `urma_loopback_counters_t`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
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

struct Api {
    reset: unsafe extern "C" fn(),
    get_counters: unsafe extern "C" fn(*mut Counters) -> c_int,
    fail_post: unsafe extern "C" fn(c_int, u64, c_int) -> c_int,
    fail_completion: unsafe extern "C" fn(u64, u32) -> c_int,
    cr_action: unsafe extern "C" fn(u64, c_int) -> c_int,
    hold_crs: unsafe extern "C" fn(bool),
    release_crs: unsafe extern "C" fn(c_int, u64, u32) -> u64,
    set_cr_delay: unsafe extern "C" fn(u32),
    set_nocopy: unsafe extern "C" fn(bool),
    set_delete_timeout: unsafe extern "C" fn(u32),
    set_rnr_timeout: unsafe extern "C" fn(u32),
    apply_knobs: unsafe extern "C" fn(*const c_char) -> c_int,
    trace_open: unsafe extern "C" fn(*const c_char) -> c_int,
    trace_capture: unsafe extern "C" fn(bool),
    trace_take: unsafe extern "C" fn(*mut usize) -> *mut c_char,
    free: unsafe extern "C" fn(*mut c_void),
}

fn api() -> &'static Api {
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(|| {
        let find = |name: &str| -> *mut c_void {
            let n = CString::new(name).expect("name");
            // SAFETY: dlsym on the global scope with a valid C string.
            let mut p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, n.as_ptr()) };
            if p.is_null() {
                // Not linked into this binary (e.g. --as-needed dropped it): load it globally.
                let lib = CString::new("liburma.so.0").expect("name");
                // SAFETY: valid C string and flags.
                let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
                if !h.is_null() {
                    // SAFETY: live handle, valid C string.
                    p = unsafe { libc::dlsym(h, n.as_ptr()) };
                }
            }
            assert!(
                !p.is_null(),
                "{name} not found: the liburma.so.0 in use is not the loopback provider \
                 (run with LD_LIBRARY_PATH=<target-dir>/<profile>)"
            );
            p
        };
        macro_rules! f {
            ($name:literal) => {
                // SAFETY: the symbol is the loopback's exported function of that name; the
                // fn-pointer type mirrors its prototype in urma_loopback.h.
                unsafe { crate::lib_under_test::fn_from_ptr(find($name)) }
            };
        }
        Api {
            reset: f!("urma_loopback_reset"),
            get_counters: f!("urma_loopback_get_counters"),
            fail_post: f!("urma_loopback_fail_post"),
            fail_completion: f!("urma_loopback_fail_completion"),
            cr_action: f!("urma_loopback_cr_action"),
            hold_crs: f!("urma_loopback_hold_crs"),
            release_crs: f!("urma_loopback_release_crs"),
            set_cr_delay: f!("urma_loopback_set_cr_delay"),
            set_nocopy: f!("urma_loopback_set_nocopy"),
            set_delete_timeout: f!("urma_loopback_set_delete_timeout"),
            set_rnr_timeout: f!("urma_loopback_set_rnr_timeout"),
            apply_knobs: f!("urma_loopback_apply_knobs"),
            trace_open: f!("urma_loopback_trace_open"),
            trace_capture: f!("urma_loopback_trace_capture"),
            trace_take: f!("urma_loopback_trace_take"),
            free: f!("urma_loopback_free"),
        }
    })
}

/// Resets knobs (held CRs released FIFO first), counters, trace sinks and symbolic names.
pub fn reset() {
    // SAFETY: resolved loopback function, no arguments.
    unsafe { (api().reset)() }
}

/// Current counters.
pub fn counters() -> Counters {
    let mut c = Counters::default();
    // SAFETY: c is a valid, writable mirror of urma_loopback_counters_t.
    let r = unsafe { (api().get_counters)(&mut c) };
    assert_eq!(r, 0);
    c
}

/// The `nth` WR (1-based since reset) of `queue` is rejected by its post call with `status`.
pub fn fail_post(queue: Queue, nth: u64, status: i32) {
    // SAFETY: plain values.
    assert_eq!(unsafe { (api().fail_post)(queue as c_int, nth, status) }, 0);
}

/// The `nth` send WR completes with `cr_status` (nothing executed, CR always generated).
pub fn fail_completion(nth: u64, cr_status: u32) {
    // SAFETY: plain values.
    assert_eq!(unsafe { (api().fail_completion)(nth, cr_status) }, 0);
}

/// The `nth` CR generated is dropped or duplicated.
pub fn cr_action(nth: u64, action: CrAction) {
    // SAFETY: plain values.
    assert_eq!(unsafe { (api().cr_action)(nth, action as c_int) }, 0);
}

/// Holds (true) or stops holding (false) generated CRs.
pub fn hold_crs(hold: bool) {
    // SAFETY: plain value.
    unsafe { (api().hold_crs)(hold) }
}

/// Releases held CRs in `order` after `delay_ms` (0 = now). Returns how many.
pub fn release_crs(order: ReleaseOrder, delay_ms: u32) -> u64 {
    let (o, seed) = match order {
        ReleaseOrder::Fifo => (0, 0),
        ReleaseOrder::Reverse => (1, 0),
        ReleaseOrder::Shuffle(s) => (2, s),
    };
    // SAFETY: plain values.
    unsafe { (api().release_crs)(o, seed, delay_ms) }
}

/// Delays every CR generated from now on by `ms` (0 = off).
pub fn set_cr_delay(ms: u32) {
    // SAFETY: plain value.
    unsafe { (api().set_cr_delay)(ms) }
}

/// No-copy mode (validate and complete, but copy no payload).
pub fn set_nocopy(on: bool) {
    // SAFETY: plain value.
    unsafe { (api().set_nocopy)(on) }
}

/// Receiver-not-ready timeout: a SEND/SEND_IMM/WRITE_IMM finding no recv WR is parked and
/// delivered by a later recv post, or fails with `URMA_CR_RNR_RETRY_CNT_EXC_ERR` after `ms`
/// (default 200; 0 = fail at once, the old behaviour).
pub fn set_rnr_timeout(ms: u32) {
    // SAFETY: plain value.
    unsafe { (api().set_rnr_timeout)(ms) }
}

/// Bound of `urma_delete_jfc` waiting for unacked events.
pub fn set_delete_timeout(ms: u32) {
    // SAFETY: plain value.
    unsafe { (api().set_delete_timeout)(ms) }
}

/// Applies a knob spec (syntax of `URMA_LOOPBACK_KNOBS`). Returns the number of items applied.
pub fn apply_knobs(spec: &str) -> Result<u32, String> {
    let c = CString::new(spec).map_err(|e| e.to_string())?;
    // SAFETY: valid C string.
    let r = unsafe { (api().apply_knobs)(c.as_ptr()) };
    if r < 0 {
        Err(format!("knob spec does not parse: {spec}"))
    } else {
        Ok(r as u32)
    }
}

/// Opens (truncating) a trace file, or closes it with `None`.
pub fn trace_open(path: Option<&std::path::Path>) -> Result<(), String> {
    let c = path.map(|p| CString::new(p.as_os_str().as_encoded_bytes()).expect("path"));
    let p = c.as_ref().map(|c| c.as_ptr()).unwrap_or(std::ptr::null());
    // SAFETY: NULL or a valid C string.
    if unsafe { (api().trace_open)(p) } == 0 {
        Ok(())
    } else {
        Err(format!("cannot open trace file {path:?}"))
    }
}

/// Starts (clearing) the in-memory trace capture.
pub fn trace_start() {
    // SAFETY: plain value.
    unsafe { (api().trace_capture)(true) }
}

/// Stops the in-memory trace capture (lines are kept until [`trace_take`]).
pub fn trace_stop() {
    // SAFETY: plain value.
    unsafe { (api().trace_capture)(false) }
}

/// Takes the captured trace lines (one JSON object each).
pub fn trace_take() -> Vec<String> {
    let mut len = 0usize;
    // SAFETY: len is writable.
    let p = unsafe { (api().trace_take)(&mut len) };
    assert!(!p.is_null(), "urma_loopback_trace_take: out of memory");
    // SAFETY: p points to len bytes + NUL, allocated by the loopback.
    let text = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
    let s = String::from_utf8_lossy(text).into_owned();
    // SAFETY: p came from urma_loopback_trace_take.
    unsafe { (api().free)(p as *mut c_void) };
    s.lines().map(str::to_owned).collect()
}

/// Convenience: runs `f` with a fresh capture and returns the lines it produced.
pub fn capture_trace<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    trace_start();
    let r = f();
    trace_stop();
    (r, trace_take())
}
