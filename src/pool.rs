//! Worker pool (spec §5): `worker_thread_num` threads named `ost_wkr_<n>`, one bounded wake-up queue
//! each, least-loaded worker selection at submit. Right after finishing a task a worker waits
//! briefly without sleeping ([`SPIN_PAUSES`] pause iterations, then `sched_yield` for a budget set
//! by [`Pacer`]: [`SPIN_MIN`], or up to [`SPIN_MAX`] while its recent tasks came that close to each
//! other), so a completion that follows its previous task closely is picked up without a futex
//! sleep and wake-up; after that, and whenever idle, it blocks on a condvar (idle workers never
//! spin). A submitter signals only when the worker has announced that it is going to sleep, and
//! signals after releasing the queue lock.

use crate::spin::{pause_then_yield, Spun};
use crate::sync_annotate::{Condvar, Mutex, MutexGuard};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Pause iterations a worker spends checking its queue right after a task, before yielding.
const SPIN_PAUSES: u32 = 32;
/// Time a worker keeps yielding (checking its queue between yields) right after a task before it
/// blocks on its condvar, when its recent tasks were not close together.
const SPIN_MIN: Duration = Duration::from_micros(50);
/// Longest such wait: used while the recent gaps between a worker's tasks were short (see
/// [`Pacer`]).
const SPIN_MAX: Duration = Duration::from_micros(500);

/// Capacity of each worker's wake-up queue. A request has at most 7 meaningful wake-ups and at most
/// [`crate::request::slots::SYNC_CAPACITY`] requests exist, so 8192 only overflows under a flood of foreign
/// completions; `os_transport_wake_up_task` then returns -1.
pub const WORKER_QUEUE_CAPACITY: usize = 8192;
/// Most worker threads one instance may have (init returns ERR above it).
pub const MAX_WORKERS: u32 = 1024;

/// A queued wake-up: completion for the request in `slot` (generation `gen`) carrying user data
/// `ud` (send side: user_ctx, receive side: decoded imm_data).
#[derive(Clone, Copy, Debug)]
struct Wake {
    slot: u32,
    gen: u32,
    ud: u64,
}

/// Load counters a worker shares with submitters.
#[derive(Debug, Default)]
pub struct WorkerShared {
    /// Not-yet-run tasks of the requests bound to this worker.
    pub tasks: AtomicU32,
    /// A task is executing.
    pub busy: AtomicBool,
}

struct QState {
    /// Preallocated to [`WORKER_QUEUE_CAPACITY`]: pushing never allocates.
    ring: VecDeque<Wake>,
    /// The worker is blocked (or about to block) on `cv`.
    sleeping: bool,
    /// Stop requested: the worker exits before its next wake-up.
    stop: bool,
    /// The worker thread has exited: enqueue fails with [`EnqueueError::Gone`].
    gone: bool,
}

/// One worker's bounded queue.
struct Queue {
    m: Mutex<QState>,
    cv: Condvar,
    /// Queued wake-ups (read without the lock by [`Pool::select`]).
    len: AtomicU32,
}

