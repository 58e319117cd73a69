//! The one test-control plane of the software loopback URMA provider (`urma-loopback`, the
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
//! * [`interpose`]: the same for the interposition layer's `urma_interpose_*`
//!   (`urma-interpose/include/urma_interpose.h`): its counters, constants and binding;
//! * [`forbid`]: the binding refuses every later use (the harness's hardware mode);
//! * [`plugin`]: the plugin's file names and its handle in the process.
//!
//! What the provider and the layer both run on (the opcode table, the fault plane, the knob-spec
//! syntax, the trace, the cross-process message format, the selector values re-exported here)
//! is the crate `urma-datapath`.
//!
//! Both libraries build their exports against these types: `urma-loopback/src/ctl.rs` fills a
//! constant [`Api`], `urma-interpose/src/ctl.rs` a constant [`interpose::Api`], with their own
//! functions, so a prototype that drifts from the binding stops the library from compiling; and
//! each header is compared with the binding's field tables, constants and prototypes by a C probe
//! (`tests/header.rs` of each crate).

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

pub use urma_datapath::{
    CR_DROP, CR_DUP, ORDER_FIFO, ORDER_REVERSE, ORDER_SHUFFLE, Q_RECV, Q_SEND,
};

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

/// Declares a counters struct of a C header (every field a `uint64_t`) and its field table
/// from one list, so the two cannot disagree.
macro_rules! counters {
    ($(#[$sdoc:meta])* $Struct:ident { $($(#[$doc:meta])* $name:ident),* $(,)? }) => {
        $(#[$sdoc])*
        #[repr(C)]
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
        pub struct $Struct {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl $Struct {
            /// `(field name, byte offset)` of every field, in declaration order.
            pub const FIELDS: &'static [(&'static str, usize)] =
                &[$((stringify!($name), std::mem::offset_of!($Struct, $name)),)*];

            /// Every counter at 0 (usable in a `static`).
            pub const ZERO: $Struct = $Struct { $($name: 0,)* };
        }
    };
}

counters! {
    /// `urma_loopback_counters_t`: every field a `uint64_t`, in the header's order. The
    /// counters count since process start or the last [`reset`]; the `live_*` fields and
    /// `crs_held` / `crs_in_flight` are gauges.
    Counters {
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
    /// Requests of other processes refused by a token check (imports, and the segment or
    /// jetty token of a work request): each closed its connection.
    peer_refusals,
    /// Objects (segments by token id, jetties, JFRs) refused at least once: each is logged once.
    peer_refused_objects,
    /// Lock-order inversions the provider's debug build found since load (`ranked_lock`: each
    /// panicked before taking the lock, and its export returned an error); always 0 in a
    /// release build, which checks nothing. Not cleared by a reset.
    lock_order_violations,
}
}

/// Declares the binding of a control API: the struct of its functions (fields named after the
/// symbols without their prefix), the table of the symbols with their C prototypes (what a C
/// compiler checks the header against), and the resolution of every symbol, all from one list,
/// so a field's Rust type and its C prototype are written side by side. With `+ knobs`, the
/// binding also has the fault and trace controls both libraries share (after its own functions)
/// and `knobs()`, their [`Knobs`].
macro_rules! binding {
    ($(#[$sdoc:meta])* $Api:ident, $prefix:literal + knobs { $($own:tt)* }) => {
        binding! {
            $(#[$sdoc])* $Api, $prefix {
                $($own)*
                fail_post: unsafe extern "C" fn(c_int, u64, c_int) -> c_int =
                    "int (*)(int, uint64_t, int)",
                fail_completion: unsafe extern "C" fn(u64, u32) -> c_int =
                    "int (*)(uint64_t, uint32_t)",
                cr_action: unsafe extern "C" fn(u64, c_int) -> c_int = "int (*)(uint64_t, int)",
                hold_crs: unsafe extern "C" fn(bool) = "void (*)(bool)",
                release_crs: unsafe extern "C" fn(c_int, u64, u32) -> u64 =
                    "uint64_t (*)(int, uint64_t, uint32_t)",
                set_cr_delay: unsafe extern "C" fn(u32) = "void (*)(uint32_t)",
                apply_knobs: unsafe extern "C" fn(*const c_char) -> c_int =
                    "int (*)(const char *)",
                trace_capture: unsafe extern "C" fn(bool) = "void (*)(bool)",
                trace_take: unsafe extern "C" fn(*mut usize) -> *mut c_char =
                    "char *(*)(size_t *)",
                free: unsafe extern "C" fn(*mut c_void) = "void (*)(void *)",
            }
        }

        impl $Api {
            /// The fault and trace controls this binding shares with the other library's.
            pub fn knobs(&self) -> $crate::Knobs {
                $crate::Knobs {
                    prefix: $prefix,
                    fail_post: self.fail_post,
                    fail_completion: self.fail_completion,
                    cr_action: self.cr_action,
                    hold_crs: self.hold_crs,
                    release_crs: self.release_crs,
                    set_cr_delay: self.set_cr_delay,
                    apply_knobs: self.apply_knobs,
                    trace_capture: self.trace_capture,
                    trace_take: self.trace_take,
                    free: self.free,
                }
            }
        }
    };
    ($(#[$sdoc:meta])* $Api:ident, $prefix:literal {
        $($(#[$doc:meta])* $field:ident: $ty:ty = $c:literal,)*
    }) => {
        $(#[$sdoc])*
        #[derive(Clone, Copy)]
        pub struct $Api {
            $($(#[$doc])* pub $field: $ty,)*
        }

        impl $Api {
            /// Every exported symbol, in field order, with the C type of a pointer to it (as
            /// `__builtin_types_compatible_p` compares it with the header's declaration).
            pub const PROTOTYPES: &'static [(&'static str, &'static str)] =
                &[$((concat!($prefix, stringify!($field)), $c),)*];

            /// Resolves every function with `find` (a symbol's address, or why there is none).
            pub fn resolve(
                find: impl Fn(&str) -> Result<*mut std::ffi::c_void, String>,
            ) -> Result<$Api, String> {
                Ok($Api {
                    $($field: {
                        let p = find(concat!($prefix, stringify!($field)))?;
                        // SAFETY: p is the library's export of that name, declared in its header
                        // with the prototype of this field's type (the header probe checks the
                        // header against PROTOTYPES, the library fills a constant of this type
                        // with its exports).
                        unsafe { $crate::as_fn::<$ty>(p) }
                    },)*
                })
            }
        }
    };
}

binding! {
    /// The control functions, with the prototypes of urma_loopback.h.
    ///
    /// Fields are named after the symbol without its `urma_loopback_` prefix.
    Api, "urma_loopback_" + knobs {
        reset: unsafe extern "C" fn() = "void (*)(void)",
        get_counters: unsafe extern "C" fn(*mut Counters) -> c_int =
            "int (*)(urma_loopback_counters_t *)",
        set_nocopy: unsafe extern "C" fn(bool) = "void (*)(bool)",
        set_delete_timeout: unsafe extern "C" fn(u32) = "void (*)(uint32_t)",
        set_rnr_timeout: unsafe extern "C" fn(u32) = "void (*)(uint32_t)",
        trace_open: unsafe extern "C" fn(*const c_char) -> c_int = "int (*)(const char *)",
    }
}

/// Finds `name` in the process: first in the global scope, else in `liburma.so.0` loaded (or
/// already present) with `RTLD_GLOBAL` (a binary linked with `--as-needed` may not have it yet),
/// else in the loopback plugin of a genuine core ([`plugin::symbol`]).
/// `None` if neither has it. Shared with the interposition layer's binding (same lookup).
pub fn symbol(name: &str) -> Option<*mut c_void> {
    let n = CString::new(name).ok()?;
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
        // The loopback as a plugin of the genuine core: not in the global scope.
        return plugin::symbol(name);
    }
    Some(p)
}

fn find(name: &str) -> Result<*mut c_void, String> {
    symbol(name).ok_or_else(|| {
        format!(
            "{name} not found: the liburma.so.0 in use is not the loopback provider \
             (run with LD_LIBRARY_PATH=<target-dir>/<profile>)"
        )
    })
}

/// Converts a symbol address into the function-pointer type `F`.
///
/// # Safety
/// `p` must be the address of a function whose prototype is `F`.
pub unsafe fn as_fn<F: Copy>(p: *mut c_void) -> F {
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>()) };
    // SAFETY: same size (checked at compile time); the caller vouches for the prototype.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

/// The fault and trace controls the loopback (`urma_loopback_*`) and the interposition layer
/// (`urma_interpose_*`, crate `urma-interpose`) share: same prototypes, same meaning, same
/// knob-spec and trace-line formats. Each binding fills one from its own symbols; the safe
/// wrappers below are the one implementation both use.
#[derive(Clone, Copy)]
pub struct Knobs {
    /// Symbol prefix (`urma_loopback_`, `urma_interpose_`), for messages.
    pub prefix: &'static str,
    pub fail_post: unsafe extern "C" fn(c_int, u64, c_int) -> c_int,
    pub fail_completion: unsafe extern "C" fn(u64, u32) -> c_int,
    pub cr_action: unsafe extern "C" fn(u64, c_int) -> c_int,
    pub hold_crs: unsafe extern "C" fn(bool),
    pub release_crs: unsafe extern "C" fn(c_int, u64, u32) -> u64,
    pub set_cr_delay: unsafe extern "C" fn(u32),
    pub apply_knobs: unsafe extern "C" fn(*const c_char) -> c_int,
    pub trace_capture: unsafe extern "C" fn(bool),
    pub trace_take: unsafe extern "C" fn(*mut usize) -> *mut c_char,
    pub free: unsafe extern "C" fn(*mut c_void),
}

impl Knobs {
    /// The `nth` WR (1-based since reset) of `queue` is rejected by its post call with
    /// `status`. The raw result: 0, or -1 for a bad argument.
    pub fn fail_post(&self, queue: Queue, nth: u64, status: i32) -> c_int {
        // SAFETY: plain values.
        unsafe { (self.fail_post)(queue as c_int, nth, status) }
    }

    /// The `nth` send WR completes with `cr_status`. 0, or -1.
    pub fn fail_completion(&self, nth: u64, cr_status: u32) -> c_int {
        // SAFETY: plain values.
        unsafe { (self.fail_completion)(nth, cr_status) }
    }

    /// The `nth` CR is dropped or duplicated (raw `action`, so bad values can be tested).
    /// 0, or -1.
    pub fn cr_action_raw(&self, nth: u64, action: c_int) -> c_int {
        // SAFETY: plain values.
        unsafe { (self.cr_action)(nth, action) }
    }

    /// Holds (true) or stops holding (false) CRs.
    pub fn hold_crs(&self, on: bool) {
        // SAFETY: plain value.
        unsafe { (self.hold_crs)(on) }
    }

    /// Releases held CRs (raw `order`, so bad values can be tested) after `delay_ms`.
    /// Returns how many, or `u64::MAX` for an unknown order.
    pub fn release_crs_raw(&self, order: c_int, seed: u64, delay_ms: u32) -> u64 {
        // SAFETY: plain values.
        unsafe { (self.release_crs)(order, seed, delay_ms) }
    }

    /// Releases held CRs in `order` after `delay_ms` (0 = now). Returns how many.
    pub fn release_crs(&self, order: ReleaseOrder, delay_ms: u32) -> u64 {
        let (o, seed) = order.raw();
        self.release_crs_raw(o, seed, delay_ms)
    }

    /// Delays every CR from now on by `ms` (0 = off).
    pub fn set_cr_delay(&self, ms: u32) {
        // SAFETY: plain value.
        unsafe { (self.set_cr_delay)(ms) }
    }

    /// Applies a knob spec. Returns the number of items applied.
    pub fn apply_knobs(&self, spec: &str) -> Result<u32, String> {
        let c = CString::new(spec).map_err(|e| e.to_string())?;
        // SAFETY: valid C string.
        let r = unsafe { (self.apply_knobs)(c.as_ptr()) };
        u32::try_from(r).map_err(|_| format!("knob spec does not parse: {spec}"))
    }

    /// Starts (clearing) or stops the in-memory trace capture.
    pub fn trace_capture(&self, on: bool) {
        // SAFETY: plain value.
        unsafe { (self.trace_capture)(on) }
    }

    /// Takes the captured trace lines (one JSON object each).
    pub fn trace_take(&self) -> Vec<String> {
        let mut len = 0usize;
        // SAFETY: len is writable.
        let p = unsafe { (self.trace_take)(&mut len) };
        assert!(!p.is_null(), "{}trace_take: out of memory", self.prefix);
        // SAFETY: p points to len bytes + NUL, allocated by the library.
        let text = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
        let s = String::from_utf8_lossy(text).into_owned();
        // SAFETY: p came from the same library's trace_take, freed once with its free.
        unsafe { (self.free)(p as *mut c_void) };
        s.lines().map(str::to_owned).collect()
    }
}

static FORBIDDEN: OnceLock<&'static str> = OnceLock::new();
static ATTEMPTS: AtomicU64 = AtomicU64::new(0);

/// Forbids this binding for the rest of the process: every later [`api`] access (so every
/// wrapper of this crate) is counted and panics with `why` instead of calling the provider. The
/// harness's hardware mode (`compat --device`) uses it to show that it never calls
/// `urma_loopback_*`, whatever the provider underneath exports. Err if it was already forbidden.
pub fn forbid(why: &'static str) -> Result<(), String> {
    FORBIDDEN
        .set(why)
        .map_err(|_| "the loopback control binding is already forbidden".to_string())
}

/// Accesses of the binding ([`api`]) since it was [`forbid`]den (0 while it is allowed).
pub fn forbidden_attempts() -> u64 {
    ATTEMPTS.load(Ordering::Acquire)
}

/// The control functions of the loaded loopback, resolved once. Panics with a clear message if
/// the `liburma.so.0` in the process is not the loopback provider, or if the binding is
/// [`forbid`]den.
pub fn api() -> &'static Api {
    if let Some(why) = FORBIDDEN.get() {
        ATTEMPTS.fetch_add(1, Ordering::AcqRel);
        panic!("the loopback control API (urma_loopback_*) was called: {why}");
    }
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(|| Api::resolve(find).unwrap_or_else(|e| panic!("{e}")))
}

/// Resets knobs (held CRs released FIFO first), counters, trace sinks and symbolic names.
pub fn reset() {
    // An inversion inside the provider is caught at its C boundary and only seen as an error
    // return, which a test expecting errors would not notice: every reset (between the
    // harness's scenarios, and in the tests) checks that none happened in this process.
    let found = counters().lock_order_violations;
    assert_eq!(
        found, 0,
        "the loopback found {found} lock-order inversion(s) in this process (its stderr names \
         the locks)"
    );
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
    assert_eq!(api().knobs().fail_post(queue, nth, status), 0);
}

/// The `nth` send WR completes with `cr_status` (nothing executed, CR always generated).
pub fn fail_completion(nth: u64, cr_status: u32) {
    assert_eq!(api().knobs().fail_completion(nth, cr_status), 0);
}

/// The `nth` CR generated is dropped or duplicated.
pub fn cr_action(nth: u64, action: CrAction) {
    assert_eq!(api().knobs().cr_action_raw(nth, action as c_int), 0);
}

/// Holds (true) or stops holding (false) generated CRs.
pub fn hold_crs(hold: bool) {
    api().knobs().hold_crs(hold)
}

/// Releases held CRs in `order` after `delay_ms` (0 = now). Returns how many.
pub fn release_crs(order: ReleaseOrder, delay_ms: u32) -> u64 {
    api().knobs().release_crs(order, delay_ms)
}

/// Delays every CR generated from now on by `ms` (0 = off).
pub fn set_cr_delay(ms: u32) {
    api().knobs().set_cr_delay(ms)
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
    api().knobs().apply_knobs(spec)
}

/// Opens a trace file (created 0600 or emptied, never a link or another user's file), or closes
/// it with `None`.
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
    api().knobs().trace_capture(true)
}

/// Stops the in-memory trace capture (lines are kept until [`trace_take`]).
pub fn trace_stop() {
    api().knobs().trace_capture(false)
}

/// Takes the captured trace lines (one JSON object each).
pub fn trace_take() -> Vec<String> {
    api().knobs().trace_take()
}

/// Runs `f` with a fresh capture and returns the lines it produced.
pub fn capture_trace<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    trace_start();
    let r = f();
    trace_stop();
    (r, trace_take())
}

pub mod plugin;

/// The interposition layer's control API (`urma_interpose_*`, `urma-interpose/include/urma_interpose.h`),
/// defined once: the layer fills a constant [`interpose::Api`] with its exports (a prototype that
/// drifts does not compile), the harness resolves it in the loaded layer, and the layer's header
/// probe checks the header against [`interpose::Api::PROTOTYPES`], [`interpose::Counters::FIELDS`]
/// and [`interpose::CONSTANTS`].
pub mod interpose {
    use std::ffi::{c_char, c_int, c_void};

    use super::{CR_DROP, CR_DUP, ORDER_FIFO, ORDER_REVERSE, ORDER_SHUFFLE, Q_RECV, Q_SEND};

    /// The `#define`s of urma_interpose.h with their values: the loopback's selectors.
    pub const CONSTANTS: [(&str, c_int); 7] = [
        ("URMA_INTERPOSE_Q_SEND", Q_SEND),
        ("URMA_INTERPOSE_Q_RECV", Q_RECV),
        ("URMA_INTERPOSE_CR_DROP", CR_DROP),
        ("URMA_INTERPOSE_CR_DUP", CR_DUP),
        ("URMA_INTERPOSE_ORDER_FIFO", ORDER_FIFO),
        ("URMA_INTERPOSE_ORDER_REVERSE", ORDER_REVERSE),
        ("URMA_INTERPOSE_ORDER_SHUFFLE", ORDER_SHUFFLE),
    ];

    binding! {
        /// The layer's control functions, with the prototypes of urma_interpose.h.
        ///
        /// Fields are named after the symbol without its `urma_interpose_` prefix.
        Api, "urma_interpose_" + knobs {
            active: unsafe extern "C" fn() -> bool = "bool (*)(void)",
            reset: unsafe extern "C" fn() = "void (*)(void)",
            send_cr_action: unsafe extern "C" fn(u64, c_int) -> c_int = "int (*)(uint64_t, int)",
            recv_cr_action: unsafe extern "C" fn(u64, c_int) -> c_int = "int (*)(uint64_t, int)",
            get_counters: unsafe extern "C" fn(*mut Counters) -> c_int =
                "int (*)(urma_interpose_counters_t *)",
            trace_open: unsafe extern "C" fn(*const c_char) -> c_int = "int (*)(const char *)",
        }
    }

    counters! {
        /// `urma_interpose_counters_t`: every field a `uint64_t`, in the header's order; counted
        /// since load or `urma_interpose_reset`, but `crs_in_layer`, a gauge.
        Counters {
            /// Send WRs posted to the provider.
            send_wrs,
            /// Recv WRs posted to the provider.
            recv_wrs,
            /// WRs failed by `fail_post` (not forwarded).
            posts_failed_injected,
            /// CRs the provider returned from polls.
            crs_from_provider,
            /// CRs handed to the application.
            crs_to_app,
            /// CRs given an error status by `fail_completion`.
            crs_rewritten,
            crs_dropped,
            crs_duplicated,
            /// Held, delayed or ready CRs kept by the layer now.
            crs_in_layer,
            /// `urma_wait_jfc` results for CRs kept by the layer.
            synthetic_events,
        }
    }
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
        assert_eq!(Counters::FIELDS.len(), 32);
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
