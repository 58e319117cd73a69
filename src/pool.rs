//! Worker pool (contract §5): `worker_thread_num` threads named `ost_wkr_<n>`, one bounded wake-up queue
//! each, least-loaded worker selection at submit. Right after finishing a task a worker may wait
//! briefly without sleeping ([`SPIN_PAUSES`] pause iterations, then `sched_yield`), so that a
//! completion that follows its previous task closely is picked up without a futex sleep and
//! wake-up; it does so only while its recent wake-ups in the same situation came that close
//! ([`Gaps`]; three situations, [`POLICIES`]: more chunks of the request just served are coming,
//! a new receive was just bound to the worker, or neither). Otherwise, after the budget, and
//! whenever idle, it blocks on a condvar at once (idle workers never spin). A submitter signals
//! only when the worker has announced that it is going to sleep, and signals after releasing the
//! queue lock. A worker that blocks between requests may ask to be woken as soon as a request is
//! bound to it ([`Pool::bound`]), so that it waits for that request's first chunk awake.

use crate::spin::{now_ns, pause_then_yield, Gaps, SpinPolicy, Spun};
use crate::user_data::{UserData, CHUNK_TYPE_LAST};
use ranked_lock::{rank, Condvar, Mutex, MutexGuard};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// Pause iterations a worker spends checking its queue right after a task, before yielding.
const SPIN_PAUSES: u32 = 8;

/// The three waits after a task (indices of [`Pace::gaps`] and [`POLICIES`]).
const BETWEEN: usize = 0;
const IN_REQUEST: usize = 1;
const REGISTERED: usize = 2;

/// When each wait after a task pays.
///
/// - [`BETWEEN`], after the last chunk of a request: waits for a new receive to be bound to the
///   worker (its load counter grows) or for a wake-up, only while they have been coming within
///   20 µs, the cost of the sleep and wake-up it saves (closed loops: the application submits
///   again as soon as its wait returns, 9-12 µs later with a polling application and 19-20 µs
///   with an event-driven one at depth 1). At paced loads the next request is tens of
///   microseconds or more away and the worker blocks at once.
/// - [`REGISTERED`], once a new receive is bound to the worker: its first chunk is one provider
///   round trip away, a few microseconds with a polling application; with an event-driven one it
///   also waits for two kernel wake-ups of the application's event threads (the thread woken for
///   WRITE 0's completion posts SEND_IMM 0, then the receiver's is woken for the chunk). Waits
///   while that took at most 60 µs: a worker that sleeps through it is woken by the chunk itself,
///   which adds its wake-up to that chunk's latency, while the paced cells measured no library
///   CPU per pair for the longer wait beyond their noise (30 µs gave the higher event-mode p99 in
///   four of five interleaved batches; docs/performance.md, "Waiting strategy").
/// - [`IN_REQUEST`], after a chunk that is not its request's last: the next chunk is on its way.
///   Up to 500 µs while the recent gaps between chunks were that short: a steady flow of chunks
///   50-500 µs apart (2 MiB copies in the software provider, a slow peer) is then picked up
///   without a futex wake-up, which would cost the thread that delivers the completions (on the
///   critical path of every chunk) several microseconds per chunk.
///
/// The limits are about the CPU cost of a futex sleep and wake-up on the build machine (a KVM
/// guest: 10-20 µs between the waker's syscall, the IPI and the two context switches); see
/// docs/performance.md, "Waiting strategy".
const POLICIES: [SpinPolicy; 3] = [
    SpinPolicy {
        limit_ns: 20_000,
        min_ns: 4_000,
        max_ns: 40_000,
    },
    SpinPolicy {
        limit_ns: 500_000,
        min_ns: 10_000,
        max_ns: 500_000,
    },
    SpinPolicy {
        limit_ns: 60_000,
        min_ns: 10_000,
        max_ns: 120_000,
    },
];

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
    /// Not-yet-run tasks of the receives bound to this worker (a send's steps do not run on its
    /// worker and are not counted).
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
    /// A request was bound to the worker while it slept between requests ([`Pool::bound`]):
    /// [`Queue::next`] returns [`Next::Bound`] instead of sleeping on.
    kick: bool,
}

/// One worker's bounded queue.
struct Queue {
    m: Mutex<QState, { rank::WORKER_QUEUE }>,
    cv: Condvar,
    /// Queued wake-ups (read without the lock by [`Pool::select`]).
    len: AtomicU32,
    /// The worker sleeps (or is about to) between requests, and would wait for a new request's
    /// first chunk without sleeping: binding a request to it wakes it at once ([`Pool::bound`]),
    /// so that its wake-up overlaps the provider's round trip instead of following the chunk.
    kickable: AtomicBool,
}

