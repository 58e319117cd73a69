//! The single per-process instance (contract §7, D6): atomic init/destroy, handle validation by value,
//! and destroy that cancels every outstanding sync (D5). The requests themselves live in
//! [`crate::request`]; what a worker does with a wake-up is handed in by the caller of [`init`].

use crate::abi::{os_transport_cfg_t, Out, ERR};
use crate::log::{error, info, warning};
use crate::pool::{current_worker, Pool, WorkerCtx, MAX_WORKERS};
use crate::request::{self, slots, ReqTable, ReqTables};
use crate::urma::{RecvQueue, RecvQueueWord};
use ranked_lock::{rank, Mutex, RwLock};
use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const HANDLE_TAG: u64 = 0x5A << 40;

/// The live instance.
pub struct Instance {
    /// Sequence number (distinct for every successful init in the process).
    pub seq: u64,
    /// Request table.
    pub reqs: Arc<ReqTables>,
    /// Workers.
    pub pool: Pool,
    /// Receive queue recorded by the last prefill (one slot, like legacy; D6: may be a JFR).
    pub recvq: Mutex<Option<RecvQueue>, { rank::RECV_QUEUE }>,
    /// `recvq` in one word, written under its lock, read without it by the per-completion
    /// re-post and the per-recv prefill check.
    pub recvq_word: RecvQueueWord,
    /// `recv_queue_capacity`
    pub recv_cap: u32,
    /// `(jfce, jfc, urma_event_mode)` recorded by init / reg_jfc (informational).
    pub jfc_info: Mutex<(usize, usize, bool), { rank::JFC_INFO }>,
}

impl Instance {
    /// Locks the request-table shard of `rid`.
    pub fn reqs(&self, rid: u64) -> ReqTable<'_> {
        self.reqs.lock(rid)
    }
}

static LIVE: RwLock<Option<Arc<Instance>>, { rank::INSTANCE }> = RwLock::new(None);
static SEQ: AtomicU64 = AtomicU64::new(0);

/// Opaque handle value of instance `seq` (never dereferenced, compared by value).
pub fn handle_of(seq: u64) -> usize {
    (HANDLE_TAG | ((seq & 0xF_FFFF_FFFF) << 4)) as usize
}

/// Bumped (with `LIVE` write-locked) by every init and destroy: a thread's cached instance is valid
/// only for the epoch it was read in.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// A thread's view of `LIVE`, so that validating a handle writes no shared cache line: read-locking
/// `LIVE` and cloning the `Arc` are two atomic read-modify-writes on lines that every thread calling
/// the API writes too (the polling thread calls `os_transport_wake_up_task` for every completion).
///
/// The check of every call reads only [`Fast`], a thread-local with a constant initialiser and no
/// destructor: one thread-local lookup, no lazy-registration check, no `RefCell` flag, and the
/// borrow it hands out points back at it, so ending the borrow costs no lookup either. The `Arc`
/// that keeps the cached instance alive is in [`OWNER`], touched only when the epoch changed.
struct Fast {
    /// Epoch `inst` was read in (`u64::MAX`: nothing read yet, or [`OWNER`] is gone).
    epoch: Cell<u64>,
    /// Handle of `inst` (0, which no handle is, when there is no instance).
    handle: Cell<usize>,
    /// The instance [`OWNER`] holds (NULL when none).
    inst: Cell<*const Instance>,
    /// Live cached [`InstRef`] borrows of `inst` on this thread (API calls nested through a log
    /// or notify callback): `inst` is never replaced while one exists.
    borrows: Cell<usize>,
}

/// Holds the `Arc` behind [`Fast::inst`]; invalidates [`Fast`] before letting it go (thread exit).
struct Owner(Option<Arc<Instance>>);

impl Drop for Owner {
    fn drop(&mut self) {
        // FAST has no destructor, so it is still there while this one runs.
        let _ = FAST.try_with(|f| {
            f.epoch.set(u64::MAX);
            f.inst.set(std::ptr::null());
            f.handle.set(0);
        });
    }
}

thread_local! {
    static FAST: Fast = const {
        Fast {
            epoch: Cell::new(u64::MAX),
            handle: Cell::new(0),
            inst: Cell::new(std::ptr::null()),
            borrows: Cell::new(0),
        }
    };
    static OWNER: RefCell<Owner> = const { RefCell::new(Owner(None)) };
}

/// The validated instance for the duration of one API call; only [`get`] makes one.
pub struct InstRef(Ref);

