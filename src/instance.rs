//! The single per-process instance (contract §7, D6): atomic init/destroy, handle validation by value,
//! request registration, and destroy that cancels every outstanding sync (D5).

use crate::abi::{os_transport_cfg_t, ERR};
use crate::log::{debug, error, info, warning};
use crate::pool::{current_worker, Pool, MAX_WORKERS};
use crate::post::RecvQueue;
use crate::request::{ReqTable, ReqTables};
use crate::sync::{self, table, Kind, Req};
use crate::sync_annotate::{Mutex, RwLock};
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
            let g = LIVE.read().unwrap_or_else(|e| e.into_inner());
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
    let g = LIVE.read().unwrap_or_else(|e| e.into_inner());
    g.as_ref()
        .filter(|i| handle_of(i.seq) == handle as usize)
        .cloned()
        .map(InstRef::Owned)
}

/// `os_transport_init`.
///
/// # Safety
/// `cfg` and `handle` are NULL or valid pointers.
pub unsafe fn init(cfg: *mut os_transport_cfg_t, handle: *mut *mut c_void) -> u32 {
    info!("os_transport_init called");
    if cfg.is_null() || handle.is_null() {
        error!("os_transport_init: cfg or handle is NULL");
        return ERR;
    }
    // SAFETY: non-NULL handle is a valid out-pointer (caller contract).
    unsafe { *handle = std::ptr::null_mut() };
    // SAFETY: non-NULL cfg points to an os_transport_cfg_t (caller contract).
    let cfg = unsafe { *cfg };
    // Read (and complained about) before any lock is taken.
    let max_inflight = sync::max_inflight_from_env();
    let mut g = LIVE.write().unwrap_or_else(|e| e.into_inner());
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
    let _ = table(); // preallocate the sync table now, not on the first request
    sync::set_max_inflight(max_inflight);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed) + 1;
    let reqs = Arc::new(ReqTables::new());
    let r2 = reqs.clone();
    let pool = match Pool::start(cfg.worker_thread_num, seq, move |ctx, slot, gen, ud| {
        crate::wake::on_wake(ctx, &r2, slot, gen, ud)
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
    // SAFETY: valid out-pointer (checked above).
    unsafe { *handle = handle_of(seq) as *mut c_void };
    info!(
        "os_transport_init: {} workers started",
        cfg.worker_thread_num
    );
    0
}

/// `os_transport_reg_jfc`.
pub fn reg_jfc(jfce: *mut c_void, jfc: *mut c_void, handle: *mut c_void) -> u32 {
    let Some(inst) = get(handle) else {
        error!("os_transport_reg_jfc: not initialized or bad handle");
        return ERR;
    };
    let mut j = inst.jfc_info.lock().unwrap_or_else(|e| e.into_inner());
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
        let mut g = LIVE.write().unwrap_or_else(|e| e.into_inner());
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
    let mut swept = 0;
    for (idx, slot) in table().slots() {
        let mut r = slot.lock();
        if r.live && r.instance == inst.seq {
            swept += 1;
            r.cancel_queued();
            r.cancel_flag = true;
            r.running = 0;
            r.done = true;
            table().finished(&mut r);
            slot.done_hint.store(true, Ordering::Release);
            slot.cv.notify_all();
            if !r.waiting {
                table().free(idx, &mut r);
            }
        }
    }
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

/// Registration failure reasons.
#[derive(Debug, PartialEq, Eq)]
pub enum RegError {
    /// Too many unfinished requests, or the sync table is full.
    Full,
    /// Destroy in progress.
    Closing,
    /// The id is in flight (D7).
    Duplicate,
}

/// Registers a request of `n` tasks under `rid`, binds it to the least-loaded worker and, for a
/// receive, hands it the completions that arrived early (D4). Returns `(slot, gen)`.
pub fn register(
    inst: &Instance,
    kind: Kind,
    rid: u64,
    n: u8,
    fill: impl FnOnce(&mut Req),
) -> Result<(u32, u32), RegError> {
    let tab = table();
    // A refusal is logged by `alloc`, once per burst of refusals.
    let idx = tab.alloc().map_err(|_| RegError::Full)?;
    let mut t = inst.reqs(rid);
    if t.closing {
        tab.unalloc(idx);
        return Err(RegError::Closing);
    }
    if let Some((s, g)) = t.get(rid) {
        let r = tab.slot(s).lock();
        if r.live && r.gen == g && !r.terminal() {
            drop(r);
            tab.unalloc(idx);
            error!("request id {:#x} is already in flight", rid);
            return Err(RegError::Duplicate);
        }
    }
    let w = inst.pool.select();
    let ws = inst.pool.shared_ref(w);
    ws.tasks.fetch_add(u32::from(n), Ordering::Relaxed);
    let slot = tab.slot(idx);
    let mut r = slot.lock();
    // A slot keeps the counters of its last worker when freed: reusing it for the same worker
    // then needs no reference-count update (a write to a line every thread binding requests to
    // that worker shares).
    let keep = r.wshared.take().filter(|a| Arc::ptr_eq(a, ws));
    sync::reset(&mut r);
    r.wshared = Some(keep.unwrap_or_else(|| ws.clone()));
    slot.done_hint.store(false, Ordering::Relaxed);
    r.live = true;
    r.counted = true;
    r.instance = inst.seq;
    r.kind = kind;
    r.rid = rid;
    r.n = n;
    r.worker = w as u32;
    fill(&mut r);
    let gen = r.gen;
    drop(r);
    t.insert(rid, idx, gen);
    if kind == Kind::Recv {
        t.clear_tombstone(rid);
    }
    t.publish(rid, idx, gen);
    debug!(
        1,
        "request {:#x}: registered {} tasks on worker {}", rid, n, w
    );
    Ok((idx, gen))
}

/// Arms the receive registered in `idx` (generation `gen`) once its recv WRs are prefilled: hands
/// it the completions that arrived before it (D4), in arrival order, and from then on lets
/// completions reach it directly. Until then its completions are kept in the stash, so a receive
/// whose prefill fails leaves them there for a retry of the same key.
pub fn arm(inst: &Instance, rid: u64, idx: u32, gen: u32) {
    let mut t = inst.reqs(rid);
    let slot = table().slot(idx);
    let w = {
        let r = slot.lock();
        if !(r.live && r.gen == gen && r.arming) {
            return;
        }
        r.worker as usize
    };
    // Drained under the shard lock, before the request accepts completions: one that arrives
    // meanwhile waits for this lock and finds the kept ones queued ahead of it.
    let pool = &inst.pool;
    t.drain_stash(rid, |e| {
        debug!(
            1,
            "request {:#x}: delivering early completion {:#018x}", rid, e.ud
        );
        if pool.enqueue(w, idx, gen, e.ud).is_err() {
            error!(
                "request {:#x}: worker queue full, early completion lost",
                rid
            );
        }
    });
    let mut r = slot.lock();
    if r.live && r.gen == gen {
        r.arming = false;
    }
}

/// What must happen in the request table after a request became terminal.
#[derive(Clone, Copy, Debug)]
pub struct Cleanup {
    rid: u64,
    slot: u32,
    gen: u32,
    tomb: bool,
}

/// Result of [`settle`]: the request-table cleanup to apply (once per request) and whether a
/// waiter must be woken. Wake it with [`Settled::wake`] after every lock is released, so that the
/// woken waiter does not block on a lock the settling thread still holds.
#[must_use]
#[derive(Clone, Copy, Debug)]
pub struct Settled {
    c: Option<Cleanup>,
    wake: bool,
}

impl Settled {
    /// Wakes the waiter of `slot` if `settle` ended its wait (call with no lock held).
    pub fn wake(&self, slot: &sync::Slot) {
        if self.wake {
            slot.cv.notify_all();
        }
    }
}

/// Call with the slot locked after any state change: sets `done` when every task is accounted,
/// frees the slot if it is terminal and released. Returns the request-table cleanup the caller must
/// apply after dropping the slot lock, and whether a waiter must be woken (see [`Settled`]).
pub fn settle(idx: u32, slot: &sync::Slot, r: &mut Req) -> Settled {
    if r.accounted() {
        r.done = true;
    }
    if r.done {
        slot.done_hint.store(true, Ordering::Release);
    }
    // Only a waiter blocked on the condvar needs a signal (a futex wake-up, paid by the thread
    // that ends the request); one still in its short wait sees `done_hint`.
    let wake = r.sleeping && r.done;
    if !r.terminal() {
        return Settled { c: None, wake };
    }
    // Finished: no longer counts against the in-flight limit, collected or not.
    table().finished(r);
    let c = (!r.cleaned).then_some(Cleanup {
        rid: r.rid,
        slot: idx,
        gen: r.gen,
        // A receive that never armed (its prefill failed) saw no completion: its id is not
        // tombstoned, so completions for it are still kept for a retry.
        tomb: r.kind == Kind::Recv && !r.succeeded() && !r.arming,
    });
    r.cleaned = true;
    if r.released {
        table().free(idx, r);
    }
    Settled { c, wake }
}

/// Accounts the end of a task of the request in `idx` (generation `gen`) that ran with the slot
/// unlocked: `running` -1, then `completed` +1 on success or `on_fail` on failure, and settles.
/// The request-table lock is taken (before the slot lock: lock order) only when the request can
/// end here, so that its end and its table cleanup stay atomic for a racing completion; the
/// common case (more tasks to come) touches only the slot. Nothing happens if destroy swept the
/// request meanwhile.
pub fn end_task(reqs: &ReqTables, idx: u32, gen: u32, ok: bool, on_fail: impl FnOnce(&mut Req)) {
    let slot = table().slot(idx);
    let rid = {
        let mut r = slot.lock();
        if !(r.live && r.gen == gen) {
            return;
        }
        let may_end = r.running <= 1 && r.completed + 1 + r.canceled >= r.n;
        if ok && !may_end {
            r.running = r.running.saturating_sub(1);
            r.completed += 1;
            let c = settle(idx, slot, &mut r);
            drop(r);
            apply(reqs, &c); // no cleanup: the request is not terminal
            c.wake(slot);
            return;
        }
        r.rid
    };
    // The slot cannot be reused meanwhile (this task is still counted in `running`), so `rid`
    // names the shard of this request; the generation is checked again under both locks.
    let mut t = reqs.lock(rid);
    let mut r = slot.lock();
    if !(r.live && r.gen == gen) {
        return;
    }
    r.running = r.running.saturating_sub(1);
    if ok {
        r.completed += 1;
    } else {
        on_fail(&mut r);
    }
    let c = settle(idx, slot, &mut r);
    drop(r);
    apply_locked(&mut t, &c);
    drop(t);
    c.wake(slot);
}

/// Applies a cleanup with the request table already locked.
pub fn apply_locked(t: &mut ReqTable, s: &Settled) {
    if let Some(c) = s.c {
        debug_assert!(t.holds(c.rid), "cleanup applied under another id's shard");
        t.remove_if(c.rid, c.slot, c.gen);
        if c.tomb {
            t.tombstone(c.rid);
        }
    }
}

/// Applies a cleanup (takes the lock of the request's shard).
pub fn apply(reqs: &ReqTables, s: &Settled) {
    if let Some(c) = s.c {
        apply_locked(&mut reqs.lock(c.rid), s);
    }
}
