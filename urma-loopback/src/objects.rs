//! Object state: the private state behind each C handle (segments, JFS, JFR, jetty, imported
//! jetty, token id), the receive queues with their posted WRs and parked receiver-not-ready
//! messages, and the validated WR types those carry. Data only, with small accessors; the
//! behaviour lives above (registry lookups, [`crate::queues`] for the completion side,
//! [`crate::datapath`] for execution). These types refer to each other (a JFR owns its receive
//! queue, whose parked messages name their target jetty), so they share one module, which
//! depends only on the floors below: the queues, the C object owner and the helpers.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use ranked_lock::{rank, Condvar, Mutex};
use std::time::{Duration, Instant};

use urma_datapath::opcode::OpInfo;

use crate::cobj::{CBox, Ctx};
use crate::peer::Peer;
use crate::queues::{Jfc, Jfce};
use crate::util::lock;

/// Registered (local) segment.
pub struct Seg {
    pub c: CBox<urma_sys::urma_target_seg_t>,
    pub name: String,
    pub va: u64,
    pub len: u64,
    pub access: u32,
    pub token_policy: u32,
    pub token: u32,
    pub token_id: u32,
    pub alive: AtomicBool,
    pub ctx: Arc<Ctx>,
    /// Explicit token id object (urma_alloc_token_id) this segment uses, if any.
    pub token_obj: Option<Arc<TokenIdObj>>,
    /// Set on the stand-in of a segment registered in another process (the import's target):
    /// the connection to its owner, which checks every access again.
    pub remote: Option<Arc<Peer>>,
    /// Transfers of other processes inside this segment right now ([`Seg::pin`]).
    pub io: AtomicU32,
}

/// A transfer of another process inside a live segment: while it lives, the segment's
/// unregister waits ([`Seg::wait_unpinned`]).
pub struct SegPin(Arc<Seg>);

impl Drop for SegPin {
    fn drop(&mut self) {
        self.0.io.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Seg {
    /// A new segment state (alive, no transfer inside).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        c: CBox<urma_sys::urma_target_seg_t>,
        name: String,
        (va, len): (u64, u64),
        access: u32,
        (token_policy, token, token_id): (u32, u32, u32),
        ctx: Arc<Ctx>,
        token_obj: Option<Arc<TokenIdObj>>,
        remote: Option<Arc<Peer>>,
    ) -> Seg {
        Seg {
            c,
            name,
            va,
            len,
            access,
            token_policy,
            token,
            token_id,
            alive: AtomicBool::new(true),
            ctx,
            token_obj,
            remote,
            io: AtomicU32::new(0),
        }
    }

    /// Pins a live segment for a transfer of another process (`None` once it is dead). With
    /// [`Self::wait_unpinned`] after the segment died, either the pin sees it dead or the
    /// unregister sees the pin (both sides use sequentially consistent order).
    pub fn pin(self: &Arc<Self>) -> Option<SegPin> {
        self.io.fetch_add(1, Ordering::SeqCst);
        let pin = SegPin(self.clone());
        self.alive.load(Ordering::SeqCst).then_some(pin)
    }

    /// Waits until no transfer of another process is inside this (dead) segment. Each such
    /// transfer ends within the transport's message bound (docs/loopback.md, "Security model").
    pub fn wait_unpinned(&self) {
        let mut nap = Duration::from_micros(20);
        while self.io.load(Ordering::SeqCst) != 0 {
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(5));
        }
    }
}

/// Imported (remote) segment.
pub struct ISeg {
    pub c: CBox<urma_sys::urma_target_seg_t>,
    pub name: String,
    pub target: Arc<Seg>,
    pub token: u32,
    pub ctx: Arc<Ctx>,
}

/// Token id from `urma_alloc_token_id`.
pub struct TokenIdObj {
    pub c: CBox<urma_sys::urma_token_id_t>,
    pub id: u32,
    pub ctx: Arc<Ctx>,
    pub users: AtomicU64,
}

/// Send side shared by JFS and jetty.
#[derive(Clone)]
pub struct SendQ {
    pub name: String,
    pub id: u32,
    pub is_jetty: bool,
    pub jfc: Arc<Jfc>,
    pub max_sge: u32,
    /// Address of the C object (goes into `cr.user_data`).
    pub obj_addr: usize,
    pub eid: urma_sys::urma_eid_t,
    pub uasid: u32,
    /// Keeps the send CRs in post order while WRs wait for another process.
    pub order: Arc<Order>,
}

