//! The rank of every lock of the workspace, lowest first: a thread holding a lock takes only
//! locks of a higher rank (so at most one lock of each rank: one shard, one slot, one worker
//! queue). Each crate has a range of its own, in the order its calls go: the library (1–19)
//! calls URMA, which is the interposition layer (20–39) or the provider; the layer calls the
//! provider it forwards to. A lock is added here, with its name in [`name`], and nowhere else.
//!
//! What each lock protects and what is taken while it is held: docs/architecture.md, "Locks"
//! (the library), docs/compat.md, "The interposition layer" (the layer).

/// `instance::LIVE`, the process's instance (`RwLock`).
pub const INSTANCE: u8 = 1;
/// A shard of an instance's request-id index (`request::index`).
pub const SHARD: u8 = 2;
/// A slot of the sync table: one request's state (`request::slots`).
pub const SLOT: u8 = 3;
/// The early-completion stash and the tombstones (`request::index::Kept`).
pub const KEPT: u8 = 4;
/// The free list of the sync table (`request::slots`).
pub const FREE_LIST: u8 = 5;
/// A worker's wake-up queue (`pool`).
pub const WORKER_QUEUE: u8 = 6;
/// A worker's join handle (`pool`).
pub const WORKER_JOIN: u8 = 7;
/// The instance's recorded receive queue (`instance::Instance::recvq`).
pub const RECV_QUEUE: u8 = 8;
/// The instance's recorded JFCE and JFC (`instance::Instance::jfc_info`).
pub const JFC_INFO: u8 = 9;
/// The log backend (`log`), which writes to a file or syslog while held.
pub const LOG: u8 = 10;

/// The interposition layer's call lock (`urma-interpose`, `datapath::CALL`): held while a post
/// or a poll with tracing or faults on goes through the layer to the provider, so that the
/// post and CR numbers follow the order of the calls.
pub const INTERPOSE_CALL: u8 = 20;
/// The interposition layer's object names (`urma-interpose`, `objects::OBJECTS`, `RwLock`).
pub const INTERPOSE_OBJECTS: u8 = 21;

/// The name of the locks of rank `r` (for the order check of debug builds).
pub const fn name(r: u8) -> &'static str {
    match r {
        INSTANCE => "instance",
        SHARD => "request-index shard",
        SLOT => "sync slot",
        KEPT => "stash/tombstone",
        FREE_LIST => "sync-table free list",
        WORKER_QUEUE => "worker queue",
        WORKER_JOIN => "worker join handle",
        RECV_QUEUE => "receive queue",
        JFC_INFO => "JFC record",
        LOG => "log",
        INTERPOSE_CALL => "interposition call",
        INTERPOSE_OBJECTS => "interposition object names",
        _ => "unnamed",
    }
}