impl Queue {
    fn new() -> Queue {
        Queue {
            m: Mutex::new(QState {
                ring: VecDeque::with_capacity(WORKER_QUEUE_CAPACITY),
                sleeping: false,
                stop: false,
                gone: false,
            }),
            cv: Condvar::new(),
            len: AtomicU32::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, QState> {
        self.m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Worker side, right after a task: waits (bounded, without sleeping) for a wake-up to be
    /// queued, so that [`Queue::next`] finds it without a futex sleep and wake-up. Returns early
    /// when the queue is non-empty or the pool is stopping.
    ///
    /// No lost wake-up: this loop only reads `len` and never touches `sleeping`. Whatever it
    /// observes, [`Queue::next`] then takes the queue lock and checks the ring itself; it sets
    /// `sleeping` (under the lock) only after finding the ring empty under that same lock, and a
    /// submitter pushes and reads `sleeping` under the lock too. So a push either happens before
    /// the worker's locked check (the worker pops it) or after the worker set `sleeping` (the
    /// submitter sees `sleeping == true` and signals); the spin can only make a pop earlier.
    ///
    /// Returns when the wait started if it ran out of budget (the worker is about to block), so
    /// that the gap until its next wake-up can still be measured.
    fn spin(&self, stopping: &AtomicBool, pacer: &mut Pacer) -> Option<Instant> {
        let ready = || self.len.load(Ordering::Acquire) != 0 || stopping.load(Ordering::Relaxed);
        let budget = pacer.budget();
        match pause_then_yield(ready, SPIN_PAUSES, |start| start + budget) {
            Spun::Ready(gap) => {
                pacer.record(gap);
                None
            }
            Spun::TimedOut(start) => Some(start),
        }
    }

    /// Worker side: the next wake-up, blocking while the queue is empty; `None` once stopped.
    fn next(&self, stopping: &AtomicBool) -> Option<Wake> {
        let mut q = self.lock();
        loop {
            if q.stop || stopping.load(Ordering::Acquire) {
                return None;
            }
            if let Some(w) = q.ring.pop_front() {
                self.len.fetch_sub(1, Ordering::Relaxed);
                return Some(w);
            }
            q.sleeping = true;
            q = self.cv.wait(q).unwrap_or_else(|e| e.into_inner());
            q.sleeping = false;
        }
    }

    fn push(&self, w: Wake) -> Result<(), EnqueueError> {
        let mut q = self.lock();
        if q.gone {
            return Err(EnqueueError::Gone);
        }
        if q.ring.len() >= WORKER_QUEUE_CAPACITY {
            return Err(EnqueueError::Full);
        }
        q.ring.push_back(w);
        self.len.fetch_add(1, Ordering::Relaxed);
        let wake = std::mem::replace(&mut q.sleeping, false);
        drop(q);
        if wake {
            self.cv.notify_one();
        }
        Ok(())
    }

    fn stop(&self) {
        let mut q = self.lock();
        q.stop = true;
        drop(q);
        self.cv.notify_one();
    }

    /// Waits until the worker thread has exited, or `deadline`; `true` if it has.
    fn wait_gone(&self, deadline: Instant) -> bool {
        let mut q = self.lock();
        while !q.gone {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            q = self
                .cv
                .wait_timeout(q, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

/// A worker's estimate of the gap between the end of a task and the arrival of its next wake-up,
/// which sets how long it waits without sleeping after a task.
///
/// Waiting pays when the next wake-up comes sooner than a sleep and a wake-up would cost: a futex
/// wake-up costs the waking thread (the application's polling thread, on the critical path of
/// every chunk) several microseconds in a VM guest and the woken worker tens of microseconds of
/// scheduling. With a steady flow of chunks that arrive every 50-500 µs (2 MiB copies in the
/// software provider, a slow peer) the fixed [`SPIN_MIN`] wait missed every one of them. The
/// estimate is a moving average (weight 1/4) of the measured gaps, each capped at 4 × [`SPIN_MAX`]
/// so that one long idle period does not disable the wait for long. The budget is twice the
/// estimate, within [`SPIN_MIN`]..=[`SPIN_MAX`], and falls back to [`SPIN_MIN`] once the estimate
/// exceeds [`SPIN_MAX`] (tasks too far apart for waiting to pay: the worker sleeps as before).
#[derive(Debug, Default)]
struct Pacer {
    gap_ns: u64,
}

impl Pacer {
    fn budget(&self) -> Duration {
        let est = Duration::from_nanos(self.gap_ns);
        if est > SPIN_MAX {
            SPIN_MIN
        } else {
            (est * 2).clamp(SPIN_MIN, SPIN_MAX)
        }
    }

    fn record(&mut self, gap: Duration) {
        let cap = (SPIN_MAX * 4).as_nanos() as u64;
        let g = (gap.as_nanos() as u64).min(cap);
        self.gap_ns = self.gap_ns - self.gap_ns / 4 + g / 4;
    }
}

struct Worker {
    q: Arc<Queue>,
    shared: Arc<WorkerShared>,
    join: Mutex<Option<JoinHandle<()>>>,
}

/// Identity of the worker running on the current thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerId {
    /// Instance sequence number.
    pub instance: u64,
    /// Worker index.
    pub index: u32,
}

thread_local! {
    static CURRENT: Cell<Option<WorkerId>> = const { Cell::new(None) };
}

/// The worker identity of the calling thread, if it is a library worker.
pub fn current_worker() -> Option<WorkerId> {
    CURRENT.with(|c| c.get())
}

/// Context handed to the message handler.
pub struct WorkerCtx {
    /// Who we are.
    pub id: WorkerId,
    /// Our load counters.
    pub shared: Arc<WorkerShared>,
}

/// The pool.
pub struct Pool {
    workers: Vec<Worker>,
    stopping: Arc<AtomicBool>,
}

/// Error from [`Pool::enqueue`].
#[derive(Debug, PartialEq, Eq)]
pub enum EnqueueError {
    /// The worker's queue is full.
    Full,
    /// The worker has gone.
    Gone,
}

/// Marks the queue gone when the worker thread exits (also on a panic in the handler).
struct GoneOnExit(Arc<Queue>);

impl Drop for GoneOnExit {
    fn drop(&mut self) {
        let mut q = self.0.lock();
        q.gone = true;
        let n = q.ring.len() as u32;
        q.ring.clear();
        self.0.len.fetch_sub(n, Ordering::Relaxed);
        drop(q);
        // Wakes a `wait_gone` (the worker itself no longer waits on this condvar).
        self.0.cv.notify_all();
    }
}

impl Pool {
    /// Starts `n` workers (n ≥ 1) running `handler` for every message.
    pub fn start<H>(n: u32, instance: u64, handler: H) -> std::io::Result<Pool>
    where
        H: Fn(&WorkerCtx, u32, u32, u64) + Send + Sync + Clone + 'static,
    {
        let stopping = Arc::new(AtomicBool::new(false));
        let mut pool = Pool {
            workers: Vec::with_capacity(n as usize),
            stopping: stopping.clone(),
        };
        for index in 0..n {
            let q = Arc::new(Queue::new());
            let shared = Arc::new(WorkerShared::default());
            let ctx = WorkerCtx {
                id: WorkerId { instance, index },
                shared: shared.clone(),
            };
            let stop = stopping.clone();
            let h = handler.clone();
            let wq = q.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("ost_wkr_{index}"))
                .spawn(move || {
                    let guard = GoneOnExit(wq);
                    CURRENT.with(|c| c.set(Some(ctx.id)));
                    let mut pacer = Pacer::default();
                    let mut blocked_since = None;
                    while let Some(w) = guard.0.next(&stop) {
                        if let Some(t) = blocked_since.take() {
                            pacer.record(Instant::elapsed(&t));
                        }
                        h(&ctx, w.slot, w.gen, w.ud);
                        // Only right after a task: an idle worker stays blocked in `next`.
                        blocked_since = guard.0.spin(&stop, &mut pacer);
                    }
                    CURRENT.with(|c| c.set(None));
                });
            match spawned {
                Ok(join) => pool.workers.push(Worker {
                    q,
                    shared,
                    join: Mutex::new(Some(join)),
                }),
                Err(e) => {
                    pool.stop();
                    return Err(e);
                }
            }
        }
        Ok(pool)
    }

    /// Least-loaded worker (spec §5.2): the first idle worker with nothing queued, else the smallest
    /// `(load, busy)` pair, lowest index on ties. `load` = queued tasks + queued wake-ups.
    pub fn select(&self) -> usize {
        let mut best = 0usize;
        let mut best_key = (u64::MAX, true);
        for (i, w) in self.workers.iter().enumerate() {
            let load = u64::from(w.shared.tasks.load(Ordering::Relaxed))
                + u64::from(w.q.len.load(Ordering::Relaxed));
            let busy = w.shared.busy.load(Ordering::Relaxed);
            if load == 0 && !busy {
                return i;
            }
            if (load, busy) < best_key {
                best_key = (load, busy);
                best = i;
            }
        }
        best
    }

    /// Load counters of worker `i`, borrowed.
    pub fn shared_ref(&self, i: usize) -> &Arc<WorkerShared> {
        &self.workers[i].shared
    }

    /// Queues a wake-up to worker `i` without blocking.
    pub fn enqueue(&self, i: usize, slot: u32, gen: u32, ud: u64) -> Result<(), EnqueueError> {
        self.workers[i].q.push(Wake { slot, gen, ud })
    }

    /// Number of workers.
    #[cfg(test)]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    /// Tells every worker to stop after its current task. Queued wake-ups are not processed.
    pub fn signal_stop(&self) {
        self.stopping.store(true, Ordering::Release);
        for w in &self.workers {
            w.q.stop();
        }
    }

    /// Stops every worker after its current task and joins them. Queued wake-ups are not processed.
    pub fn stop(&self) {
        self.signal_stop();
        for w in &self.workers {
            let j = w.join.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(j) = j {
                let _ = j.join();
            }
        }
    }

    /// After [`Pool::signal_stop`]: joins every worker that has exited by `deadline`. A worker still
    /// running a task then (a callback that has not returned) is left to exit on its own when the
    /// task ends, which touches nothing this pool owns: its index is returned.
    pub fn join_until(&self, deadline: Instant) -> Vec<usize> {
        let mut left = Vec::new();
        for (i, w) in self.workers.iter().enumerate() {
            let Some(j) = w.join.lock().unwrap_or_else(|e| e.into_inner()).take() else {
                continue;
            };
            if w.q.wait_gone(deadline) {
                let _ = j.join();
            } else {
                left.push(i); // dropping the handle detaches the thread
            }
        }
        left
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn wakes_run_in_fifo_order_on_named_threads() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let pool = Pool::start(2, 99, move |ctx: &WorkerCtx, slot, _gen, ud| {
            let name = std::thread::current().name().unwrap().to_string();
            assert_eq!(current_worker(), Some(ctx.id));
            s2.lock().unwrap().push((name, slot, ud));
        })
        .unwrap();
        assert_eq!(pool.len(), 2);
        for k in 0..5 {
            pool.enqueue(1, k, 0, u64::from(k) * 10).unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while seen.lock().unwrap().len() < 5 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        pool.stop();
        let v = seen.lock().unwrap();
        assert_eq!(v.len(), 5);
        for (k, (name, slot, ud)) in v.iter().enumerate() {
            assert_eq!(name, "ost_wkr_1");
            assert_eq!(*slot as usize, k);
            assert_eq!(*ud, k as u64 * 10);
        }
        assert_eq!(current_worker(), None);
    }

    #[test]
    fn pacer_waits_longer_only_while_tasks_come_close_together() {
        let mut p = Pacer::default();
        assert_eq!(p.budget(), SPIN_MIN, "no history: the short wait");
        for _ in 0..32 {
            p.record(Duration::from_micros(150));
        }
        let b = p.budget();
        assert!(b > Duration::from_micros(250) && b <= SPIN_MAX, "{b:?}");
        for _ in 0..32 {
            p.record(Duration::from_micros(400));
        }
        assert_eq!(p.budget(), SPIN_MAX, "capped");
        // Tasks far apart: waiting cannot pay, back to the short wait.
        for _ in 0..32 {
            p.record(Duration::from_secs(3));
        }
        assert_eq!(p.budget(), SPIN_MIN);
        // One long idle period is capped, so a few close tasks restore the longer wait.
        for _ in 0..8 {
            p.record(Duration::from_micros(100));
        }
        assert!(p.budget() > SPIN_MIN, "{:?}", p.budget());
        for _ in 0..32 {
            p.record(Duration::ZERO);
        }
        assert_eq!(
            p.budget(),
            SPIN_MIN,
            "back-to-back tasks: the short wait suffices"
        );
    }

    #[test]
    fn selection_prefers_idle_then_least_loaded() {
        let pool = Pool::start(3, 1, |_: &WorkerCtx, _, _, _| {}).unwrap();
        assert_eq!(pool.select(), 0);
        pool.shared_ref(0).tasks.store(3, Ordering::Relaxed);
        assert_eq!(pool.select(), 1);
        pool.shared_ref(1).tasks.store(2, Ordering::Relaxed);
        pool.shared_ref(2).tasks.store(2, Ordering::Relaxed);
        assert_eq!(pool.select(), 1, "tie goes to the lowest index");
        pool.shared_ref(1).busy.store(true, Ordering::Relaxed);
        assert_eq!(pool.select(), 2, "(2,false) < (2,true)");
        pool.stop();
    }
}
