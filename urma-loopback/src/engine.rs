//! The DMA engine: a thread of the provider's own that executes queued jobs in submission order,
//! as a NIC's DMA engine moves the data of posted work requests while the posting thread goes on.
//!
//! * One thread, one FIFO: jobs run in the order they were submitted, so the WRs of one queue
//!   (and their CRs) keep their post order, and so does everything one thread submits.
//! * Cost: a submitter takes the queue mutex once per batch (a whole WR chain) and wakes the
//!   thread (one futex wake) only when it sleeps; the thread takes every queued job at once, so
//!   a burst of posts costs one wake-up, not one per WR.
//! * [`Engine::settle`] waits until every job submitted before the call has run. The provider
//!   calls it at the entry of every export other than the send posts (polls, recv posts,
//!   deletes, control calls), which is what keeps the observable behaviour of the synchronous
//!   provider: a CR is visible to the first poll after its post returned, counters and trace
//!   are complete when read, and an object is never deleted with its WRs still queued.
//! * Lanes ([`Engine::run_in_lane`]): a caller may run its own jobs on its own thread, beside
//!   the engine, under a lock of its choosing (the loopback's completion-synchronous posts:
//!   their send queue's runner lock), once the jobs submitted before it have run;
//!   [`Engine::quiesce`] waits for the lane runs in progress as well as for the queue.
//! * After `fork` the child has no engine thread: the first submit or settle in the child starts
//!   one; jobs the parent's thread was running at the fork are not run again (they belong to
//!   the parent). The fork is noticed by a `pthread_atfork` child handler, so it must go through
//!   the C library's `fork` (as every fork of a program that goes on using the provider does).
//!
//! This module is generic over the job type so that it sits below the data path
//! ([`crate::datapath`] defines the jobs and the function that runs one).

use ranked_lock::{rank, Condvar, Mutex, RwLock};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::util::{guard, lock, rlock, stripe, wlock, STRIPES};

thread_local! {
    /// Set on engine threads: a settle from a job (never expected) must not wait for itself.
    static ON_ENGINE: Cell<bool> = const { Cell::new(false) };
}

/// How long the engine thread keeps looking for work (yielding the CPU between looks) after a
/// batch before it sleeps.
const LINGER: Duration = Duration::from_micros(200);
/// How long [`Engine::settle`] keeps looking for the jobs it waits for to finish (yielding the
/// CPU between looks) before it sleeps: longer than the engine takes to copy a 2 MiB WRITE
/// (about 250 µs at 8 GB/s), so a completion-synchronous post of one chunk needs no wake-up.
const SETTLE_SPIN: Duration = Duration::from_micros(400);

/// Yields the CPU until `cond` holds or `limit` has passed; returns the last `cond`. A wake-up
/// through the kernel costs tens of microseconds on a virtual machine (more when the woken CPU
/// has halted), several times per chunk, where a look at an atomic costs nothing.
fn spin_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if t.elapsed() >= limit {
            return false;
        }
        std::thread::yield_now();
    }
}

struct State<J> {
    jobs: VecDeque<J>,
    /// The engine thread waits for work.
    sleeping: bool,
    /// The thread was started in this process: set at the start, and seen as unset after a
    /// fork (`forks` differs from [`FORKS`]).
    started: bool,
    /// [`FORKS`] when the thread was started.
    forks: u32,
}

/// Forks this process is the child of (incremented in the child by a `pthread_atfork` handler),
/// so that the engine notices a fork without asking the kernel for its process id at every
/// post (a system call, about 4 % of a no-copy closed loop).
static FORKS: AtomicU32 = AtomicU32::new(0);
static AT_FORK: std::sync::Once = std::sync::Once::new();

extern "C" fn forked_child() {
    FORKS.fetch_add(1, Ordering::SeqCst);
}

