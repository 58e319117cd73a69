//! The request lifecycle: registration, the one guard under which a request changes state
//! ([`Locked`]), and what ending a request does (settle, request-table cleanup, waking the waiter).
//!
//! * [`slots`]: the process-wide table of generation-checked slots (tokens, the in-flight limit);
//!   each slot holds one request's state.
//! * [`state`]: that state ([`Req`]) and its transitions.
//! * [`index`]: an instance's request-id index (sharded id → slot map, lock-free hints, the
//!   early-completion stash and tombstones).
//! * `padded`: the cache-line padding of the slot table's and the index's shared parts.
//!
//! Other modules lock a request's slot only through one of two guards. A [`Locked`] guard takes
//! the shard of the request id ([`ReqTables::lock`]), then the slot (in rank order: every lock and
//! its rank are in docs/architecture.md, "Locks"), and checks
//! the slot still holds the request; every change that can end a request is a method of it, and
//! when it is dropped after a change it settles the request ([`settle`]: done, finished, freed),
//! releases the slot, applies the request-table cleanup under the shard it holds (or, for a guard
//! of the slot alone, by taking the shard afterwards), releases the shard and only then wakes a
//! blocked waiter, so that the waiter never blocks on a lock the settling thread still holds. A
//! [`SlotGuard`] holds the slot alone and allows reads and the changes that can never end a
//! request (starting a task, a waiter's own flags), which need no settle. The raw slot lock and
//! the ending transitions of [`Req`] are private to this module.

pub mod index;
mod padded;
pub mod slots;
pub mod state;

pub use index::{ReqTable, ReqTables};
use slots::ReqGuard;
pub use slots::{table, token, untoken, Slot};
pub use state::{Job, Kind, Req, SendCtx};

use crate::log::{debug, error};
use crate::pool::Pool;
use std::ops::Deref;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

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

/// Registers request `rid` of instance `instance` with `n` tasks, binds it to the least-loaded
/// worker of `pool` and publishes it in `reqs`. A receive is not armed yet: see [`arm`]. Returns
/// `(slot, gen)`.
pub fn register(
    reqs: &ReqTables,
    pool: &Pool,
    instance: u64,
    rid: u64,
    n: u8,
    job: Job,
) -> Result<(u32, u32), RegError> {
    let tab = table();
    // A refusal is logged by `alloc`, once per burst of refusals.
    let idx = tab.alloc().map_err(|_| RegError::Full)?;
    let mut t = reqs.lock(rid);
    if t.closing {
        tab.unalloc(idx);
        return Err(RegError::Closing);
    }
    if let Some((s, g)) = t.get(rid) {
        let r = tab.slot(s).lock();
        if r.is(g) && !r.terminal() {
            drop(r);
            tab.unalloc(idx);
            error!("request id {:#x} is already in flight", rid);
            return Err(RegError::Duplicate);
        }
    }
    let w = pool.select();
    let ws = pool.shared_ref(w);
    // Only a receive's tasks run on its worker: a send's steps run on the thread that delivers
    // their completions (D15), so they are no load of the worker's (and a send bound to it is
    // not the new request its wait between requests looks out for).
    let on_worker = matches!(job, Job::Recv(_));
    if on_worker {
        ws.tasks.fetch_add(u32::from(n), Ordering::Relaxed);
    }
    let slot = tab.slot(idx);
    let mut r = slot.lock();
    // A slot keeps the counters of its last worker when freed: reusing it for the same worker
    // then needs no reference-count update (a write to a line every thread binding requests to
    // that worker shares).
    let keep = r.wshared.take().filter(|a| Arc::ptr_eq(a, ws));
    r.reset();
    r.wshared = Some(keep.unwrap_or_else(|| ws.clone()));
    slot.done_hint.store(false, Ordering::Relaxed);
    r.start(instance, rid, n, w as u32, job);
    let (gen, kind) = (r.gen, r.kind);
    drop(r);
    t.insert(rid, idx, gen);
    if kind == Kind::Recv {
        t.clear_tombstone(rid);
    }
    t.publish(rid, idx, gen);
    if n != 0 && on_worker {
        pool.bound(w);
    }
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
pub fn arm(reqs: &ReqTables, pool: &Pool, rid: u64, idx: u32, gen: u32) {
    let mut t = reqs.lock(rid);
    let slot = table().slot(idx);
    let w = {
        let r = slot.lock();
        if !(r.is(gen) && r.arming) {
            return;
        }
        r.worker as usize
    };
    // Drained under the shard lock, before the request accepts completions: one that arrives
    // meanwhile waits for this lock and finds the kept ones queued ahead of it.
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
    if r.is(gen) {
        r.arming = false;
    }
}

/// A request locked for a change: the shard of its id (unless the guard holds the slot alone),
/// then its slot, checked to still hold the request. Reads go through `Deref`; every change marks
/// the request changed, and dropping (or [`Locked::finish`]ing) a changed guard settles it: see
/// the module documentation for the order.
pub struct Locked<'a> {
    tables: &'a ReqTables,
    /// The shard of the request's id (`None`: the guard holds the slot alone, and a cleanup takes
    /// the shard after the slot is released).
    shard: Option<ReqTable<'a>>,
    idx: u32,
    slot: &'static Slot,
    /// `None` once released.
    r: Option<ReqGuard<'static>>,
    changed: bool,
}

