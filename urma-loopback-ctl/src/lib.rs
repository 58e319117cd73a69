//! The one control plane of the software loopback URMA provider (`urma-loopback`, the
//! `liburma.so.0` of the tests).
//!
//! The provider exports a test-control API, `urma_loopback_*`, declared for C in
//! `urma-loopback/include/urma_loopback.h`. This crate is its single Rust definition:
//!
//! * [`Counters`], the `#[repr(C)]` layout of `urma_loopback_counters_t`, with the field table
//!   [`Counters::FIELDS`] that the header probe test (`urma-loopback/tests/header.rs`) compares
//!   with the C compiler's view of the header;
//! * the knob selectors: [`Queue`], [`CrAction`], [`ReleaseOrder`] and their raw `c_int` values;
//! * [`Api`], the typed table of the control functions, resolved with `dlsym` in the
//!   `liburma.so.0` actually loaded in the process ([`api`]), and safe wrappers over it
//!   ([`reset`], [`counters`], [`fail_post`], ...).
//!
//! The provider builds its exports against these types: `urma-loopback/src/ctl.rs` fills a
//! constant [`Api`] with its own functions, so a prototype that drifts from the binding stops
//! the provider from compiling.

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::OnceLock;

/// `URMA_LOOPBACK_Q_SEND`: the send queues (`urma_post_jfs_wr`, `urma_post_jetty_send_wr`).
pub const Q_SEND: c_int = 1;
/// `URMA_LOOPBACK_Q_RECV`: the receive queues (`urma_post_jfr_wr`, `urma_post_jetty_recv_wr`).
pub const Q_RECV: c_int = 2;
/// `URMA_LOOPBACK_CR_DROP`.
pub const CR_DROP: c_int = 1;
/// `URMA_LOOPBACK_CR_DUP`.
pub const CR_DUP: c_int = 2;
/// `URMA_LOOPBACK_ORDER_FIFO`.
pub const ORDER_FIFO: c_int = 0;
/// `URMA_LOOPBACK_ORDER_REVERSE`.
pub const ORDER_REVERSE: c_int = 1;
/// `URMA_LOOPBACK_ORDER_SHUFFLE`.
pub const ORDER_SHUFFLE: c_int = 2;

/// The `#define`s of urma_loopback.h with their values (checked against the header by a C probe).
pub const CONSTANTS: [(&str, c_int); 7] = [
    ("URMA_LOOPBACK_Q_SEND", Q_SEND),
    ("URMA_LOOPBACK_Q_RECV", Q_RECV),
    ("URMA_LOOPBACK_CR_DROP", CR_DROP),
    ("URMA_LOOPBACK_CR_DUP", CR_DUP),
    ("URMA_LOOPBACK_ORDER_FIFO", ORDER_FIFO),
    ("URMA_LOOPBACK_ORDER_REVERSE", ORDER_REVERSE),
    ("URMA_LOOPBACK_ORDER_SHUFFLE", ORDER_SHUFFLE),
];

/// Queue selector of [`fail_post`].
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    Send = Q_SEND,
    Recv = Q_RECV,
}

/// Action of [`cr_action`].
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrAction {
    Drop = CR_DROP,
    Duplicate = CR_DUP,
}

/// Order of [`release_crs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseOrder {
    Fifo,
    Reverse,
    /// Deterministic shuffle from the seed.
    Shuffle(u64),
}

impl ReleaseOrder {
    /// The `(order, seed)` arguments of `urma_loopback_release_crs`.
    pub fn raw(self) -> (c_int, u64) {
        match self {
            ReleaseOrder::Fifo => (ORDER_FIFO, 0),
            ReleaseOrder::Reverse => (ORDER_REVERSE, 0),
            ReleaseOrder::Shuffle(s) => (ORDER_SHUFFLE, s),
        }
    }
}

/// Declares [`Counters`] and its field table from one list, so the two cannot disagree.
macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// `urma_loopback_counters_t`: every field a `uint64_t`, in the header's order. The
        /// counters count since process start or the last [`reset`]; the `live_*` fields and
        /// `crs_held` / `crs_in_flight` are gauges.
        #[repr(C)]
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
        pub struct Counters {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Counters {
            /// `(field name, byte offset)` of every field, in declaration order.
            pub const FIELDS: &'static [(&'static str, usize)] =
                &[$((stringify!($name), std::mem::offset_of!(Counters, $name)),)*];
        }
    };
}