/// A job queue with its own executing thread.
pub struct Engine<J: Send + 'static> {
    name: &'static str,
    run: fn(J),
    st: Mutex<State<J>, { rank::ENGINE_QUEUE }>,
    work: Condvar,
    done_m: Mutex<(), { rank::ENGINE_DONE }>,
    done_cv: Condvar,
    /// Jobs submitted / finished since process start (only ever grow).
    submitted: AtomicU64,
    done: AtomicU64,
    /// Threads waiting in [`Engine::settle`].
    waiters: AtomicU32,
    /// The runner lock, held by whoever runs jobs: the engine thread, or a caller of
    /// [`Engine::submit_and_run`] / [`Engine::settle_running`], so jobs never run concurrently
    /// and are taken from the queue only by the one runner (which keeps their order). It holds
    /// the runner's queue, swapped with the shared one, so neither reallocates once grown.
    exec: Mutex<VecDeque<J>, { rank::ENGINE_RUNNER }>,
    /// Held shared by every [`Engine::run_in_lane`] while it runs (the stripe of its thread,
    /// [`stripe`]), and for a moment exclusively by [`Engine::wait_lanes`] (every stripe in
    /// turn), which thereby waits for the lane runs in progress. Striped because every
    /// completion-synchronous post takes it: one lock word would travel between the CPUs of the
    /// threads that post at once, twice per post.
    lanes: [LaneGate; STRIPES],
}

/// One stripe of [`Engine::lanes`], on cache lines of its own.
#[repr(align(128))]
struct LaneGate(RwLock<(), { rank::ENGINE_LANES }>);

/// Jobs collected by one post call before they are submitted together.
pub struct Batch<J> {
    first: Option<J>,
    rest: Vec<J>,
}

impl<J> Default for Batch<J> {
    fn default() -> Self {
        Self::new()
    }
}

impl<J> Batch<J> {
    /// An empty batch (no allocation until a second job is pushed).
    pub const fn new() -> Self {
        Batch {
            first: None,
            rest: Vec::new(),
        }
    }

    pub fn push(&mut self, j: J) {
        if self.first.is_none() && self.rest.is_empty() {
            self.first = Some(j);
        } else {
            self.rest.push(j);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_none() && self.rest.is_empty()
    }

    /// The same batch with `f` applied to each job, in order.
    pub fn map<U>(self, mut f: impl FnMut(J) -> U) -> Batch<U> {
        Batch {
            first: self.first.map(&mut f),
            rest: self.rest.into_iter().map(f).collect(),
        }
    }
}

impl<J: Send + 'static> Engine<J> {
    pub const fn new(name: &'static str, run: fn(J)) -> Self {
        Engine {
            name,
            run,
            st: Mutex::new(State {
                jobs: VecDeque::new(),
                sleeping: false,
                started: false,
                forks: 0,
            }),
            work: Condvar::new(),
            done_m: Mutex::new(()),
            done_cv: Condvar::new(),
            submitted: AtomicU64::new(0),
            done: AtomicU64::new(0),
            waiters: AtomicU32::new(0),
            exec: Mutex::new(VecDeque::new()),
            lanes: [const { LaneGate(RwLock::new(())) }; STRIPES],
        }
    }

    /// Starts the thread of this process if it has none (first use, or first use after fork).
    /// Returns false when no thread could be started (the caller runs the jobs itself).
    fn ensure_thread(&'static self, st: &mut State<J>) -> bool {
        AT_FORK.call_once(|| {
            // SAFETY: registers a handler that only increments an atomic (async-signal-safe);
            // no prepare/parent handlers.
            unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
        });
        let forks = FORKS.load(Ordering::SeqCst);
        if st.started && st.forks == forks {
            return true;
        }
        // Whatever a parent's thread was running at the fork is not ours to finish.
        let queued = st.jobs.len() as u64;
        self.done.store(
            self.submitted.load(Ordering::SeqCst) - queued,
            Ordering::SeqCst,
        );
        st.sleeping = false;
        let spawned = std::thread::Builder::new()
            .name(self.name.into())
            .spawn(move || self.main_loop());
        if spawned.is_ok() {
            st.started = true;
            st.forks = forks;
        }
        spawned.is_ok()
    }

    /// Queues the jobs of `b` (in order) and wakes the thread if it sleeps.
    pub fn submit(&'static self, b: Batch<J>) {
        if b.is_empty() {
            return;
        }
        let wake = {
            let mut st = lock(&self.st);
            let n = b.rest.len() as u64 + u64::from(b.first.is_some());
            st.jobs.extend(b.first);
            st.jobs.extend(b.rest);
            self.submitted.fetch_add(n, Ordering::SeqCst);
            if !self.ensure_thread(&mut st) {
                // No thread: run everything queued here, in order.
                let target = self.submitted.load(Ordering::SeqCst);
                drop(st);
                self.run_until(target);
                return;
            }
            std::mem::replace(&mut st.sleeping, false)
        };
        if wake {
            self.work.notify_one();
        }
    }

