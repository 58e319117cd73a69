//! The rank of every lock of the workspace, lowest first: a thread holding a lock takes only
//! locks of a higher rank (so at most one lock of each rank: one shard, one slot, one worker
//! queue). Each crate has a range of its own, in the order its calls go: the library (1–19)
//! calls URMA, which is the interposition layer (20–39) or the provider (40–79, the loopback and
//! the parts of `urma-datapath` both the loopback and the layer run: the fault plane and the
//! trace); the layer calls the provider it forwards to. A lock is added here, with its name in
//! [`name`], and nowhere else.
//!
//! Every lock of the products is here: the library, the interposition layer, the loopback in
//! both faces, the preload helper, the inject registry, and their unit tests' own locks. The test
//! fixtures' locks (testkit's pollers, the harness's recorder, the integration tests') are `std`
//! locks outside the table: they run in the test process, beside the products' own copies of this
//! crate, and order nothing in them.
//!
//! What each lock protects and what is taken while it is held: docs/architecture.md, "Locks"
//! (the library), docs/compat.md, "The interposition layer" (the layer), docs/loopback.md,
//! "Locking" (the provider).

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

/// The inject registry's attach state (`os-transport-inject`, `shm::STATE`, `RwLock`; the
/// library's cargo feature `inject`): a leaf, taken at an inject point under any library lock.
pub const INJECT_REGISTRY: u8 = 19;

/// The interposition layer's call lock (`urma-interpose`, `datapath::CALL`): held while a post
/// or a poll with tracing or faults on goes through the layer to the provider, so that the
/// post and CR numbers follow the order of the calls.
pub const INTERPOSE_CALL: u8 = 20;
/// The interposition layer's object names (`urma-interpose`, `objects::OBJECTS`, `RwLock`).
pub const INTERPOSE_OBJECTS: u8 = 21;