/// What an [`InstRef`] holds (private: a cached borrow is dereferenced, so only [`get`], which
/// counts it in [`Fast::borrows`], may make one).
enum Ref {
    /// Borrowed from this thread's cache ([`Fast`], second field), which keeps its `Arc` until the
    /// borrow ends.
    Cached(*const Instance, *const Fast),
    /// A clone of the `Arc` (nested calls after a destroy, or a thread being torn down).
    Owned(Arc<Instance>),
}

impl Deref for InstRef {
    type Target = Instance;
    #[inline]
    fn deref(&self) -> &Instance {
        match &self.0 {
            // SAFETY: the pointer is the `Arc` held by this thread's `OWNER`, which is not
            // replaced or dropped while `borrows` counts this value (InstRef is !Send, so it is
            // dropped on this thread, and `Owner` invalidates the cache before it lets go).
            Ref::Cached(p, _) => unsafe { &**p },
            Ref::Owned(a) => a,
        }
    }
}

impl Drop for InstRef {
    #[inline]
    fn drop(&mut self) {
        if let Ref::Cached(_, f) = self.0 {
            // SAFETY: `f` is this thread's FAST (InstRef is !Send), which has a constant
            // initialiser and no destructor: valid for as long as the thread runs code.
            let f = unsafe { &*f };
            f.borrows.set(f.borrows.get() - 1);
        }
    }
}

/// The live instance if `handle` is its handle.
#[inline]
pub fn get(handle: *mut c_void) -> Option<InstRef> {
    if handle.is_null() {
        return None;
    }
    let epoch = EPOCH.load(Ordering::Acquire);
    let fp = FAST.with(|f| f as *const Fast);
    // SAFETY: this thread's FAST: constant initialiser, no destructor, valid while the thread runs.
    let f = unsafe { &*fp };
    if f.epoch.get() == epoch {
        if f.handle.get() != handle as usize {
            return None;
        }
        f.borrows.set(f.borrows.get() + 1);
        return Some(InstRef(Ref::Cached(f.inst.get(), fp)));
    }
    refresh(handle, f, fp)
}

/// [`get`] when this thread's cache is from another epoch: re-reads `LIVE` into it, or (a borrow of
/// the old instance is still alive on this thread, or the thread is being torn down) clones the
/// `Arc` for this call alone.
#[cold]
fn refresh(handle: *mut c_void, f: &Fast, fp: *const Fast) -> Option<InstRef> {
    if f.borrows.get() == 0 {
        let refreshed = OWNER.try_with(|o| {
            let mut o = o.try_borrow_mut().ok()?;
            let g = ranked_lock::read(&LIVE);
            // Read under the lock, the epoch names exactly the instance (or none) cloned here.
            let (inst, epoch) = (g.clone(), EPOCH.load(Ordering::Acquire));
            drop(g);
            f.epoch.set(u64::MAX);
            f.handle.set(inst.as_ref().map_or(0, |i| handle_of(i.seq)));
            f.inst
                .set(inst.as_ref().map_or(std::ptr::null(), Arc::as_ptr));
            // The previous instance (if this was its last reference) is dropped here: destroy has
            // stopped its workers already, so dropping it joins nothing.
            o.0 = inst;
            drop(o);
            f.epoch.set(epoch);
            Some(())
        });
        if let Ok(Some(())) = refreshed {
            if f.handle.get() != handle as usize {
                return None;
            }
            f.borrows.set(f.borrows.get() + 1);
            return Some(InstRef(Ref::Cached(f.inst.get(), fp)));
        }
    }
    let g = ranked_lock::read(&LIVE);
    g.as_ref()
        .filter(|i| handle_of(i.seq) == handle as usize)
        .cloned()
        .map(|a| InstRef(Ref::Owned(a)))
}

/// What a worker runs for each wake-up queued to it: `(worker, requests, slot, gen, user data)`.
pub trait Handler:
    Fn(&WorkerCtx, &ReqTables, u32, u32, u64) + Send + Sync + Copy + 'static
{
}
impl<H: Fn(&WorkerCtx, &ReqTables, u32, u32, u64) + Send + Sync + Copy + 'static> Handler for H {}

