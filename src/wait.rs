//! `wait_and_free_sync[_timeout]` (§1.7) and `os_transport_cancel_tasks` (§1.8) over the
//! generation-checked sync table.

use crate::abi::{task_sync_t, Out, ERR, WAIT_TIMEOUT};
use crate::instance::Instance;
use crate::log::{debug, error};
use crate::pool::current_worker;
use crate::request::{table, untoken};
use crate::spin::{now_ns, pause_then_yield, Gaps, SpinPolicy, Spun};
use std::cell::Cell;
use std::time::{Duration, Instant};
use urma_sys::{urma_status_t, URMA_SUCCESS};

fn log_live() {
    // The environment is read once per process, and only when DEBUG lines are wanted at all.
    static LIVE_SYNCS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if crate::log::enabled(crate::log::Level::Debug)
        && *LIVE_SYNCS.get_or_init(|| std::env::var_os("OST_DEBUG_LIVE_SYNCS").is_some())
    {
        debug!(2, "live syncs: {}", table().live());
    }
}

/// Pause iterations of a waiter's short wait before it yields.
const WAIT_PAUSES: u32 = 16;
/// When a waiter waits without sleeping before it blocks on the condvar: while this thread's
/// recent waits ended within about the CPU cost of a futex sleep and wake-up, 20 µs (requests in
/// flight back to back: the one waited for usually ends within a few microseconds, and blocking
/// would cost a futex sleep here and a futex wake-up in the thread that ends it, on the critical
/// path of every other request). Longer waits (a large request just submitted, a slow peer) block
/// at once instead of burning a core for the whole transfer.
const WAIT: SpinPolicy = SpinPolicy {
    limit_ns: 20_000,
    min_ns: 10_000,
    max_ns: 40_000,
};

thread_local! {
    /// How long this thread's recent waits lasted.
    static WAIT_GAPS: Cell<Gaps> = const { Cell::new(Gaps::new()) };
}

/// Waits without sleeping, within the budget [`WAIT_GAPS`] gives (and not longer than `max_ns`,
/// what is left of the caller's timeout), until the request of `slot` looks done. Returns the
/// [`now_ns`] reading at which the wait started if the request is not done yet (the caller blocks
/// and then records how long the wait lasted with [`record_wait`]).
fn brief_wait(slot: &crate::request::Slot, max_ns: Option<u64>) -> Option<u64> {
    use std::sync::atomic::Ordering;
    let mut g = WAIT_GAPS.with(Cell::get);
    let blocked = match g.budget(&WAIT) {
        None => Some(now_ns()),
        Some(b) => {
            let done = || slot.done_hint.load(Ordering::Acquire);
            let b = max_ns.map_or(b, |m| b.min(m));
            match pause_then_yield(done, WAIT_PAUSES, b) {
                Spun::Ready(waited) => {
                    g.record(waited, &WAIT);
                    None
                }
                Spun::TimedOut(start) => Some(start),
            }
        }
    };
    WAIT_GAPS.with(|c| c.set(g));
    blocked
}

/// Records the length of a wait that blocked (`since`: a [`now_ns`] reading).
fn record_wait(since: u64) {
    WAIT_GAPS.with(|c| {
        let mut g = c.get();
        g.record(now_ns().wrapping_sub(since), &WAIT);
        c.set(g);
    });
}