/// A send CR that waits for its turn.
type Completion = Box<dyn FnOnce() + Send>;

/// The send CRs of a queue that has WRs outstanding at another process: each such WR holds a
/// ticket; a CR is generated once every earlier ticket's CR was, so a queue's CRs keep their post
/// order even though another process acknowledges its WRs later than local WRs complete. A queue
/// with nothing outstanding pays one atomic load per WR.
#[derive(Default)]
pub struct Order {
    /// Entries in `q` (0: nothing outstanding, a CR is generated at once).
    waiting: AtomicU64,
    /// Ticket of `q[0]`, and the completions in ticket order (`None`: not ready yet).
    q: Mutex<(u64, VecDeque<Option<Completion>>), { rank::SEND_ORDER }>,
    /// Signalled when `q` becomes empty ([`Order::wait_idle`]).
    idle: Condvar,
    /// The queue's runner lock: held while a WR of this queue executes and generates its CRs
    /// (by a completion-synchronous post running its own WRs, or by whichever runner
    /// of the DMA engine runs a job of this queue), so the WRs of one queue, and the CRs they
    /// generate, never interleave with each other (docs/loopback.md, "Data path").
    pub lane: Mutex<(), { rank::SEND_LANE }>,
}

impl Order {
    /// A place in the order for a WR sent to another process.
    pub fn ticket(&self) -> u64 {
        let mut g = lock(&self.q);
        let t = g.0 + g.1.len() as u64;
        g.1.push_back(None);
        self.waiting.fetch_add(1, Ordering::AcqRel);
        t
    }

    /// The WR of ticket `t` completed: runs its completion and every ready one after it, once
    /// every earlier one ran.
    pub fn complete(&self, t: u64, f: Completion) {
        let mut g = lock(&self.q);
        let i = (t - g.0) as usize;
        if let Some(e) = g.1.get_mut(i) {
            *e = Some(f);
        }
        while matches!(g.1.front(), Some(Some(_))) {
            if let Some(Some(f)) = g.1.pop_front() {
                f();
            }
            g.0 += 1;
            self.waiting.fetch_sub(1, Ordering::AcqRel);
        }
        if g.1.is_empty() {
            self.idle.notify_all();
        }
    }

    /// Waits (at most `timeout`) until no WR of the queue is outstanding at another process;
    /// false if some still are. Used by the deletes, so that no CR of a deleted queue comes later
    /// (a dead peer's WRs fail at once, so only a live, slow peer makes this wait).
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        if self.is_idle() {
            return true;
        }
        let end = Instant::now() + timeout;
        let mut g = lock(&self.q);
        while !g.1.is_empty() {
            let now = Instant::now();
            if now >= end {
                return false;
            }
            g = self
                .idle
                .wait_timeout(g, end - now)
                .map(|x| x.0)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        true
    }

    /// Whether nothing is outstanding (the CR of a local WR can be generated at once).
    pub fn is_idle(&self) -> bool {
        self.waiting.load(Ordering::Acquire) == 0
    }

