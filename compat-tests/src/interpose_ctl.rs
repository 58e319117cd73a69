//! Safe wrappers over the interposition layer's control API (`urma_interpose_*`, see
//! `urma-interpose/include/urma_interpose.h`).
//!
//! Resolved at run time with `dlsym(RTLD_DEFAULT, ..)`: they exist only when the process's
//! `liburma.so.0` is the layer (`LD_LIBRARY_PATH=<target>/<profile>/interpose:...` and
//! `URMA_INTERPOSE_REAL`). [`present`] tells; the other functions panic with a clear message
//! otherwise.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

use crate::loopback_ctl::{CrAction, Queue, ReleaseOrder};

/// Mirror of `urma_interpose_counters_t`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub send_wrs: u64,
    pub recv_wrs: u64,
    pub posts_failed_injected: u64,
    pub crs_from_provider: u64,
    pub crs_to_app: u64,
    pub crs_rewritten: u64,
    pub crs_dropped: u64,
    pub crs_duplicated: u64,
    pub crs_in_layer: u64,
    pub synthetic_events: u64,
}

struct Api {
    active: unsafe extern "C" fn() -> bool,
    reset: unsafe extern "C" fn(),
    fail_post: unsafe extern "C" fn(c_int, u64, c_int) -> c_int,
    fail_completion: unsafe extern "C" fn(u64, u32) -> c_int,
    cr_action: unsafe extern "C" fn(u64, c_int) -> c_int,
    send_cr_action: unsafe extern "C" fn(u64, c_int) -> c_int,
    recv_cr_action: unsafe extern "C" fn(u64, c_int) -> c_int,
    hold_crs: unsafe extern "C" fn(bool),
    release_crs: unsafe extern "C" fn(c_int, u64, u32) -> u64,
    set_cr_delay: unsafe extern "C" fn(u32),
    apply_knobs: unsafe extern "C" fn(*const c_char) -> c_int,
    get_counters: unsafe extern "C" fn(*mut Counters) -> c_int,
    trace_capture: unsafe extern "C" fn(bool),
    trace_take: unsafe extern "C" fn(*mut usize) -> *mut c_char,
    free: unsafe extern "C" fn(*mut c_void),
}

fn find(name: &str) -> *mut c_void {
    let n = CString::new(name).expect("name");
    // SAFETY: dlsym on the global scope with a valid C string.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, n.as_ptr()) }
}

/// Whether the layer is this process's `liburma.so.0` and has loaded the real library.
pub fn present() -> bool {
    let p = find("urma_interpose_active");
    if p.is_null() {
        return false;
    }
    // SAFETY: the layer's `bool urma_interpose_active(void)`.
    let f: unsafe extern "C" fn() -> bool = unsafe { crate::lib_under_test::fn_from_ptr(p) };
    // SAFETY: no arguments.
    unsafe { f() }
}

fn api() -> &'static Api {
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(|| {
        let get = |name: &str| {
            let p = find(name);
            assert!(
                !p.is_null(),
                "{name} not found: the liburma.so.0 in use is not the interposition layer \
                 (LD_LIBRARY_PATH=<target>/<profile>/interpose:... and URMA_INTERPOSE_REAL)"
            );
            p
        };
        macro_rules! f {
            ($name:literal) => {
                // SAFETY: the layer's export of that name; the fn-pointer type mirrors its
                // prototype in urma_interpose.h.
                unsafe { crate::lib_under_test::fn_from_ptr(get($name)) }
            };
        }
        Api {
            active: f!("urma_interpose_active"),
            reset: f!("urma_interpose_reset"),
            fail_post: f!("urma_interpose_fail_post"),
            fail_completion: f!("urma_interpose_fail_completion"),
            cr_action: f!("urma_interpose_cr_action"),
            send_cr_action: f!("urma_interpose_send_cr_action"),
            recv_cr_action: f!("urma_interpose_recv_cr_action"),
            hold_crs: f!("urma_interpose_hold_crs"),
            release_crs: f!("urma_interpose_release_crs"),
            set_cr_delay: f!("urma_interpose_set_cr_delay"),
            apply_knobs: f!("urma_interpose_apply_knobs"),
            get_counters: f!("urma_interpose_get_counters"),
            trace_capture: f!("urma_interpose_trace_capture"),
            trace_take: f!("urma_interpose_trace_take"),
            free: f!("urma_interpose_free"),
        }
    })
}