/// Both wait functions, with a validated instance and `status` already reset: waits for the
/// request of `sync` (a token, never dereferenced), releases it and reports its status.
pub fn wait(
    inst: &Instance,
    sync: *mut task_sync_t,
    timeout_ms: i64,
    status: Option<Out<'_, urma_status_t>>,
) -> u32 {
    let Some((idx, gen)) = untoken(sync as usize) else {
        error!("wait_and_free_sync: not a sync handle");
        return ERR;
    };
    let slot = table().slot(idx);
    let mut r = slot.guard();
    if !r.usable(gen, inst.seq) {
        error!("wait_and_free_sync: stale or foreign sync handle");
        return ERR;
    }
    if current_worker().is_some_and(|w| r.bound_to(w)) {
        error!("wait_and_free_sync: request {:#x} is bound to the calling worker (would deadlock); sync not consumed", r.rid());
        return ERR;
    }
    r.begin_wait();
    let rid = r.rid();
    debug!(1, "wait start for request {:#x}", rid);
    let deadline = if timeout_ms < 0 {
        None
    } else {
        Instant::now().checked_add(Duration::from_millis(timeout_ms as u64))
    };
    let mut timed_out = false;
    let mut blocked_since = None;
    if !r.done() && timeout_ms != 0 {
        // `waiting` is set, so the slot stays ours while unlocked.
        drop(r);
        // The spin never outlasts the timeout (it started a few instructions ago); the blocking
        // loop below enforces `deadline` itself.
        let left_ns = deadline.map(|_| (timeout_ms as u64).saturating_mul(1_000_000));
        blocked_since = brief_wait(slot, left_ns);
        r = slot.guard();
    }
    while !r.done() {
        if timeout_ms < 0 || deadline.is_none() {
            r = r.sleep(None);
            continue;
        }
        let now = Instant::now();
        let d = deadline.expect("checked");
        if now >= d {
            timed_out = true;
            break;
        }
        r = r.sleep(Some(d - now));
    }
    if let (Some(t), false) = (blocked_since, timed_out) {
        record_wait(t);
    }
    let inner = if timed_out {
        WAIT_TIMEOUT
    } else if r.succeeded() {
        0
    } else {
        ERR
    };
    let mut r = inst.reqs.adopt(idx, r);
    if inner != 0 {
        let removed = if timed_out { r.time_out() } else { r.cancel() };
        debug!(
            1,
            "request {:#x}: wait result {}, {} queued tasks cancelled", rid, inner, removed
        );
    } else {
        debug!(1, "request {:#x}: wait success", rid);
    }
    r.release();
    let st = r.status();
    drop(r);
    if let Some(mut status) = status {
        status.set(st);
    }
    log_live();
    if st != URMA_SUCCESS {
        ERR
    } else {
        inner
    }
}

/// `os_transport_cancel_tasks` with a validated instance: cancels what is queued of `rid` and,
/// when `sync_handle` holds a sync, takes it over (releases it and sets it to NULL).
pub fn cancel(inst: &Instance, sync_handle: Option<&mut *mut task_sync_t>, rid: u64) -> u32 {
    let target = match sync_handle {
        Some(h) if !h.is_null() => {
            let Some((idx, gen)) = untoken(*h as usize) else {
                error!("os_transport_cancel_tasks: not a sync handle");
                return ERR;
            };
            if !table().slot(idx).guard().usable(gen, inst.seq) {
                error!("os_transport_cancel_tasks: stale or foreign sync handle");
                return ERR;
            }
            Some((h, idx, gen))
        }
        _ => None,
    };
    let t = inst.reqs(rid);
    let mut woken = None;
    if let Some((s, g)) = t.get(rid) {
        if let Some(mut r) = t.into_locked(s, g) {
            let removed = r.cancel();
            debug!(
                1,
                "cancel request {:#x}: {} queued tasks removed", rid, removed
            );
            woken = Some(r.finish());
        }
    } else {
        debug!(1, "cancel request {:#x}: no queued tasks", rid);
        drop(t);
    }
    let mut woken_sync = None;
    if let Some((h, idx, gen)) = target {
        // The sync may belong to another id (another shard): lock that one, then check again.
        let trid = table().slot(idx).guard().rid();
        if let Some(mut r) = inst.reqs.locked(trid, idx, gen) {
            if r.usable(gen, inst.seq) {
                r.cancel();
                r.release();
                woken_sync = Some(r.finish());
            }
        }
        *h = std::ptr::null_mut();
    }
    for w in [woken, woken_sync].into_iter().flatten() {
        w.wake();
    }
    log_live();
    0
}
