//! Software loopback URMA provider.
//!
//! This crate builds `liburma.so` (SONAME `liburma.so.0`), a drop-in replacement for the openEuler
//! UMDK `liburma`. Objects live in the process that created them; processes of one host share
//! the device and reach each other's objects through [`peer`] and [`xproc`]. It exports the 49 URMA
//! functions of the URMA ABI (urma-sys, `tests/data/urma_abi_*.json`) with the real prototypes and C layouts (types from `urma-sys`), plus
//! a test-control API (`urma_loopback_*`, declared in `include/urma_loopback.h`; cargo feature
//! `ctl`, on by default).
//!
//! Design (see `docs/loopback.md` for the user view and the layer table); each module uses only
//! modules listed before it:
//! * floor: [`util`], [`stats`] (counters), [`knobs`] (the provider's own tunables), [`trace`],
//!   [`cobj`] (C
//!   allocation owner, context), [`events`] (async events), [`engine`] (the DMA engine),
//!   [`peer`] (the transport between processes);
//! * [`queues`]: JFC completion queues and JFCE event channels (eventfd);
//! * [`objects`]: the state behind each handle, the receive queues and the WR types they carry;
//!   [`faults`]: the fault plane (rules, WR / CR numbering, held and delayed CRs; the control
//!   plane's `FaultPlane`, shared with the interposition layer);
//! * [`registry`]: every object handed to C is a real allocation with the real C layout; its
//!   private state lives in a process-wide registry keyed by the object's address. Every handle
//!   argument is looked up there first, so unknown or deleted handles give an error, not a crash;
//! * [`complete`]: SGE checks and CR generation; [`xproc`]: work requests between processes;
//! * [`datapath`]: posting and executing work requests;
//! * [`boundary`]: the entry of every export (panic boundary, engine quiesce or settle);
//! * [`ctl`] (the control exports, a thin shim; types from `urma-loopback-ctl`), then [`api`]
//!   (the URMA exports, one file per object family; `urma_init` applies the control plane's
//!   environment);
//! * with the cargo feature `plugin`, `plugin`: the plugin face, a provider of the genuine URMA
//!   core whose ops tables hold [`api`]'s functions (built as `liburma-loopback.so`; the URMA
//!   functions are then not exported by name, docs/loopback.md, "The two faces").
//!
//! Locking (docs/loopback.md, "Locking", has the whole list): the registry is behind one
//! `RwLock` taken only for lookups/inserts (never across a copy); each JFC and each recv queue has
//! its own `Mutex`; a data copy holds only its send queue's runner or lane lock, the segments
//! being pinned by `Arc` reference counts (and, for another process's transfers, by the
//! segment's pin count).

#![allow(clippy::missing_safety_doc)]

pub mod api;
pub mod boundary;
pub mod cobj;
pub mod complete;
#[cfg(feature = "ctl")]
pub mod ctl;
pub mod datapath;
pub mod engine;
pub mod events;
pub mod faults;
pub mod knobs;
pub mod objects;
pub mod peer;
#[cfg(feature = "plugin")]
pub mod plugin;
pub mod queues;
pub mod registry;
pub mod stats;
pub mod trace;
pub mod util;
pub mod xproc;