counters! {
    /// Send WRs accepted by post calls.
    send_wrs,
    /// Recv WRs accepted by post calls.
    recv_wrs,
    /// Post calls that failed (one per failing call).
    post_errors,
    /// CRs generated (before drop/dup).
    crs_generated,
    /// CRs returned by `urma_poll_jfc`.
    crs_polled,
    /// CRs dropped by [`cr_action`].
    crs_dropped,
    /// CRs delivered twice by [`cr_action`].
    crs_duplicated,
    /// CRs currently held ([`hold_crs`]).
    crs_held,
    /// CRs pushed into a JFC already holding `depth` CRs (kept).
    crs_overflow,
    /// Generated CRs with a status other than success.
    crs_error,
    /// Sends / write-imms failed with `URMA_CR_RNR_RETRY_CNT_EXC_ERR` (at once or expired).
    rnr_errors,
    /// Payload bytes actually copied.
    bytes_copied,
    /// Payload bytes of successful transfers (also in no-copy mode).
    bytes_transferred,
    /// Completion events returned by `urma_wait_jfc`.
    events_reported,
    /// Events acknowledged with `urma_ack_jfc`.
    events_acked,
    /// CRs held or waiting for a delay (not yet in a JFC).
    crs_in_flight,
    live_contexts,
    live_jfce,
    live_jfc,
    live_jfs,
    live_jfr,
    live_jetty,
    /// Imported jetties and JFRs.
    live_tjetty,
    /// Registered segments.
    live_segs,
    live_imported_segs,
    live_token_ids,
    /// Sends / write-imms parked because no recv WR was posted.
    rnr_parked,
    /// Parked messages delivered by a later recv post.
    rnr_delivered_late,
    /// Parked messages failed (RNR CR) after the RNR timeout.
    rnr_expired,
}

/// The control functions, with the prototypes of urma_loopback.h.
///
/// Fields are named after the symbol without its `urma_loopback_` prefix.
#[derive(Clone, Copy)]
pub struct Api {
    pub reset: unsafe extern "C" fn(),
    pub get_counters: unsafe extern "C" fn(*mut Counters) -> c_int,
    pub fail_post: unsafe extern "C" fn(c_int, u64, c_int) -> c_int,
    pub fail_completion: unsafe extern "C" fn(u64, u32) -> c_int,
    pub cr_action: unsafe extern "C" fn(u64, c_int) -> c_int,
    pub hold_crs: unsafe extern "C" fn(bool),
    pub release_crs: unsafe extern "C" fn(c_int, u64, u32) -> u64,
    pub set_cr_delay: unsafe extern "C" fn(u32),
    pub set_nocopy: unsafe extern "C" fn(bool),
    pub set_delete_timeout: unsafe extern "C" fn(u32),
    pub set_rnr_timeout: unsafe extern "C" fn(u32),
    pub apply_knobs: unsafe extern "C" fn(*const c_char) -> c_int,
    pub trace_open: unsafe extern "C" fn(*const c_char) -> c_int,
    pub trace_capture: unsafe extern "C" fn(bool),
    pub trace_take: unsafe extern "C" fn(*mut usize) -> *mut c_char,
    pub free: unsafe extern "C" fn(*mut c_void),
}

/// Names of the exported control functions, in [`Api`] field order.
pub const SYMBOLS: [&str; 16] = [
    "urma_loopback_reset",
    "urma_loopback_get_counters",
    "urma_loopback_fail_post",
    "urma_loopback_fail_completion",
    "urma_loopback_cr_action",
    "urma_loopback_hold_crs",
    "urma_loopback_release_crs",
    "urma_loopback_set_cr_delay",
    "urma_loopback_set_nocopy",
    "urma_loopback_set_delete_timeout",
    "urma_loopback_set_rnr_timeout",
    "urma_loopback_apply_knobs",
    "urma_loopback_trace_open",
    "urma_loopback_trace_capture",
    "urma_loopback_trace_take",
    "urma_loopback_free",
];

