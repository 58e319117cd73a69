//! The typed binding of the interposition layer's control API (`urma_interpose_*`, see
//! `urma-interpose/include/urma_interpose.h`).
//!
//! The fault and trace controls have the loopback's prototypes and meaning, so [`knobs`] is the
//! control plane's shared [`Knobs`] filled with the layer's symbols (one set of safe wrappers for
//! both). Only what the layer adds is bound here: [`present`], [`reset`], [`counters`] and CR
//! faults by send WR / receive CR ([`send_cr_action`], [`recv_cr_action`]).
//!
//! Resolved at run time: the symbols exist only when the process's `liburma.so.0` is the layer
//! (`LD_LIBRARY_PATH=<target>/<profile>/interpose:...` and `URMA_INTERPOSE_REAL`). [`present`]
//! tells; the other functions panic with a clear message otherwise.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use crate::loopback_ctl::{as_fn, symbol, CrAction, Knobs};

/// `urma_interpose_counters_t` (defined once in the control-plane crate).
pub use crate::loopback_ctl::interpose::Counters;

struct Api {
    active: unsafe extern "C" fn() -> bool,
    reset: unsafe extern "C" fn(),
    get_counters: unsafe extern "C" fn(*mut Counters) -> c_int,
    send_cr_action: unsafe extern "C" fn(u64, c_int) -> c_int,
    recv_cr_action: unsafe extern "C" fn(u64, c_int) -> c_int,
    knobs: Knobs,
}

/// Whether the layer is this process's `liburma.so.0` and has loaded the real library.
pub fn present() -> bool {
    let Some(p) = symbol("urma_interpose_active") else {
        return false;
    };
    // SAFETY: the layer's `bool urma_interpose_active(void)`.
    let f: unsafe extern "C" fn() -> bool = unsafe { as_fn(p) };
    // SAFETY: no arguments.
    unsafe { f() }
}

fn api() -> &'static Api {
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(|| {
        let get = |name: &str| -> *mut c_void {
            symbol(name).unwrap_or_else(|| {
                panic!(
                    "{name} not found: the liburma.so.0 in use is not the interposition layer \
                     (LD_LIBRARY_PATH=<target>/<profile>/interpose:... and URMA_INTERPOSE_REAL)"
                )
            })
        };
        macro_rules! f {
            ($name:literal) => {
                // SAFETY: the layer's export of that name; the fn-pointer type of the field it
                // fills mirrors its prototype in urma_interpose.h.
                unsafe { as_fn(get($name)) }
            };
        }
        Api {
            active: f!("urma_interpose_active"),
            reset: f!("urma_interpose_reset"),
            get_counters: f!("urma_interpose_get_counters"),
            send_cr_action: f!("urma_interpose_send_cr_action"),
            recv_cr_action: f!("urma_interpose_recv_cr_action"),
            knobs: Knobs {
                prefix: "urma_interpose",
                fail_post: f!("urma_interpose_fail_post"),
                fail_completion: f!("urma_interpose_fail_completion"),
                cr_action: f!("urma_interpose_cr_action"),
                hold_crs: f!("urma_interpose_hold_crs"),
                release_crs: f!("urma_interpose_release_crs"),
                set_cr_delay: f!("urma_interpose_set_cr_delay"),
                apply_knobs: f!("urma_interpose_apply_knobs"),
                trace_capture: f!("urma_interpose_trace_capture"),
                trace_take: f!("urma_interpose_trace_take"),
                free: f!("urma_interpose_free"),
            },
        }
    })
}

/// The layer's fault and trace controls (the wrappers the loopback's binding uses too). The
/// CR numbers of `cr_action_raw` count CRs as they are polled through the layer.
pub fn knobs() -> &'static Knobs {
    &api().knobs
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

/// The CR of the `nth` send WR is dropped or duplicated. 0, or -1.
pub fn send_cr_action(nth: u64, action: CrAction) -> i32 {
    // SAFETY: plain values.
    unsafe { (api().send_cr_action)(nth, action as c_int) }
}

/// The `nth` receive-side CR polled is dropped or duplicated. 0, or -1.
pub fn recv_cr_action(nth: u64, action: CrAction) -> i32 {
    // SAFETY: plain values.
    unsafe { (api().recv_cr_action)(nth, action as c_int) }
}