/// `os_transport_init` (after the NULL checks): creates the instance configured by `cfg`, whose
/// workers run `handler`, and stores its handle in `handle` (NULL first, so it stays NULL on any
/// failure).
pub fn init(
    cfg: &os_transport_cfg_t,
    mut handle: Out<'_, *mut c_void>,
    handler: impl Handler,
) -> u32 {
    handle.set(std::ptr::null_mut());
    let cfg = *cfg;
    // Read (and complained about) before any lock is taken.
    let max_inflight = slots::max_inflight_from_env();
    let mut g = ranked_lock::write(&LIVE);
    if g.is_some() {
        error!("os_transport_init: already initialized (one instance per process)");
        return ERR;
    }
    if cfg.worker_thread_num == 0 {
        warning!("os_transport_init: worker_thread_num is 0, no instance created");
        return 0;
    }
    if cfg.worker_thread_num > MAX_WORKERS {
        error!(
            "os_transport_init: worker_thread_num {} exceeds {}",
            cfg.worker_thread_num, MAX_WORKERS
        );
        return ERR;
    }
    let _ = slots::table(); // preallocate the sync table now, not on the first request
    slots::set_max_inflight(max_inflight);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed) + 1;
    let reqs = Arc::new(ReqTables::new());
    let r2 = reqs.clone();
    let pool = match Pool::start(cfg.worker_thread_num, seq, move |ctx, slot, gen, ud| {
        handler(ctx, &r2, slot, gen, ud)
    }) {
        Ok(p) => p,
        Err(e) => {
            error!("os_transport_init: cannot start workers: {}", e);
            return ERR;
        }
    };
    let inst = Instance {
        seq,
        reqs,
        pool,
        recvq: Mutex::new(None),
        recvq_word: RecvQueueWord::new(),
        recv_cap: cfg.recv_queue_capacity,
        jfc_info: Mutex::new((cfg.jfce as usize, cfg.jfc as usize, cfg.urma_event_mode)),
    };
    *g = Some(Arc::new(inst));
    EPOCH.fetch_add(1, Ordering::Release);
    handle.set(handle_of(seq) as *mut c_void);
    info!(
        "os_transport_init: {} workers started",
        cfg.worker_thread_num
    );
    0
}

/// `os_transport_reg_jfc` with a validated instance (the pointers are only recorded).
pub fn reg_jfc(inst: &Instance, jfce: *mut c_void, jfc: *mut c_void) -> u32 {
    let mut j = ranked_lock::lock(&inst.jfc_info);
    j.0 = jfce as usize;
    j.1 = jfc as usize;
    info!("os_transport_reg_jfc: jfce/jfc recorded");
    0
}

/// `os_transport_destroy`.
pub fn destroy(handle: *mut c_void) -> u32 {
    info!("os_transport_destroy called");
    if handle.is_null() {
        return ERR;
    }
    let inst = {
        let mut g = ranked_lock::write(&LIVE);
        match g.as_ref() {
            Some(i) if handle_of(i.seq) == handle as usize => {
                if current_worker().is_some_and(|w| w.instance == i.seq) {
                    error!(
                        "os_transport_destroy: called from a library worker (would join itself)"
                    );
                    return ERR;
                }
                let taken = g.take().expect("checked");
                EPOCH.fetch_add(1, Ordering::Release);
                taken
            }
            _ => {
                error!("os_transport_destroy: not initialized or bad handle");
                return ERR;
            }
        }
    };
    inst.reqs.for_each_shard(|s| s.closing = true);
    // Workers finish their current task and take no new one. Every request is then completed as
    // cancelled before the workers are joined, so that a notify_callback blocked in a wait on one
    // of them returns (ERR) and lets its worker exit.
    inst.pool.signal_stop();
    let swept = request::sweep_instance(inst.seq);
    let bound = destroy_join_bound();
    let left = inst.pool.join_until(Instant::now() + bound);
    if !left.is_empty() {
        error!(
            "os_transport_destroy: {} worker(s) (first: ost_wkr_{}) still running a callback after \
             {} ms; destroy returns without them, they exit when their callbacks return",
            left.len(),
            left[0],
            bound.as_millis()
        );
    }
    info!(
        "os_transport_destroy: done, {} outstanding requests cancelled",
        swept
    );
    0
}

/// Longest time `os_transport_destroy` waits for the workers to finish their current task.
pub const DESTROY_JOIN_BOUND: Duration = Duration::from_secs(5);
static DESTROY_JOIN_BOUND_MS: AtomicU64 = AtomicU64::new(DESTROY_JOIN_BOUND.as_millis() as u64);

fn destroy_join_bound() -> Duration {
    Duration::from_millis(DESTROY_JOIN_BOUND_MS.load(Ordering::Relaxed))
}

/// Sets the bound of [`destroy_join_bound`]. Test-only hook (not a C export).
#[doc(hidden)]
pub fn set_destroy_join_bound(d: Duration) {
    DESTROY_JOIN_BOUND_MS.store(d.as_millis() as u64, Ordering::Relaxed);
}