impl Queue {
    fn new() -> Queue {
        Queue {
            m: Mutex::new(QState {
                ring: VecDeque::with_capacity(WORKER_QUEUE_CAPACITY),
                sleeping: false,
                stop: false,
                gone: false,
                kick: false,
            }),
            cv: Condvar::new(),
            len: AtomicU32::new(0),
            kickable: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, QState, { rank::WORKER_QUEUE }> {
        self.m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Worker side, right after a task (`more`: the request it served has chunks to come):
    /// waits (bounded, without sleeping) for a wake-up to be queued, so that [`Queue::next`] finds
    /// it without a futex sleep and wake-up, when `pace` says it is worth it. Returns early when
    /// the queue is non-empty or the pool is stopping.
    ///
    /// No lost wake-up: this loop only reads `len` (and the load counters) and never touches
    /// `sleeping`. Whatever it observes, [`Queue::next`] then takes the queue lock and checks the
    /// ring itself; it sets `sleeping` (under the lock) only after finding the ring empty under
    /// that same lock, and a submitter pushes and reads `sleeping` under the lock too. So a push
    /// either happens before the worker's locked check (the worker pops it) or after the worker
    /// set `sleeping` (the submitter sees `sleeping == true` and signals); the spin can only make
    /// a pop earlier.
    fn spin(&self, stopping: &AtomicBool, shared: &WorkerShared, more: bool, pace: &mut Pace) {
        let queued = || self.len.load(Ordering::Acquire) != 0 || stopping.load(Ordering::Relaxed);
        let mut k = IN_REQUEST;
        if !more {
            // The request just served has no chunk left: wait for a new request to be bound to
            // this worker (or for a wake-up), while they have been coming that close.
            let Some(b) = pace.gaps[BETWEEN].budget(&POLICIES[BETWEEN]) else {
                pace.blocked = Some((now_ns(), BETWEEN));
                self.arm_kick(pace);
                return;
            };
            let before = shared.tasks.load(Ordering::Relaxed);
            let next = || queued() || shared.tasks.load(Ordering::Relaxed) > before;
            match pause_then_yield(next, SPIN_PAUSES, b) {
                Spun::Ready(gap) => {
                    pace.gaps[BETWEEN].record(gap, &POLICIES[BETWEEN]);
                    if queued() {
                        return;
                    }
                    k = REGISTERED;
                }
                Spun::TimedOut(t) => {
                    pace.blocked = Some((t, BETWEEN));
                    self.arm_kick(pace);
                    return;
                }
            }
        }
        self.spin_for_chunk(stopping, k, pace);
    }

    /// Worker side, about to block between requests: asks to be woken as soon as a request is
    /// bound to it when waiting for that request's first chunk without sleeping pays (its recent
    /// first chunks came within [`REGISTERED`]'s limit); otherwise the chunk's own wake-up will do.
    fn arm_kick(&self, pace: &Pace) {
        if pace.gaps[REGISTERED].would_spin(&POLICIES[REGISTERED]) {
            self.kickable.store(true, Ordering::Release);
        }
    }

    /// Worker side: waits (bounded, without sleeping) for the next chunk of the request just
    /// served (`k` = [`IN_REQUEST`]) or for the first chunk of a request just bound to this
    /// worker ([`REGISTERED`]), when `pace` says it is worth it.
    fn spin_for_chunk(&self, stopping: &AtomicBool, k: usize, pace: &mut Pace) {
        let queued = || self.len.load(Ordering::Acquire) != 0 || stopping.load(Ordering::Relaxed);
        // The next chunk of the request just served (or the first of a request just bound to this
        // worker) is on its way.
        let Some(b) = pace.gaps[k].budget(&POLICIES[k]) else {
            pace.blocked = Some((now_ns(), k));
            return;
        };
        match pause_then_yield(queued, SPIN_PAUSES, b) {
            Spun::Ready(gap) => pace.gaps[k].record(gap, &POLICIES[k]),
            Spun::TimedOut(t) => pace.blocked = Some((t, k)),
        }
    }

    /// Worker side: the next wake-up, blocking while the queue is empty; [`Next::Bound`] when a
    /// request was bound to it meanwhile ([`Pool::bound`]); [`Next::Stop`] once stopped.
    fn next(&self, stopping: &AtomicBool) -> Next {
        let mut q = self.lock();
        loop {
            if q.stop || stopping.load(Ordering::Acquire) {
                return Next::Stop;
            }
            if let Some(w) = q.ring.pop_front() {
                self.len.fetch_sub(1, Ordering::Relaxed);
                self.kickable.store(false, Ordering::Relaxed);
                q.kick = false;
                return Next::Wake(w);
            }
            if std::mem::replace(&mut q.kick, false) {
                return Next::Bound;
            }
            q.sleeping = true;
            q = self.cv.wait(q).unwrap_or_else(|e| e.into_inner());
            q.sleeping = false;
        }
    }

    /// Submitter side, a request was just bound to this worker: wakes the worker if it armed
    /// [`Queue::kickable`]. Without the flag (the common case at saturation, where the worker is
    /// busy or waiting without sleeping) this is one atomic load.
    fn kick(&self) {
        if !self.kickable.load(Ordering::Relaxed) || !self.kickable.swap(false, Ordering::Acquire) {
            return;
        }
        let mut q = self.lock();
        q.kick = true;
        let wake = std::mem::replace(&mut q.sleeping, false);
        drop(q);
        if wake {
            self.cv.notify_one();
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

/// What a worker's [`Queue::next`] returns.
enum Next {
    /// A wake-up to run.
    Wake(Wake),
    /// A request was bound to the worker while it slept between requests.
    Bound,
    /// The pool is stopping.
    Stop,
}

/// A worker's estimates of how soon what it waits for after a task comes, one per situation
/// ([`BETWEEN`], [`IN_REQUEST`], [`REGISTERED`]).
#[derive(Default)]
struct Pace {
    gaps: [Gaps; 3],
    /// The worker gave up waiting without sleeping at this [`now_ns`] reading, for `gaps[k]`.
    blocked: Option<(u64, usize)>,
}

impl Pace {
    /// A wake-up was popped: a wait that ended in a sleep still measures its gap.
    fn woken(&mut self) {
        if let Some((t, k)) = self.blocked.take() {
            self.gaps[k].record(now_ns().wrapping_sub(t), &POLICIES[k]);
        }
    }
}

struct Worker {
    q: Arc<Queue>,
    shared: Arc<WorkerShared>,
    join: Mutex<Option<JoinHandle<()>>, { rank::WORKER_JOIN }>,
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
                    let mut pace = Pace::default();
                    loop {
                        let w = match guard.0.next(&stop) {
                            Next::Wake(w) => w,
                            Next::Bound => {
                                // Woken when the request was bound: its first chunk is one
                                // provider round trip away.
                                pace.woken();
                                guard.0.spin_for_chunk(&stop, REGISTERED, &mut pace);
                                continue;
                            }
                            Next::Stop => break,
                        };
                        pace.woken();
                        h(&ctx, w.slot, w.gen, w.ud);
                        // Only right after a task: an idle worker stays blocked in `next`. Workers
                        // run receive-side wake-ups only, whose user data marks the last chunk.
                        let more = UserData::from_raw(w.ud).chunk_type != CHUNK_TYPE_LAST;
                        guard.0.spin(&stop, &ctx.shared, more, &mut pace);
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

    /// Least-loaded worker (contract §5.2): the first idle worker with nothing queued, else the smallest
    /// `(load, busy)` pair, lowest index on ties. `load` = queued tasks + queued wake-ups. With one
    /// worker there is nothing to compare: its counters, which the worker and the completing
    /// threads keep writing, are not read.
    pub fn select(&self) -> usize {
        if self.workers.len() == 1 {
            return 0;
        }
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

    /// A request with tasks for worker `i` was just bound to it (its load counter incremented):
    /// wakes the worker if it sleeps between requests and asked for it, so that it waits for the
    /// request's first chunk without sleeping.
    #[inline]
    pub fn bound(&self, i: usize) {
        self.workers[i].q.kick();
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
    use std::time::Duration;

    #[test]
    fn wakes_run_in_fifo_order_on_named_threads() {
        let seen = Arc::new(Mutex::<_, { rank::TEST_RECORD }>::new(Vec::new()));
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

    /// CPU time of thread `tid` of this process, ns (the kernel's per-thread scheduler clock).
    fn thread_cpu_ns(tid: i32) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid out-pointer; the clock id names a thread of this process.
        let rc = unsafe { libc::clock_gettime((!tid << 3) | 6, &mut ts) };
        assert_eq!(rc, 0, "thread CPU clock of {tid}");
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    #[test]
    fn paced_wake_ups_do_not_keep_the_worker_spinning() {
        let tid = Arc::new(std::sync::atomic::AtomicI32::new(0));
        let runs = Arc::new(AtomicU32::new(0));
        let (t2, r2) = (tid.clone(), runs.clone());
        let pool = Pool::start(1, 7, move |_: &WorkerCtx, _, _, _| {
            // SAFETY: plain syscall.
            t2.store(unsafe { libc::gettid() }, Ordering::Relaxed);
            r2.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        let last = UserData::new(1, CHUNK_TYPE_LAST, 0).raw();
        let middle = UserData::new(1, 0, 0).raw();
        let pace = |ud: u64, n: u32| {
            for _ in 0..n {
                let before = runs.load(Ordering::Relaxed);
                pool.enqueue(0, 0, 0, ud).unwrap();
                while runs.load(Ordering::Relaxed) == before {
                    std::thread::yield_now();
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        };
        // Learn the pattern: last chunks (and, separately, middle chunks) 2 ms apart.
        pace(last, 8);
        pace(middle, 8);
        let w = tid.load(Ordering::Relaxed);
        // The best of three rounds: noise on a shared machine (a page fault, an interrupt
        // accounted to the worker) only ever adds CPU time, while a worker that spins through
        // the gaps pays in every round.
        let per_wake = (0..3)
            .map(|_| {
                let cpu0 = thread_cpu_ns(w);
                pace(last, 16);
                pace(middle, 16);
                (thread_cpu_ns(w) - cpu0) / 32
            })
            .min()
            .expect("three rounds");
        // Spinning through the 2 ms gaps (or even 50 µs of each) would cost far more; a futex
        // sleep and wake-up costs a few microseconds (tens under qemu's emulation, hence the
        // slowdown factor: still well below the 2 ms a spin through each gap would take).
        let bound = 40_000 * u64::from(compat_tests::target::slowdown());
        assert!(per_wake < bound, "{per_wake} ns of worker CPU per wake-up");
        // Idle: blocked, no CPU at all.
        let cpu1 = thread_cpu_ns(w);
        std::thread::sleep(Duration::from_millis(50));
        assert!(thread_cpu_ns(w) - cpu1 < 1_000_000, "an idle worker spins");
        pool.stop();
    }

    #[test]
    fn a_request_bound_to_a_worker_sleeping_between_requests_wakes_it() {
        let runs = Arc::new(AtomicU32::new(0));
        let r2 = runs.clone();
        let pool = Pool::start(1, 8, move |_: &WorkerCtx, _, _, _| {
            r2.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        let q = &pool.workers[0].q;
        let until = |what: &str, f: &dyn Fn() -> bool| {
            let end = Instant::now() + Duration::from_secs(10);
            while !f() {
                assert!(Instant::now() < end, "timed out: {what}");
                std::thread::sleep(Duration::from_micros(100));
            }
        };
        until("the fresh worker sleeps", &|| q.lock().sleeping);
        pool.bound(0);
        assert!(
            !q.lock().kick,
            "a worker that has not served a request is not kicked"
        );
        // A request's last chunk, and no request after it within the worker's wait between
        // requests: it blocks, asking to be woken when the next request is bound (the first
        // chunks of its requests have never been late).
        pool.enqueue(0, 0, 0, UserData::new(1, CHUNK_TYPE_LAST, 0).raw())
            .unwrap();
        until("the worker armed its kick and sleeps", &|| {
            q.kickable.load(Ordering::Acquire) && q.lock().sleeping
        });
        pool.shared_ref(0).tasks.fetch_add(1, Ordering::Relaxed);
        pool.bound(0);
        assert!(!q.kickable.load(Ordering::Acquire), "one kick per sleep");
        until("the kicked worker woke and took the kick", &|| {
            !q.lock().kick
        });
        // It waited for the first chunk without sleeping, then blocked again, this time for the
        // chunk itself: a second binding does not wake it.
        until("asleep again", &|| q.lock().sleeping);
        pool.bound(0);
        assert!(!q.lock().kick, "not kickable while waiting for a chunk");
        pool.enqueue(0, 0, 0, UserData::new(2, 0, 0).raw()).unwrap();
        until("the first chunk ran", &|| runs.load(Ordering::Relaxed) == 2);
        pool.stop();
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