impl ReqTables {
    /// Locks the shard of `rid`, then slot `idx`; `None` (both released) unless the slot still
    /// holds generation `gen`.
    #[inline(always)]
    pub fn locked(&self, rid: u64, idx: u32, gen: u32) -> Option<Locked<'_>> {
        self.lock(rid).into_locked(idx, gen)
    }

    /// Turns slot `idx`, already locked by the caller (a waiter that blocked on the slot's
    /// condvar), into a guard of the slot alone that may end the request.
    #[inline]
    pub fn adopt(&self, idx: u32, g: SlotGuard<'static>) -> Locked<'_> {
        debug_assert!(std::ptr::eq(g.slot, table().slot(idx)));
        Locked {
            tables: self,
            shard: None,
            idx,
            slot: g.slot,
            r: Some(g.r),
            changed: false,
        }
    }
}

impl<'a> ReqTable<'a> {
    /// With this shard locked, locks slot `idx`; `None` (both released) unless it still holds
    /// generation `gen`.
    #[inline(always)]
    pub fn into_locked(self, idx: u32, gen: u32) -> Option<Locked<'a>> {
        let slot = table().slot(idx);
        let r = slot.lock();
        if !r.is(gen) {
            return None;
        }
        Some(Locked {
            tables: self.tables(),
            shard: Some(self),
            idx,
            slot,
            r: Some(r),
            changed: false,
        })
    }
}

impl Deref for Locked<'_> {
    type Target = Req;
    #[inline(always)]
    fn deref(&self) -> &Req {
        self.r.as_ref().expect("guard held")
    }
}

/// A waiter to wake once every lock is released (see [`Locked::finish`]).
#[must_use = "the waiter is woken by `wake`"]
pub struct Wake {
    slot: &'static Slot,
    wake: bool,
}

impl Wake {
    /// Wakes the waiter blocked on the request's condvar, if ending the request ended its wait.
    #[inline(always)]
    pub fn wake(self) {
        if self.wake {
            self.slot.cv.notify_all();
        }
    }
}

impl Locked<'_> {
    /// The request, for a change: dropping the guard will settle it.
    #[inline(always)]
    fn req(&mut self) -> &mut Req {
        self.changed = true;
        self.r.as_mut().expect("guard held")
    }

    /// [`Req::record_status`].
    #[inline]
    pub fn record_status(&mut self, st: i32) {
        self.req().record_status(st);
    }

    /// [`Req::fail`].
    #[inline]
    pub fn fail(&mut self) {
        self.req().fail();
    }

    /// [`Req::cancel`].
    #[inline]
    pub fn cancel(&mut self) -> u8 {
        self.req().cancel()
    }

    /// [`Req::time_out`].
    #[inline]
    pub fn time_out(&mut self) -> u8 {
        self.req().time_out()
    }

    /// [`Req::release`].
    #[inline]
    pub fn release(&mut self) {
        self.req().release();
    }

    /// Settles (if changed) and releases every lock, but leaves waking the waiter to the caller
    /// (who may have more to do first without any lock held).
    pub fn finish(mut self) -> Wake {
        self.unlock()
    }

    #[inline(always)]
    fn unlock(&mut self) -> Wake {
        let mut w = Wake {
            slot: self.slot,
            wake: false,
        };
        let Some(mut r) = self.r.take() else {
            return w;
        };
        if !self.changed {
            drop(r);
            drop(self.shard.take());
            return w;
        }
        let s = settle(self.idx, self.slot, &mut r);
        drop(r);
        match self.shard.take() {
            Some(mut t) => {
                apply_locked(&mut t, &s);
                drop(t);
            }
            None => apply(self.tables, &s),
        }
        w.wake = s.wake;
        w
    }
}

impl Drop for Locked<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.unlock().wake();
    }
}

/// A request's slot locked for reads and for the changes that can never end the request, and so
/// need no settle: starting a task and a waiter's own flags. Every other change goes through
/// [`Locked`] (a waiter turns its guard into one with [`ReqTables::adopt`]).
pub struct SlotGuard<'a> {
    slot: &'a Slot,
    r: ReqGuard<'a>,
}

impl Slot {
    /// Locks the slot for reads and the changes of a [`SlotGuard`].
    #[inline(always)]
    pub fn guard(&self) -> SlotGuard<'_> {
        SlotGuard {
            slot: self,
            r: self.lock(),
        }
    }
}

impl Deref for SlotGuard<'_> {
    type Target = Req;
    #[inline(always)]
    fn deref(&self) -> &Req {
        &self.r
    }
}