/// Finds `name` in the process: first in the global scope, else in `liburma.so.0` loaded (or
/// already present) with `RTLD_GLOBAL` (a binary linked with `--as-needed` may not have it yet).
fn find(name: &str) -> Result<*mut c_void, String> {
    let n = CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: dlsym on the global scope with a valid C string.
    let mut p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, n.as_ptr()) };
    if p.is_null() {
        // SAFETY: valid C string and flags; the handle is kept for the life of the process.
        let h =
            unsafe { libc::dlopen(c"liburma.so.0".as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if !h.is_null() {
            // SAFETY: live handle, valid C string.
            p = unsafe { libc::dlsym(h, n.as_ptr()) };
        }
    }
    if p.is_null() {
        Err(format!(
            "{name} not found: the liburma.so.0 in use is not the loopback provider \
             (run with LD_LIBRARY_PATH=<target-dir>/<profile>)"
        ))
    } else {
        Ok(p)
    }
}

/// Converts a symbol address into the function-pointer type `F`.
///
/// # Safety
/// `p` must be the address of a function whose prototype is `F`.
unsafe fn as_fn<F: Copy>(p: *mut c_void) -> F {
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>()) };
    // SAFETY: same size (checked at compile time); the caller vouches for the prototype.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

impl Api {
    fn load() -> Result<Api, String> {
        let mut p = [std::ptr::null_mut(); SYMBOLS.len()];
        for (slot, name) in p.iter_mut().zip(SYMBOLS) {
            *slot = find(name)?;
        }
        // SAFETY: p[i] is the loopback's exported SYMBOLS[i], whose prototype (urma_loopback.h,
        // and the provider's own `const _: Api` check) is the type of the field filled with it.
        unsafe {
            Ok(Api {
                reset: as_fn(p[0]),
                get_counters: as_fn(p[1]),
                fail_post: as_fn(p[2]),
                fail_completion: as_fn(p[3]),
                cr_action: as_fn(p[4]),
                hold_crs: as_fn(p[5]),
                release_crs: as_fn(p[6]),
                set_cr_delay: as_fn(p[7]),
                set_nocopy: as_fn(p[8]),
                set_delete_timeout: as_fn(p[9]),
                set_rnr_timeout: as_fn(p[10]),
                apply_knobs: as_fn(p[11]),
                trace_open: as_fn(p[12]),
                trace_capture: as_fn(p[13]),
                trace_take: as_fn(p[14]),
                free: as_fn(p[15]),
            })
        }
    }
}

/// The control functions of the loaded loopback, resolved once. Panics with a clear message if
/// the `liburma.so.0` in the process is not the loopback provider.
pub fn api() -> &'static Api {
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(|| Api::load().unwrap_or_else(|e| panic!("{e}")))
}

/// Resets knobs (held CRs released FIFO first), counters, trace sinks and symbolic names.
pub fn reset() {
    // SAFETY: resolved loopback function, no arguments.
    unsafe { (api().reset)() }
}

/// Current counters.
pub fn counters() -> Counters {
    let mut c = Counters::default();
    // SAFETY: c is a valid, writable urma_loopback_counters_t.
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
    let (o, seed) = order.raw();
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
/// (default 200; 0 = fail at once).
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

/// Runs `f` with a fresh capture and returns the lines it produced.
pub fn capture_trace<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    trace_start();
    let r = f();
    trace_stop();
    (r, trace_take())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_field_table_covers_the_struct_without_gaps() {
        let mut next = 0;
        for (name, off) in Counters::FIELDS {
            assert_eq!(*off, next, "{name}");
            next += 8;
        }
        assert_eq!(next, std::mem::size_of::<Counters>());
        assert_eq!(Counters::FIELDS.len(), 29);
    }

    #[test]
    fn enums_carry_the_header_values() {
        assert_eq!(Queue::Send as c_int, 1);
        assert_eq!(Queue::Recv as c_int, 2);
        assert_eq!(CrAction::Drop as c_int, 1);
        assert_eq!(CrAction::Duplicate as c_int, 2);
        assert_eq!(ReleaseOrder::Shuffle(9).raw(), (2, 9));
        assert_eq!(ReleaseOrder::Reverse.raw(), (1, 0));
    }
}
