//! The child process of a cell (`ostbench cell --kind KIND ...`): one library, one
//! configuration, one measurement. Prints exactly one `RESULT key=value ...` line on stdout (or
//! `ERROR ...` and a non-zero exit status when the measurement itself broke). Which measurement a
//! kind is belongs to its cell (`crate::cells::registry`); this module is what they share, one file
//! per job: the options (`cfg`), the state of the C callbacks (`callbacks`), library loading
//! (`load`), the application's pollers (`poll`), the request driver (`driver`), CPU clocks
//! (`cpu`), what a cell sets up (`setup`) and the one-process harness (`run`: [`one_process`]).
//!
//! Workload: a closed loop of send + recv pairs with `depth` pairs in flight. Per pair the
//! submitter (main thread) calls `os_transport_recv(ck)` then `os_transport_send(sk, ck)` (the
//! recv is registered first, so the C reference never sees an early SEND_WITH_IMM) and, once
//! `depth` pairs are outstanding, waits FIFO on the oldest pair (`wait_and_free_sync` on its send
//! sync, then its recv sync). Completions are fed to `os_transport_wake_up_task` by the
//! application's poller: one thread busy-polling both JFCs (poll mode; idle spins then
//! `sched_yield`), or one thread per JFC blocked in `urma_wait_jfc` (event mode).
//!
//! Paced windows replace the closed loop by an open-loop schedule of R pairs/s (see
//! `driver::Driver::paced`).
//!
//! Latency sample = time from the poller holding a receive CR (just before it calls
//! `os_transport_wake_up_task`) to the start of `notify_callback` for that chunk, i.e. the
//! library's hand-off from the polling thread to its worker and the callback dispatch.

mod callbacks;
mod cfg;
mod cpu;
mod driver;
mod load;
mod poll;
mod run;
mod setup;

pub(crate) use callbacks::{record_latencies, shared, split_poller_cpu};
pub(crate) use cfg::CellCfg;
pub(crate) use cpu::{cpu_snap, threads_cpu_ns};
pub(crate) use driver::{keys, post_recv, post_send, wait_sync};
pub(crate) use load::{alloc_snapshot, load_lib};
pub(crate) use poll::{Pollers, WakeFn};
pub(crate) use run::{one_process, percentile, recorded_latencies, Needs, OneProcess, Window};
pub(crate) use setup::{endpoints, init_lib, watchdog, SRC_BYTE};