/// Resets faults (held CRs become ready), numbering, counters, trace sinks and names.
pub fn reset() {
    let a = api();
    // SAFETY: plain calls.
    unsafe {
        assert!((a.active)(), "the interposition layer has no real library");
        (a.reset)()
    }
}

pub fn counters() -> Counters {
    let mut c = Counters::default();
    // SAFETY: c is a writable mirror of urma_interpose_counters_t.
    assert_eq!(unsafe { (api().get_counters)(&mut c) }, 0);
    c
}

/// The `nth` WR of `queue` fails at the layer with `status` (not forwarded). The raw result
/// (0, or -1 for a bad argument).
pub fn fail_post(queue: Queue, nth: u64, status: i32) -> i32 {
    // SAFETY: plain values.
    unsafe { (api().fail_post)(queue as c_int, nth, status) }
}

/// The CR of the `nth` send WR gets `cr_status`. 0, or -1.
pub fn fail_completion(nth: u64, cr_status: u32) -> i32 {
    // SAFETY: plain values.
    unsafe { (api().fail_completion)(nth, cr_status) }
}

/// The `nth` CR polled (raw `action`: 1 drop, 2 duplicate). 0, or -1.
pub fn cr_action_raw(nth: u64, action: c_int) -> i32 {
    // SAFETY: plain values.
    unsafe { (api().cr_action)(nth, action) }
}

/// The CR of the `nth` send WR is dropped or duplicated.
pub fn send_cr_action(nth: u64, action: CrAction) -> i32 {
    // SAFETY: plain values.
    unsafe { (api().send_cr_action)(nth, action as c_int) }
}

/// The `nth` receive-side CR polled is dropped or duplicated.
pub fn recv_cr_action(nth: u64, action: CrAction) -> i32 {
    // SAFETY: plain values.
    unsafe { (api().recv_cr_action)(nth, action as c_int) }
}

pub fn hold_crs(on: bool) {
    // SAFETY: plain value.
    unsafe { (api().hold_crs)(on) }
}

/// Releases the held CRs (raw `order`: 0 FIFO, 1 reverse, 2 shuffle by `seed`). Returns the
/// count, or `u64::MAX` for an unknown order.
pub fn release_crs_raw(order: c_int, seed: u64, delay_ms: u32) -> u64 {
    // SAFETY: plain values.
    unsafe { (api().release_crs)(order, seed, delay_ms) }
}

/// Releases the held CRs in `order` after `delay_ms`. Returns how many.
pub fn release_crs(order: ReleaseOrder, delay_ms: u32) -> u64 {
    let (o, seed) = match order {
        ReleaseOrder::Fifo => (0, 0),
        ReleaseOrder::Reverse => (1, 0),
        ReleaseOrder::Shuffle(s) => (2, s),
    };
    release_crs_raw(o, seed, delay_ms)
}

pub fn set_cr_delay(ms: u32) {
    // SAFETY: plain value.
    unsafe { (api().set_cr_delay)(ms) }
}

/// Applies a knob spec of the layer. Returns the number of items applied.
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

pub fn trace_start() {
    // SAFETY: plain value.
    unsafe { (api().trace_capture)(true) }
}

pub fn trace_stop() {
    // SAFETY: plain value.
    unsafe { (api().trace_capture)(false) }
}

/// Takes the captured lines (one JSON object each).
pub fn trace_take() -> Vec<String> {
    let a = api();
    let mut n = 0usize;
    // SAFETY: n writable; the result is freed below with the layer's free.
    let p = unsafe { (a.trace_take)(&mut n) };
    assert!(!p.is_null(), "urma_interpose_trace_take: out of memory");
    // SAFETY: p is a NUL-terminated string of n bytes from the layer.
    let text = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    // SAFETY: p came from urma_interpose_trace_take, freed once.
    unsafe { (a.free)(p as *mut c_void) };
    text.lines().map(str::to_owned).collect()
}
