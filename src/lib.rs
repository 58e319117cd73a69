//! mlcachedirect: Rust drop-in for `libos_transport.so.1` (openEuler MLCacheDirect transfer
//! library 1.0). The C ABI lives in [`ffi`]; the module map is in `docs/abi.md`.
#![warn(missing_docs)]

pub mod abi;
pub mod chunk;
pub mod ffi;
mod instance;
mod log;
mod pool;
mod post;
mod recv;
mod request;
mod send;
mod spin;
mod urma;
pub use os_transport_abi::user_data;
mod wait;
mod wake;

/// Test hooks (Rust only, not exported from the shared object).
#[doc(hidden)]
pub mod testing {
    pub use crate::instance::{set_destroy_join_bound, DESTROY_JOIN_BOUND};
    pub use crate::pool::{MAX_WORKERS, WORKER_QUEUE_CAPACITY};
    pub use crate::request::index::{STASH_CAPACITY, TOMBSTONES};
    pub use crate::request::slots::{
        inflight_requests, live_syncs, set_next_free_generation, DEFAULT_MAX_INFLIGHT, GEN_MASK,
        MAX_INFLIGHT_ENV, SLOT_BYTES, SYNC_CAPACITY,
    };
    pub use ranked_lock::lock_order_violations;
}
