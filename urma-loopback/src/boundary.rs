//! The entry of every export (URMA and control): the panic boundary, after the DMA engine let the
//! call see every WR posted before it. Below the exports ([`crate::api`], [`crate::ctl`]), above
//! the data path.

use crate::datapath;
use crate::util::guard;

/// The entry of every export but the send posts and those of the completion path
/// ([`entry_hot`]): the panic boundary, after the DMA engine ran every WR posted before the call
/// and every post running its WRs on its own thread finished ([`datapath::quiesce`]), so that
/// deletes, counters and the trace see no WR still queued or running.
pub fn entry<R>(default: R, f: impl FnOnce() -> R) -> R {
    guard(default, || {
        datapath::quiesce();
        f()
    })
}

/// The entry of the completion path (polls, recv posts, JFC waits, rearm, ack): the panic
/// boundary, after the DMA engine ran every WR posted before the call ([`datapath::settle`]).
/// A CR is thus in its JFC for the first poll after its post returned, and a recv post meets
/// the sends posted before it, as on the synchronous provider; posts that other threads are
/// running on their own threads at the same time are not waited for (nor were they there).
pub fn entry_hot<R>(default: R, f: impl FnOnce() -> R) -> R {
    guard(default, || {
        datapath::settle();
        f()
    })
}
