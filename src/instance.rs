//! The single per-process instance (contract §7, D6): atomic init/destroy, handle validation by value,
//! and destroy that cancels every outstanding sync (D5). The requests themselves live in
//! [`crate::request`]; what a worker does with a wake-up is handed in by the caller of [`init`].

use crate::abi::{os_transport_cfg_t, Out, ERR};
use crate::log::{error, info, warning};
use crate::pool::{current_worker, Pool, WorkerCtx, MAX_WORKERS};
use crate::post::RecvQueue;
use crate::request::{self, slots, ReqTable, ReqTables};
use crate::sync_annotate::{self, Mutex, RwLock};
use std::cell::RefCell;
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
    pub recvq: Mutex<RecvQueue>,
    /// `recvq` in one word ([`RecvQueue::encode`]), written under its lock, read without it by
    /// the per-completion re-post and the per-recv prefill check.
    pub recvq_word: AtomicU64,
    /// `recv_queue_capacity`
    pub recv_cap: u32,
    /// `(jfce, jfc, urma_event_mode)` recorded by init / reg_jfc (informational).
    pub jfc_info: Mutex<(usize, usize, bool)>,
}

impl Instance {
    /// Locks the request-table shard of `rid`.
    pub fn reqs(&self, rid: u64) -> ReqTable<'_> {
        self.reqs.lock(rid)
    }
}

static LIVE: RwLock<Option<Arc<Instance>>> = RwLock::new(None);
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
struct Cached {
    /// Epoch `inst` was read in (`u64::MAX`: nothing read yet).
    epoch: u64,
    inst: Option<Arc<Instance>>,
    /// Live [`InstRef::Cached`] borrows of `inst` on this thread (API calls nested through a log
    /// or notify callback): `inst` is never replaced while one exists.
    borrows: usize,
}

thread_local! {
    static CACHED: RefCell<Cached> = const {
        RefCell::new(Cached { epoch: u64::MAX, inst: None, borrows: 0 })
    };
}

/// The validated instance for the duration of one API call.
pub enum InstRef {
    /// Borrowed from this thread's cache, which keeps its `Arc` until the borrow ends.
    Cached(*const Instance),
    /// A clone of the `Arc` (nested calls after a destroy, or a thread being torn down).
    Owned(Arc<Instance>),
}

impl Deref for InstRef {
    type Target = Instance;
    fn deref(&self) -> &Instance {
        match self {
            // SAFETY: the pointer comes from the `Arc` in this thread's `CACHED`, which is not
            // replaced or dropped while `borrows` counts this value (InstRef is !Send, so it is
            // dropped on this thread, and the thread-local outlives any call on the thread).
            InstRef::Cached(p) => unsafe { &**p },
            InstRef::Owned(a) => a,
        }
    }
}

impl Drop for InstRef {
    fn drop(&mut self) {
        if let InstRef::Cached(_) = self {
            let _ = CACHED.try_with(|c| c.borrow_mut().borrows -= 1);
        }
    }
}

/// The live instance if `handle` is its handle.
pub fn get(handle: *mut c_void) -> Option<InstRef> {
    if handle.is_null() {
        return None;
    }
    let epoch = EPOCH.load(Ordering::Acquire);
    let fast = CACHED.try_with(|c| {
        let mut c = c.try_borrow_mut().ok()?;
        if c.epoch != epoch {
            if c.borrows != 0 {
                return None; // an outer call on this thread still uses the cached instance
            }
            let g = sync_annotate::read(&LIVE);
            // Read under the lock, the epoch names exactly the instance (or none) cloned here.
            let fresh = (g.clone(), EPOCH.load(Ordering::Acquire));
            drop(g);
            // The previous instance (if this was its last reference) is dropped here: destroy has
            // stopped its workers already, so dropping it joins nothing.
            (c.inst, c.epoch) = fresh;
        }
        let hit = c
            .inst
            .as_ref()
            .filter(|i| handle_of(i.seq) == handle as usize)
            .map(Arc::as_ptr);
        if hit.is_some() {
            c.borrows += 1;
        }
        Some(hit.map(InstRef::Cached))
    });
    if let Ok(Some(r)) = fast {
        return r;
    }
    let g = sync_annotate::read(&LIVE);
    g.as_ref()
        .filter(|i| handle_of(i.seq) == handle as usize)
        .cloned()
        .map(InstRef::Owned)
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
    let mut g = sync_annotate::write(&LIVE);
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
        recvq: Mutex::new(RecvQueue::None),
        recvq_word: AtomicU64::new(0),
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
    let mut j = sync_annotate::lock(&inst.jfc_info);
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
        let mut g = sync_annotate::write(&LIVE);
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
