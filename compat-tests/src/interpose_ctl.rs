//! Safe wrappers over the interposition layer's control API (`urma_interpose_*`, see
//! `urma-interpose/include/urma_interpose.h`). The binding itself is the control plane's,
//! `urma_loopback_ctl::interpose::Api`: the layer fills a constant of it with its exports (a
//! prototype that drifts does not compile) and its header probe checks `urma_interpose.h` against
//! it, so nothing here restates a prototype but [`present`]'s probe of `urma_interpose_active`.
//!
//! The fault and trace controls have the loopback's prototypes and meaning, so [`knobs`] is the
//! control plane's shared [`Knobs`] filled with the layer's symbols (one set of safe wrappers for
//! both). What the layer adds: [`present`], [`reset`], [`counters`] and CR faults by send WR /
//! receive CR ([`send_cr_action`], [`recv_cr_action`]).
//!
//! Resolved at run time: the symbols exist only when the process's `liburma.so.0` is the layer
//! (`LD_LIBRARY_PATH=<target>/<profile>/interpose:...` and `URMA_INTERPOSE_REAL`). [`present`]
//! tells; the other functions panic with a clear message otherwise.

use std::ffi::c_int;
use std::sync::OnceLock;

use crate::loopback_ctl::interpose::Api;
use crate::loopback_ctl::{as_fn, symbol, CrAction, Knobs};

/// `urma_interpose_counters_t` (defined once in the control-plane crate).
pub use crate::loopback_ctl::interpose::Counters;

/// Whether the layer is this process's `liburma.so.0` and has loaded the real library.
pub fn present() -> bool {
    let Some(p) = symbol("urma_interpose_active") else {
        return false;
    };
    // SAFETY: the layer's `bool urma_interpose_active(void)` (the type of `Api::active`).
    let f: unsafe extern "C" fn() -> bool = unsafe { as_fn(p) };
    // SAFETY: no arguments.
    unsafe { f() }
}

/// The layer's control functions, resolved once with the control plane's binding
/// (`urma_loopback_ctl::interpose::Api`, which the layer fills with its exports at compile time).
fn api() -> &'static (Api, Knobs) {
    static API: OnceLock<(Api, Knobs)> = OnceLock::new();
    API.get_or_init(|| {
        let api = Api::resolve(|name| {
            symbol(name).ok_or_else(|| {
                format!(
                    "{name} not found: the liburma.so.0 in use is not the interposition layer \
                     (LD_LIBRARY_PATH=<target>/<profile>/interpose:... and URMA_INTERPOSE_REAL)"
                )
            })
        })
        .unwrap_or_else(|e| panic!("{e}"));
        (api, api.knobs())
    })
}

/// The layer's fault and trace controls (the wrappers the loopback's binding uses too). The
/// CR numbers of `cr_action_raw` count CRs as they are polled through the layer.
pub fn knobs() -> &'static Knobs {
    &api().1
}

/// Resets faults (held CRs become ready), numbering, counters, trace sinks and names.
pub fn reset() {
    let a = &api().0;
    // SAFETY: plain calls.
    unsafe {
        assert!((a.active)(), "the interposition layer has no real library");
        (a.reset)()
    }
}

pub fn counters() -> Counters {
    let mut c = Counters::default();
    // SAFETY: c is a writable urma_interpose_counters_t (the layout the header probe checks).
    assert_eq!(unsafe { (api().0.get_counters)(&mut c) }, 0);
    c
}

/// The CR of the `nth` send WR is dropped or duplicated. 0, or -1.
pub fn send_cr_action(nth: u64, action: CrAction) -> i32 {
    // SAFETY: plain values.
    unsafe { (api().0.send_cr_action)(nth, action as c_int) }
}

/// The `nth` receive-side CR polled is dropped or duplicated. 0, or -1.
pub fn recv_cr_action(nth: u64, action: CrAction) -> i32 {
    // SAFETY: plain values.
    unsafe { (api().0.recv_cr_action)(nth, action as c_int) }
}