impl SlotGuard<'_> {
    /// [`Req::begin_send_task`].
    #[inline(always)]
    pub fn begin_send_task(&mut self) -> state::SendTask {
        self.r.begin_send_task()
    }

    /// [`Req::begin_recv_task`].
    #[inline(always)]
    pub fn begin_recv_task(&mut self, i: u8) -> crate::abi::notify_callback_t {
        self.r.begin_recv_task(i)
    }

    /// [`Req::begin_wait`].
    #[inline]
    pub fn begin_wait(&mut self) {
        self.r.begin_wait();
    }

    /// Unlocks, blocks on the slot's condvar until notified (or spuriously, or after `timeout`)
    /// and relocks; the request is marked as having a sleeping waiter meanwhile, so that ending
    /// it signals the condvar.
    pub fn sleep(mut self, timeout: Option<Duration>) -> Self {
        self.r.set_sleeping(true);
        let slot = self.slot;
        let mut r = match timeout {
            None => slot.cv.wait(self.r).unwrap_or_else(|e| e.into_inner()),
            Some(d) => {
                slot.cv
                    .wait_timeout(self.r, d)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
        };
        r.set_sleeping(false);
        SlotGuard { slot, r }
    }
}

/// What must happen in the request table after a request became terminal.
#[derive(Clone, Copy, Debug)]
struct Cleanup {
    rid: u64,
    slot: u32,
    gen: u32,
    tomb: bool,
}

/// Result of [`settle`]: the request-table cleanup to apply (once per request) and whether a
/// waiter must be woken (after every lock is released).
#[must_use]
#[derive(Clone, Copy, Debug)]
struct Settled {
    c: Option<Cleanup>,
    wake: bool,
}

/// With the slot locked after any state change: sets `done` when every task is accounted, frees
/// the slot if it is terminal and released. Returns the request-table cleanup to apply after the
/// slot lock is dropped, and whether a waiter must be woken.
#[inline]
fn settle(idx: u32, slot: &Slot, r: &mut Req) -> Settled {
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

/// Applies a cleanup with the request table already locked.
fn apply_locked(t: &mut ReqTable, s: &Settled) {
    if let Some(c) = s.c {
        debug_assert!(t.holds(c.rid), "cleanup applied under another id's shard");
        t.remove_if(c.rid, c.slot, c.gen);
        if c.tomb {
            t.tombstone(c.rid);
        }
    }
}

/// Applies a cleanup (takes the lock of the request's shard).
fn apply(reqs: &ReqTables, s: &Settled) {
    if let Some(c) = s.c {
        apply_locked(&mut reqs.lock(c.rid), s);
    }
}

/// Accounts the end of a task of the request in `idx` (`slot`, generation `gen`) that ran with the slot
/// unlocked: success (`failed` is `None`), or failure with `Some(status)` (0: no status to
/// record), which fails the request (see [`Req::end_task`]). The shard lock is taken (before the
/// slot lock: lock order) only when the request can end here, so that its end and its table
/// cleanup stay atomic for a racing completion; the common case (more tasks to come) touches only
/// the slot. Nothing happens if destroy swept the request meanwhile.
///
/// The common case is the hot path of every chunk: it is written out here, inside the lifecycle,
/// with the slot lock alone and no guard value (a [`Locked`] built, moved and dropped costs about 60
/// instructions more per chunk, measured by `make bench-quick`); it cannot end the request, so it
/// has no cleanup.
#[inline]
pub fn end_task(reqs: &ReqTables, idx: u32, slot: &'static Slot, gen: u32, failed: Option<i32>) {
    debug_assert!(std::ptr::eq(slot, table().slot(idx)));
    let rid = {
        let mut r = slot.lock();
        if !r.is(gen) {
            return;
        }
        if failed.is_none() && !r.may_end() {
            r.end_task(None);
            let s = settle(idx, slot, &mut r);
            drop(r);
            debug_assert!(s.c.is_none(), "a request that did not end has no cleanup");
            Wake { slot, wake: s.wake }.wake();
            return;
        }
        r.rid
    };
    // The slot cannot be reused meanwhile (this task is still counted in `running`), so `rid`
    // names the shard of this request; the generation is checked again under both locks.
    if let Some(mut l) = reqs.locked(rid, idx, gen) {
        l.req().end_task(failed);
    }
}

/// Destroy of instance `instance`: completes every one of its requests as cancelled (waking their
/// waiters) and frees the slots nobody waits on. Returns how many requests were swept.
pub fn sweep_instance(instance: u64) -> usize {
    let mut swept = 0;
    for (idx, slot) in table().slots() {
        let mut r = slot.lock();
        if r.live && r.instance == instance {
            swept += 1;
            r.sweep_on_destroy();
            table().finished(&mut r);
            slot.done_hint.store(true, Ordering::Release);
            slot.cv.notify_all();
            if !r.waiting {
                table().free(idx, &mut r);
            }
        }
    }
    swept
}