    /// A WR that completed here: its CR now, or after the outstanding ones before it.
    pub fn local(&self, f: impl FnOnce() + Send + 'static) {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return f();
        }
        let mut g = lock(&self.q);
        if g.1.is_empty() {
            f();
        } else {
            g.1.push_back(Some(Box::new(f)));
            self.waiting.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Jetty For Send.
pub struct Jfs {
    pub c: CBox<urma_sys::urma_jfs_t>,
    pub sq: Arc<SendQ>,
    pub ctx: Arc<Ctx>,
    pub advised: Mutex<Vec<usize>, { rank::ADVISE }>,
}

/// Jetty For Receive.
pub struct Jfr {
    pub c: CBox<urma_sys::urma_jfr_t>,
    pub name: String,
    pub id: u32,
    pub rq: Arc<RecvQ>,
    pub token: u32,
    /// Whether imports must present `token` (token policy other than NONE).
    pub token_checked: bool,
    pub alive: AtomicBool,
    pub ctx: Arc<Ctx>,
    /// Jetties that share this JFR and are alive.
    pub users: AtomicU64,
}

/// Jetty (send + receive).
pub struct Jetty {
    pub c: CBox<urma_sys::urma_jetty_t>,
    pub sq: Arc<SendQ>,
    pub rq: Arc<RecvQ>,
    /// The JFR whose receive queue (`rq`) the jetty shares: a UB device's jetties have no
    /// receive queue of their own.
    pub shared_jfr: Arc<Jfr>,
    pub token: u32,
    /// Whether imports must present `token`.
    pub token_checked: bool,
    pub alive: AtomicBool,
    pub ctx: Arc<Ctx>,
    pub advised: Mutex<Vec<usize>, { rank::ADVISE }>,
    pub bound: Mutex<Option<usize>, { rank::ADVISE }>,
}

/// What an imported jetty/JFR points at.
pub enum Target {
    Jetty(Arc<Jetty>),
    Jfr(Arc<Jfr>),
    /// A jetty (`jfr` false) or JFR of another process.
    Remote {
        peer: Arc<Peer>,
        id: u32,
        jfr: bool,
        /// The token the import presented: every two-sided request carries it, and the owner
        /// checks it as it checked the import.
        token: Option<u32>,
    },
}

/// Imported jetty or JFR (`urma_target_jetty_t`).
pub struct TJetty {
    pub c: CBox<urma_sys::urma_target_jetty_t>,
    pub name: String,
    pub target: Target,
    pub ctx: Arc<Ctx>,
}

/// A tracked array returned by `urma_get_device_list` / `urma_get_eid_list`.
pub struct CArray {
    pub ptr: usize,
}

/// Registry entry.
#[derive(Clone)]
pub enum Obj {
    Ctx(Arc<Ctx>),
    Jfce(Arc<Jfce>),
    Jfc(Arc<Jfc>),
    Jfs(Arc<Jfs>),
    Jfr(Arc<Jfr>),
    Jetty(Arc<Jetty>),
    TJetty(Arc<TJetty>),
    Seg(Arc<Seg>),
    ISeg(Arc<ISeg>),
    TokenId(Arc<TokenIdObj>),
    DevList,
    EidList,
}

/// Kinds of objects (counts, symbolic names): the trace's, shared with the interposition layer.
pub use urma_datapath::trace_line::{Kind, KIND_COUNT};

impl Obj {
    pub fn kind(&self) -> Option<Kind> {
        Some(match self {
            Obj::Ctx(_) => Kind::Ctx,
            Obj::Jfce(_) => Kind::Jfce,
            Obj::Jfc(_) => Kind::Jfc,
            Obj::Jfs(_) => Kind::Jfs,
            Obj::Jfr(_) => Kind::Jfr,
            Obj::Jetty(_) => Kind::Jetty,
            Obj::TJetty(_) => Kind::TJetty,
            Obj::Seg(_) => Kind::Seg,
            Obj::ISeg(_) => Kind::ISeg,
            Obj::TokenId(_) => Kind::TokenId,
            Obj::DevList | Obj::EidList => return None,
        })
    }
}

/// A segment handle: registered (local) or imported (remote).
#[derive(Clone)]
pub enum AnySeg {
    Local(Arc<Seg>),
    Imported(Arc<ISeg>),
}

/// A segment as a WR holds it: an `Arc` of the calling thread's own around the registry's
/// object, made once per thread (and per registry change) by its handle cache
/// ([`crate::registry::get_any_seg`]). The posting threads and the poller of one application
/// name the same segments in every WR; cloning and dropping the registry's `Arc` itself for
/// each WR moved its count's cache line between their CPUs twice per WR, while this count is
/// written by one thread only (unless a WR outlives its post on another thread: a parked
/// message, an engine job, a posted recv WR that another thread's SEND consumes).
pub type SegRef = Arc<AnySeg>;

/// A target jetty as a send WR holds it: the thread's own reference, as [`SegRef`].
pub type TJettyRef = Arc<Arc<TJetty>>;

impl AnySeg {
    pub fn seg(&self) -> &Arc<Seg> {
        match self {
            AnySeg::Local(s) => s,
            AnySeg::Imported(i) => &i.target,
        }
    }
}

// ---- receive queues ----

/// A posted receive WR.
pub struct RecvWr {
    pub user_ctx: u64,
    /// SGEs (segments are registered ones; `None` only for zero-length SGEs).
    pub sges: SgeList,
}

/// Posted recv WRs and parked (receiver-not-ready) messages of one receive queue.
///
/// Invariant: `parked` is non-empty only while `wrs` is empty (a recv WR posted while messages
/// are parked is matched with the oldest parked message at once).
#[derive(Default)]
pub struct RecvState {
    pub wrs: VecDeque<RecvWr>,
    pub parked: VecDeque<Parked>,
}

/// What a recv post did.
pub enum RecvPost {
    /// The WR is queued.
    Posted,
    /// `depth` WRs are already posted.
    Full,
    /// The WR was matched with the oldest parked message (to be delivered by the caller).
    Matched(Box<Parked>, RecvWr),
}

/// Receive queue (of a JFR, or of a jetty with its own JFR).
pub struct RecvQ {
    pub name: String,
    pub depth: u32,
    pub max_sge: u32,
    pub jfc: Arc<Jfc>,
    pub q: Mutex<RecvState, { rank::RECV_QUEUE_WRS }>,
    /// Signalled by a recv post while `waiters` > 0 (a responder thread of another process's
    /// message waits for a recv WR, see [`crate::xproc`]).
    pub posted: Condvar,
    pub waiters: AtomicU32,
}

impl RecvQ {
    /// Queues a WR, or matches it with the oldest parked message.
    pub fn post(&self, wr: RecvWr) -> RecvPost {
        let mut q = lock(&self.q);
        if let Some(p) = q.parked.pop_front() {
            return RecvPost::Matched(Box::new(p), wr);
        }
        if q.wrs.len() >= self.depth as usize {
            return RecvPost::Full;
        }
        q.wrs.push_back(wr);
        if self.waiters.load(Ordering::Acquire) > 0 {
            self.posted.notify_all();
        }
        RecvPost::Posted
    }
}

// ---- validated work requests ----

/// One SGE after handle validation.
#[derive(Clone, Default)]
pub struct Sge {
    pub addr: u64,
    pub len: u32,
    pub seg: Option<SegRef>,
}

/// SGEs kept inline in a WR's plan or recv WR.
const INLINE_SGES: usize = 2;

/// A validated SGE list: up to [`INLINE_SGES`] entries stored inline (no heap allocation per WR
/// in the common case), longer lists on the heap. Reads as a `[Sge]`.
#[derive(Clone, Default)]
pub struct SgeList {
    n: usize,
    inline: [Sge; INLINE_SGES],
    heap: Vec<Sge>,
}

impl SgeList {
    pub fn with_len(n: usize) -> SgeList {
        SgeList {
            n: 0,
            inline: Default::default(),
            heap: if n > INLINE_SGES {
                Vec::with_capacity(n)
            } else {
                Vec::new()
            },
        }
    }

    pub fn push(&mut self, e: Sge) {
        if self.heap.capacity() == 0 && self.n < INLINE_SGES {
            self.inline[self.n] = e;
        } else {
            self.heap.push(e);
        }
        self.n += 1;
    }
}

impl std::ops::Deref for SgeList {
    type Target = [Sge];
    fn deref(&self) -> &[Sge] {
        if self.heap.capacity() == 0 {
            &self.inline[..self.n]
        } else {
            &self.heap
        }
    }
}

#[derive(Clone)]
/// A validated send WR, ready to execute.
pub struct Plan {
    /// The row of the WR's opcode in the opcode table (`urma_datapath::opcode`).
    pub op: &'static OpInfo,
    pub flags: u32,
    pub user_ctx: u64,
    pub imm: u64,
    pub tjetty: Option<TJettyRef>,
    pub src: SgeList,
    pub dst: SgeList,
}

/// A two-sided message (SEND/SEND_IMM/WRITE_IMM) that found no recv WR at its target and waits
/// (receiver-not-ready retry) for one, until `deadline`.
pub struct Parked {
    pub sq: Arc<SendQ>,
    pub plan: Plan,
    pub n: u64,
    pub deadline: Instant,
}