    /// Queues the jobs of `b` (in order) and runs queued jobs on the calling thread until they
    /// have run, instead of waking the engine thread and waiting for it (flat combining): the
    /// caller takes the runner lock, which the engine thread and any other combining caller
    /// hold while they run jobs, and runs everything queued at that moment (its own batch, what
    /// was queued before it, and what others queued after it) in submission order. If another
    /// runner holds the lock, the caller waits for it and then finds its batch either run or
    /// still queued. Jobs are only ever taken from the queue with the runner lock held, so an
    /// earlier batch never runs after a later one. For a caller that would wait for its jobs
    /// anyway (the loopback's completion-synchronous posts), where a hand-off to the engine
    /// thread would only add a wake-up and a sleep to every post. Returns after every job
    /// submitted before the call and `b` have run.
    pub fn submit_and_run(&'static self, b: Batch<J>) {
        if ON_ENGINE.with(|c| c.get()) {
            // A job never posts; if one did, it could not wait for the runner lock it holds.
            return self.submit(b);
        }
        let target = {
            let mut st = lock(&self.st);
            // After a fork, fixes the counts up (see ensure_thread) before the target is read.
            self.ensure_thread(&mut st);
            let n = b.rest.len() as u64 + u64::from(b.first.is_some());
            st.jobs.extend(b.first);
            st.jobs.extend(b.rest);
            self.submitted.fetch_add(n, Ordering::SeqCst) + n
        };
        self.run_until(target);
    }

    /// Like [`Engine::settle`], but runs the queued jobs on the calling thread (taking turns
    /// with the other runners, see [`Engine::submit_and_run`]) instead of waiting for the
    /// engine thread.
    pub fn settle_running(&'static self) {
        if self.done.load(Ordering::SeqCst) >= self.submitted.load(Ordering::SeqCst)
            || ON_ENGINE.with(|c| c.get())
        {
            return;
        }
        let target = {
            let mut st = lock(&self.st);
            self.ensure_thread(&mut st);
            self.submitted.load(Ordering::SeqCst)
        };
        self.run_until(target);
    }

    /// Runs queued jobs on the calling thread, under the runner lock, until `target` jobs have
    /// run in all.
    fn run_until(&self, target: u64) {
        while self.done.load(Ordering::SeqCst) < target {
            // Another runner holds the lock for a few jobs at most: look again (yielding the
            // CPU) for a while before sleeping on the lock, and stop if it ran ours.
            let mut held = None;
            spin_until(SETTLE_SPIN, || {
                held = self.exec.try_lock();
                held.is_some() || self.done.load(Ordering::SeqCst) >= target
            });
            if self.done.load(Ordering::SeqCst) >= target {
                break;
            }
            let mut ex = held.unwrap_or_else(|| lock(&self.exec));
            if self.done.load(Ordering::SeqCst) >= target {
                break;
            }
            // A job never settles; if one did, it must not wait for itself here either.
            ON_ENGINE.with(|c| c.set(true));
            self.run_queued(&mut ex);
            ON_ENGINE.with(|c| c.set(false));
        }
    }

    /// Runs the jobs of `b` on the calling thread, in order, with `run` (not the engine's own
    /// run function), holding `lane` (the runner lock of the queue the jobs belong to), beside
    /// the engine rather than through its FIFO: runs in different lanes go on at the same time,
    /// runs in one lane one after the other. Every job submitted to the engine before the call
    /// runs first (the caller takes its turn as a runner, [`Engine::settle_running`]), so what
    /// one thread submits and runs in lanes keeps its order. The engine's own run function must
    /// take the same lane lock for a job of that queue, so that the engine and a lane never run
    /// jobs of one queue at once. A job run here must not submit to the engine.
    pub fn run_in_lane<T>(
        &'static self,
        lane: &Mutex<(), { rank::SEND_LANE }>,
        b: &Batch<T>,
        run: impl Fn(&T),
    ) {
        self.settle_running();
        if b.is_empty() {
            return;
        }
        let _all = rlock(&self.lanes[stripe()].0);
        let _lane = lock(lane);
        // By reference: a send WR's plan is a few hundred bytes, and each move of it was a copy.
        for j in b.first.iter().chain(&b.rest) {
            guard((), || run(j));
        }
    }

    /// Waits until every [`Engine::run_in_lane`] in progress has returned (the queued jobs are
    /// the caller's to settle first).
    pub fn wait_lanes(&self) {
        for g in &self.lanes {
            drop(wlock(&g.0));
        }
    }

