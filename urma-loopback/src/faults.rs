//! The provider's fault plane (`urma_datapath::faults::FaultPlane`, shared with the
//! interposition layer): the fault rules set through `urma_loopback_*` or `URMA_LOOPBACK_KNOBS`,
//! the numbering of send WRs, recv WRs and CRs, and what `hold` and `delay_ms` do to a generated
//! CR before it enters its JFC.
//!
//! Counting: "the Nth send WR" counts every send WR that reaches a post call (1-based, since
//! process start or `urma_loopback_reset`), "the Nth recv WR" likewise for recv posts, and "the
//! Nth CR" counts every CR generated (send and recv side, before drop/dup).
//!
//! Held CRs wait in the plane until released; delayed ones (and held ones released with a delay)
//! are pushed into their JFCs by a thread of their own (`urma-lb-delay`) when they fall due.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use urma_datapath::faults::{FaultPlane, Keep};
use urma_loopback_ctl::ORDER_FIFO;

use crate::knobs;
use crate::queues::Jfc;
use crate::stats::COUNTERS;

/// A held or delayed CR: its JFC, the CR, and whether it is solicited.
type Pending = (Arc<Jfc>, urma_sys::urma_cr_t, bool);

/// The provider's fault plane: no state of its own beyond the shared rules.
pub static PLANE: FaultPlane<(), Pending> = FaultPlane::new(());

/// What happens to one generated CR (the control plane's, shared with the interposition layer).
pub use urma_datapath::faults::Fate;

/// Clears the rules, the numbering and the provider's own knobs, then releases the CRs held so
/// far (FIFO).
pub fn reset() {
    PLANE.reset();
    knobs::reset();
    release_held(ORDER_FIFO, 0, 0);
}

/// Applies a knob spec: the fault keys both libraries know (syntax, value rules:
/// `urma_datapath::spec`) and the provider's own ([`knobs::apply_own`]).
///
/// Keys: `fail_post=N:STATUS`, `fail_recv_post=N:STATUS` (STATUS an `int`, negative allowed),
/// `fail_cr=N:CR_STATUS`, `drop_cr=N`, `dup_cr=N`, `hold=0|1`, `delay_ms=N`, `nocopy=0|1`,
/// `delete_timeout_ms=N`, `rnr_timeout_ms=N`, `async_post=0|1`. Returns the number of items
/// applied, or Err(item) for the first item that does not parse (items before it are applied).
pub fn apply_spec(spec: &str) -> Result<usize, String> {
    PLANE.apply_spec(spec, knobs::apply_own)
}

/// Delivers a CR to its JFC, honouring hold and delay.
pub fn deliver(jfc: &Arc<Jfc>, cr: urma_sys::urma_cr_t, solicited: bool) {
    if PLANE.any() {
        match PLANE.keep(|| (jfc.clone(), cr, solicited)) {
            Some(Keep::Held) => {
                COUNTERS.crs_held.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Some(Keep::Delayed) => {
                start_delay_thread();
                return;
            }
            None => {}
        }
    }
    jfc.push(cr, solicited);
}

/// Number of CRs currently held or waiting for a delay.
pub fn in_flight() -> u64 {
    PLANE.edit(|s| s.kept.len() as u64)
}

/// Releases every held CR in `order`, after `delay_ms` (0 = now, in the calling thread).
/// Returns how many were released.
pub fn release_held(order: i32, seed: u64, delay_ms: u32) -> u64 {
    let (n, now) = PLANE.release(order, seed, delay_ms, |_, v| v);
    COUNTERS.crs_held.fetch_sub(n, Ordering::Relaxed);
    if delay_ms > 0 {
        start_delay_thread();
    }
    for (j, cr, s) in now {
        j.push(cr, s);
    }
    n
}

/// Starts the thread that pushes delayed CRs into their JFCs as they fall due (once).
fn start_delay_thread() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        std::thread::Builder::new()
            .name("urma-lb-delay".into())
            .spawn(|| loop {
                for (j, cr, s) in PLANE.wait_due() {
                    j.push(cr, s);
                }
            })
            .expect("spawn delay thread");
    });
}
