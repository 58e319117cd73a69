//! Software loopback URMA provider.
//!
//! This crate builds `liburma.so` (SONAME `liburma.so.0`), a drop-in replacement for the openEuler
//! UMDK `liburma` that keeps every object inside the current process. It exports the 49 URMA
//! functions of the URMA ABI (urma-sys, `tests/data/urma_abi_*.json`) with the real prototypes and C layouts (types from `urma-sys`), plus
//! a test-control API (`urma_loopback_*`, declared in `include/urma_loopback.h`).
//!
//! Design (see `docs/loopback.md` for the user view):
//! * [`registry`]: every object handed to C is a real allocation with the real C layout; the
//!   private state lives in a process-wide registry keyed by the object's address. Every handle
//!   argument is looked up there first, so unknown or deleted handles give an error, not a crash.
//! * [`queues`]: JFC completion queues, recv queues, JFCE event channels (eventfd).
//! * [`datapath`]: posting and executing work requests.
//! * [`knobs`], [`trace`], [`ctl`]: fault injection, JSON-lines trace, control API.
//!
//! Locking: the registry is behind one `RwLock` taken only for lookups/inserts (never across a
//! copy); each JFC and each recv queue has its own `Mutex`; data copies run with no lock held,
//! the segments being pinned by `Arc` reference counts.

#![allow(clippy::missing_safety_doc)]

pub mod api;
pub mod cobj;
pub mod ctl;
pub mod datapath;
pub mod engine;
pub mod events;
pub mod hold;
pub mod knobs;
pub mod queues;
pub mod registry;
pub mod stats;
pub mod trace;
pub mod util;