    /// Waits until every job submitted before this call has run (no-op on the engine thread).
    pub fn settle(&'static self) {
        let target = self.submitted.load(Ordering::SeqCst);
        if self.done.load(Ordering::SeqCst) >= target || ON_ENGINE.with(|c| c.get()) {
            return;
        }
        {
            // After a fork, the thread that would finish these jobs is not in this process.
            let mut st = lock(&self.st);
            if !self.ensure_thread(&mut st) {
                drop(st);
                self.run_until(target);
                return;
            }
        }
        if spin_until(SETTLE_SPIN, || self.done.load(Ordering::SeqCst) >= target) {
            return;
        }
        let mut g = lock(&self.done_m);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        while self.done.load(Ordering::SeqCst) < target {
            g = self.done_cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether submitted jobs have not run yet.
    pub fn busy(&self) -> bool {
        self.done.load(Ordering::SeqCst) < self.submitted.load(Ordering::SeqCst)
    }

    /// With the runner lock held (`jobs` is its queue): takes every queued job and runs them.
    fn run_queued(&self, jobs: &mut VecDeque<J>) {
        std::mem::swap(&mut lock(&self.st).jobs, jobs);
        let n = jobs.len() as u64;
        for j in jobs.drain(..) {
            guard((), || (self.run)(j));
        }
        self.done.fetch_add(n, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = lock(&self.done_m);
            self.done_cv.notify_all();
        }
    }

    fn main_loop(&'static self) {
        ON_ENGINE.with(|c| c.set(true));
        loop {
            {
                // Another post is likely soon after a batch (the next chunk of a request follows
                // the completion of the last one): stay awake a little before sleeping.
                spin_until(LINGER, || self.busy());
                let mut st = lock(&self.st);
                while st.jobs.is_empty() {
                    st.sleeping = true;
                    st = self.work.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                st.sleeping = false;
            }
            // The jobs are taken under the runner lock: a combining caller may have run them
            // meanwhile (then there is nothing to take), or be running earlier ones.
            self.run_queued(&mut lock(&self.exec));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// What the test engine's jobs saw: (job number, ran on an engine thread).
    static SEEN: Mutex<Vec<(u32, bool)>, { rank::TEST_RECORD }> = Mutex::new(Vec::new());
    /// While set, jobs wait (so a test can hold work queued).
    static GATE: AtomicBool = AtomicBool::new(false);

    fn record(n: u32) {
        while GATE.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        lock(&SEEN).push((n, ON_ENGINE.with(|c| c.get())));
    }

    static TEST_ENGINE: Engine<u32> = Engine::new("engine-test", record);

    fn one(n: u32) -> Batch<u32> {
        let mut b = Batch::new();
        b.push(n);
        b
    }

    #[test]
    fn combining_runs_on_the_caller_and_never_before_earlier_batches() {
        static SEEN2: Mutex<Vec<(u32, bool)>, { rank::TEST_RECORD }> = Mutex::new(Vec::new());
        static GATE2: AtomicBool = AtomicBool::new(false);
        fn record2(n: u32) {
            while GATE2.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            let on_engine = std::thread::current().name() == Some("engine-test-2");
            lock(&SEEN2).push((n, on_engine));
        }
        static E: Engine<u32> = Engine::new("engine-test-2", record2);
        // The engine thread exists and sleeps (a combining post does not wake it): it cannot
        // take the next batch, however the host schedules the two threads.
        E.submit(one(0));
        E.settle();
        while !lock(&E.st).sleeping {
            std::thread::yield_now();
        }
        lock(&SEEN2).clear();
        // Idle: the batch runs before the call returns, on this thread.
        E.submit_and_run(one(1));
        assert!(!E.busy());
        assert_eq!(*lock(&SEEN2), vec![(1, false)]);
        // The engine thread takes batch 2 and is held inside it (runner lock held); 3 is
        // queued behind it; a combining caller submits 4 and must wait for the runner lock.
        GATE2.store(true, Ordering::Release);
        E.submit(one(2));
        while !lock(&E.st).jobs.is_empty() {
            std::thread::yield_now();
        }
        E.submit(one(3));
        let poster = std::thread::spawn(|| E.submit_and_run(one(4)));
        while E.submitted.load(Ordering::SeqCst) < 5 {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !poster.is_finished(),
            "the combining post waits for the earlier batches"
        );
        assert_eq!(lock(&SEEN2).len(), 1, "nothing ran past the held job");
        GATE2.store(false, Ordering::Release);
        poster.join().unwrap();
        assert!(!E.busy(), "the combining post returned after its batch ran");
        let seen = std::mem::take(&mut *lock(&SEEN2));
        let order: Vec<u32> = seen.iter().map(|s| s.0).collect();
        assert_eq!(order, vec![1, 2, 3, 4], "submission order kept");
        // 3 and 4 ran on whichever runner took the lock first once 2 was done.
        assert!(seen[1].1, "the engine thread ran the batch it had taken");
        // settle_running runs queued work on the caller as well.
        GATE2.store(true, Ordering::Release);
        E.submit(one(5));
        E.submit(one(6));
        GATE2.store(false, Ordering::Release);
        E.settle_running();
        assert!(!E.busy());
        let order: Vec<u32> = lock(&SEEN2).iter().map(|s| s.0).collect();
        assert_eq!(order, vec![5, 6]);
    }

    #[test]
    fn one_runner_at_a_time_under_concurrent_combining_posters() {
        const THREADS: u32 = 4;
        const BATCHES: u32 = 300;
        /// Jobs running right now (must never exceed 1).
        static RUNNING: AtomicU32 = AtomicU32::new(0);
        static OVERLAP: AtomicBool = AtomicBool::new(false);
        /// Per poster thread: the jobs that ran, in the order they ran.
        static RAN: Mutex<Vec<Vec<u32>>, { rank::TEST_RECORD }> = Mutex::new(Vec::new());
        fn record3(job: u32) {
            if RUNNING.fetch_add(1, Ordering::SeqCst) != 0 {
                OVERLAP.store(true, Ordering::SeqCst);
            }
            std::hint::spin_loop();
            lock(&RAN)[(job >> 24) as usize].push(job & 0xff_ffff);
            RUNNING.fetch_sub(1, Ordering::SeqCst);
        }
        static E: Engine<u32> = Engine::new("engine-test-3", record3);
        *lock(&RAN) = vec![Vec::new(); THREADS as usize + 1];
        let posters: Vec<_> = (0..THREADS)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..BATCHES {
                        let mut b = Batch::new();
                        for k in 0..3 {
                            b.push((t << 24) | (i * 3 + k));
                        }
                        E.submit_and_run(b);
                        // Returned: this batch (its last job) has run.
                        let ran = lock(&RAN)[t as usize].last().copied();
                        assert_eq!(ran, Some(i * 3 + 2), "batch {i} of poster {t} ran");
                    }
                })
            })
            .collect();
        // A plain submitter at the same time (its jobs wake the engine thread).
        for i in 0..BATCHES {
            E.submit(one((THREADS << 24) | i));
        }
        for p in posters {
            p.join().unwrap();
        }
        E.settle();
        assert!(!OVERLAP.load(Ordering::SeqCst), "two jobs ran at once");
        let ran = std::mem::take(&mut *lock(&RAN));
        for (t, jobs) in ran.iter().enumerate() {
            let n = if t == THREADS as usize {
                BATCHES
            } else {
                BATCHES * 3
            };
            assert_eq!(
                *jobs,
                (0..n).collect::<Vec<_>>(),
                "submitter {t}: every job ran once, in its submission order"
            );
        }
    }

    #[test]
    fn lanes_run_beside_each_other_one_run_per_lane_and_quiesce_waits_for_them() {
        /// Jobs that ran (lane runs and engine jobs alike), in the order they ended.
        static ENDED: Mutex<Vec<u32>, { rank::TEST_RECORD }> = Mutex::new(Vec::new());
        /// Job 1 waits while this is set; STARTED tells that it began.
        static HOLD: AtomicBool = AtomicBool::new(true);
        static STARTED: AtomicBool = AtomicBool::new(false);
        fn run(n: u32) {
            if n == 1 {
                STARTED.store(true, Ordering::SeqCst);
                while HOLD.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
            }
            lock(&ENDED).push(n);
        }
        static E: Engine<u32> = Engine::new("engine-test-5", run);
        static LANE_A: Mutex<(), { rank::SEND_LANE }> = Mutex::new(());
        static LANE_B: Mutex<(), { rank::SEND_LANE }> = Mutex::new(());
        let first = std::thread::spawn(|| E.run_in_lane(&LANE_A, &one(1), |n| run(*n)));
        while !STARTED.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // Another lane runs while lane A's job is held.
        let other = std::thread::spawn(|| E.run_in_lane(&LANE_B, &one(2), |n| run(*n)));
        let t = Instant::now();
        while !other.is_finished() && t.elapsed() < Duration::from_secs(5) {
            std::thread::yield_now();
        }
        assert_eq!(*lock(&ENDED), vec![2], "lane B ran beside the held lane A");
        // The same lane waits; so does a quiesce.
        let same = std::thread::spawn(|| E.run_in_lane(&LANE_A, &one(3), |n| run(*n)));
        let quiesce = std::thread::spawn(|| {
            E.settle_running();
            E.wait_lanes();
        });
        std::thread::sleep(Duration::from_millis(30));
        assert!(!same.is_finished(), "one run at a time in a lane");
        assert!(
            !quiesce.is_finished(),
            "quiesce waits for the lane run in progress"
        );
        assert_eq!(*lock(&ENDED), vec![2]);
        HOLD.store(false, Ordering::Release);
        for t in [first, other, same, quiesce] {
            t.join().unwrap();
        }
        assert_eq!(*lock(&ENDED), vec![2, 1, 3], "lane A kept its order");
    }

    #[test]
    fn a_lane_run_first_runs_the_jobs_submitted_before_it() {
        static ENDED: Mutex<Vec<u32>, { rank::TEST_RECORD }> = Mutex::new(Vec::new());
        static HOLD: AtomicBool = AtomicBool::new(true);
        fn run(n: u32) {
            while n == 10 && HOLD.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            lock(&ENDED).push(n);
        }
        static E: Engine<u32> = Engine::new("engine-test-6", run);
        static LANE: Mutex<(), { rank::SEND_LANE }> = Mutex::new(());
        // 10 is held on the engine thread (runner lock held), 11 queued behind it.
        E.submit(one(10));
        while !lock(&E.st).jobs.is_empty() {
            std::thread::yield_now();
        }
        E.submit(one(11));
        let lane = std::thread::spawn(|| E.run_in_lane(&LANE, &one(12), |n| run(*n)));
        std::thread::sleep(Duration::from_millis(30));
        assert!(
            lock(&ENDED).is_empty(),
            "the lane job waits for the earlier jobs"
        );
        HOLD.store(false, Ordering::Release);
        lane.join().unwrap();
        assert_eq!(*lock(&ENDED), vec![10, 11, 12], "submission order kept");
        assert!(!E.busy());
    }

    #[test]
    fn settle_waits_past_its_spin_for_a_long_job() {
        static RAN: AtomicU32 = AtomicU32::new(0);
        static HOLD: AtomicBool = AtomicBool::new(true);
        fn slow(n: u32) {
            while HOLD.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            RAN.fetch_add(n, Ordering::SeqCst);
        }
        static E: Engine<u32> = Engine::new("engine-test-4", slow);
        E.submit(one(1));
        let hold = SETTLE_SPIN * 20;
        let opener = std::thread::spawn(move || {
            std::thread::sleep(hold);
            HOLD.store(false, Ordering::Release);
        });
        let t = Instant::now();
        E.settle();
        assert_eq!(
            RAN.load(Ordering::SeqCst),
            1,
            "settle returned after the job ran"
        );
        assert!(
            t.elapsed() >= hold / 2,
            "settle slept past its spin until the job ran"
        );
        opener.join().unwrap();
    }

    #[test]
    fn jobs_run_on_the_engine_thread_in_order_and_settle_waits_for_them() {
        GATE.store(true, Ordering::Release);
        for chunk in [[1u32, 2, 3], [4, 5, 6]] {
            let mut b = Batch::new();
            for n in chunk {
                b.push(n);
            }
            TEST_ENGINE.submit(b);
        }
        // Held at the gate: nothing has run, the submitter was not blocked.
        assert!(TEST_ENGINE.busy());
        assert!(lock(&SEEN).is_empty());
        GATE.store(false, Ordering::Release);
        TEST_ENGINE.settle();
        assert!(!TEST_ENGINE.busy());
        let seen = std::mem::take(&mut *lock(&SEEN));
        assert_eq!(
            seen,
            (1..=6).map(|n| (n, true)).collect::<Vec<_>>(),
            "every job ran once, in submission order, on the engine thread"
        );
        // An empty batch queues nothing; settle with nothing queued returns at once.
        TEST_ENGINE.submit(Batch::new());
        assert!(!TEST_ENGINE.busy());
        TEST_ENGINE.settle();
    }
}