/// The DMA engine's runner lock (`urma-loopback` `engine::Engine::exec`): held while jobs run,
/// so everything a WR takes comes after it.
pub const ENGINE_RUNNER: u8 = 40;
/// A stripe of the engine's lane gate (`engine::LaneGate`, `RwLock`): read by a lane run, written
/// in turn by a quiesce.
pub const ENGINE_LANES: u8 = 41;
/// A send queue's runner lock (`objects::Order::lane`): held while that queue's WRs run.
pub const SEND_LANE: u8 = 42;
/// The engine's job queue (`engine::Engine::st`), with its condition variable.
pub const ENGINE_QUEUE: u8 = 43;
/// The engine's waiters (`engine::Engine::done_m`), with its condition variable.
pub const ENGINE_DONE: u8 = 44;
/// This process's host membership (`peer::member::ME`).
pub const MEMBERSHIP: u8 = 45;
/// The map of peer processes (`peer::conn::PEERS`), held only to find a uasid's entry.
pub const PEERS: u8 = 46;
/// One uasid's entry (`peer::conn::PeerSlot`), held while that process is reached.
pub const PEER_ENTRY: u8 = 47;
/// A peer's connection slot (`peer::conn::Peer::conn`), held while a connection is replaced.
pub const PEER_CONN: u8 = 48;
/// A connection's writer (`peer::conn::Conn::w`), held while one message is written.
pub const CONN_WRITER: u8 = 49;
/// A connection's outstanding requests (`peer::conn::Conn::st`), never held across I/O.
pub const CONN_STATE: u8 = 50;
/// The answer slot of one control request (`peer::conn::Peer::rpc`).
pub const RPC_ANSWER: u8 = 51;
/// The requesting processes an owner serves (`peer::admission::REQUESTERS`).
pub const REQUESTERS: u8 = 52;
/// One requester's refusals (`peer::admission::Requester::refusals`).
pub const REQUESTER_REFUSALS: u8 = 53;
/// The owner's pacing of token checks under strain (`peer::admission::STRAIN`).
pub const STRAIN: u8 = 54;
/// Objects whose token checks were refused, logged once each (`xproc::REFUSED_OBJECTS`).
pub const REFUSED_OBJECTS: u8 = 55;
/// The receive queues holding parked messages (`datapath::PARKED_QS`), before a queue's lock.
pub const PARKED_QUEUES: u8 = 56;
/// A receive queue: its posted WRs and parked messages (`objects::RecvQ::q`).
pub const RECV_QUEUE_WRS: u8 = 57;
/// A send queue's order of completions with WRs at another process (`objects::Order::q`).
pub const SEND_ORDER: u8 = 58;
/// A JFC's CR queue (`queues::Jfc::q`).
pub const JFC_CRS: u8 = 59;
/// A JFC's event bookkeeping (`queues::Jfc::ev`), with its condition variable.
pub const JFC_EVENTS: u8 = 60;
/// A JFCE's pending events (`queues::Jfce::pending`).
pub const JFCE_PENDING: u8 = 61;
/// A jetty's or target jetty's advise and bind lists (`objects`).
pub const ADVISE: u8 = 62;
/// The asynchronous event queue (`events::ASYNC`).
pub const ASYNC_EVENTS: u8 = 63;
/// The jetty ids in use (`api::jetty`).
pub const JETTY_IDS: u8 = 64;
/// The object registry (`registry::REGISTRY`, `RwLock`): a leaf for lookups.
pub const REGISTRY: u8 = 66;
/// The trace's queue names (`trace::QNAMES`, `RwLock`).
pub const QUEUE_NAMES: u8 = 67;
/// The fault plane's rules and held CRs (`urma-datapath` `faults::FaultPlane`): a leaf.
pub const FAULT_PLANE: u8 = 68;
/// The trace's sinks (`urma-datapath` `trace_line`).
pub const TRACE_SINKS: u8 = 69;
/// The trace's stopped captures (`urma-datapath` `trace_line`).
pub const TRACE_STOPPED: u8 = 70;
/// A rate limit of log lines (`util::RateLimit`).
pub const RATE_LIMIT: u8 = 71;
/// The plugin's handle as the control binding found it (`urma-loopback-ctl` `plugin`).
pub const PLUGIN_HANDLE: u8 = 72;
/// The preload helper's table of virtual descriptors (`urma-loopback-preload`, `vfd::TABLE`): a
/// leaf, taken in the C library calls it interposes.
pub const PRELOAD_TABLE: u8 = 65;
/// The application's log function (`util::LOG_FUNC`): last, as a line may be logged anywhere.
pub const LOG_FUNC: u8 = 73;
/// A lock that keeps a test from running beside another (held around the code under test):
/// taken first.
pub const TEST_SERIAL: u8 = 0;
/// What a test records from inside the code it drives (a job, a callback): taken last.
pub const TEST_RECORD: u8 = 99;

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
        INJECT_REGISTRY => "inject registry",
        INTERPOSE_CALL => "interposition call",
        INTERPOSE_OBJECTS => "interposition object names",
        ENGINE_RUNNER => "engine runner",
        ENGINE_LANES => "engine lane gate",
        SEND_LANE => "send queue lane",
        ENGINE_QUEUE => "engine job queue",
        ENGINE_DONE => "engine waiters",
        PEERS => "peer map",
        PEER_ENTRY => "peer entry",
        PEER_CONN => "peer connection slot",
        CONN_WRITER => "connection writer",
        CONN_STATE => "connection state",
        RPC_ANSWER => "control request answer",
        REQUESTERS => "requester map",
        REQUESTER_REFUSALS => "requester refusals",
        STRAIN => "owner strain",
        REFUSED_OBJECTS => "refused objects",
        PARKED_QUEUES => "parked receive queues",
        RECV_QUEUE_WRS => "receive queue",
        SEND_ORDER => "send completion order",
        JFC_CRS => "JFC CR queue",
        JFC_EVENTS => "JFC events",
        JFCE_PENDING => "JFCE pending events",
        ADVISE => "advise list",
        ASYNC_EVENTS => "async events",
        MEMBERSHIP => "host membership",
        JETTY_IDS => "jetty ids",
        REGISTRY => "object registry",
        QUEUE_NAMES => "trace queue names",
        FAULT_PLANE => "fault plane",
        TRACE_SINKS => "trace sinks",
        TRACE_STOPPED => "trace stopped captures",
        LOG_FUNC => "log function",
        RATE_LIMIT => "log rate limit",
        PLUGIN_HANDLE => "plugin handle",
        PRELOAD_TABLE => "preload descriptor table",
        TEST_RECORD => "test record",
        TEST_SERIAL => "test serialisation",
        _ => "unnamed",
    }
}
