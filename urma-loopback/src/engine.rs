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
//! * After `fork` the child has no engine thread: the first submit or settle in the child starts
//!   one; jobs the parent's thread was running at the fork are not run again (they belong to
//!   the parent).
//!
//! This module is generic over the job type so that it sits below the data path
//! ([`crate::datapath`] defines the jobs and the function that runs one).

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use crate::util::{guard, lock};

thread_local! {
    /// Set on engine threads: a settle from a job (never expected) must not wait for itself.
    static ON_ENGINE: Cell<bool> = const { Cell::new(false) };
}

struct State<J> {
    jobs: VecDeque<J>,
    /// The engine thread waits for work.
    sleeping: bool,
    /// Process that owns the running thread (0 = none started).
    pid: u32,
}

/// A job queue with its own executing thread.
pub struct Engine<J: Send + 'static> {
    name: &'static str,
    run: fn(J),
    st: Mutex<State<J>>,
    work: Condvar,
    done_m: Mutex<()>,
    done_cv: Condvar,
    /// Jobs submitted / finished since process start (only ever grow).
    submitted: AtomicU64,
    done: AtomicU64,
    /// Threads waiting in [`Engine::settle`].
    waiters: AtomicU32,
    /// Held by whoever runs jobs: the engine thread, or a submitter running its own batch in
    /// place ([`Engine::submit_in_place_if_idle`]), so jobs never run concurrently.
    exec: Mutex<()>,
}

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
}

impl<J: Send + 'static> Engine<J> {
    pub const fn new(name: &'static str, run: fn(J)) -> Self {
        Engine {
            name,
            run,
            st: Mutex::new(State {
                jobs: VecDeque::new(),
                sleeping: false,
                pid: 0,
            }),
            work: Condvar::new(),
            done_m: Mutex::new(()),
            done_cv: Condvar::new(),
            submitted: AtomicU64::new(0),
            done: AtomicU64::new(0),
            waiters: AtomicU32::new(0),
            exec: Mutex::new(()),
        }
    }

    /// Starts the thread of this process if it has none (first use, or first use after fork).
    /// Returns false when no thread could be started (the caller runs the jobs itself).
    fn ensure_thread(&'static self, st: &mut State<J>) -> bool {
        let me = std::process::id();
        if st.pid == me {
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
            st.pid = me;
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
                let mut jobs = std::mem::take(&mut st.jobs);
                drop(st);
                self.run_all(&mut jobs);
                return;
            }
            std::mem::replace(&mut st.sleeping, false)
        };
        if wake {
            self.work.notify_one();
        }
    }

    /// Runs the jobs of `b` on the calling thread when nothing is queued or running (the FIFO
    /// order and the one-runner rule are kept: the batch is counted as submitted under the
    /// queue lock, and it runs under the lock every runner holds); otherwise queues it like
    /// [`Engine::submit`]. For work that moves no data (the loopback's no-copy mode), where a
    /// hand-off to the engine thread would only add a wake-up and a sleep to every post.
    pub fn submit_in_place_if_idle(&'static self, b: Batch<J>) {
        if b.is_empty() {
            return;
        }
        let st = lock(&self.st);
        if !st.jobs.is_empty() || self.busy() || ON_ENGINE.with(|c| c.get()) {
            drop(st);
            return self.submit(b);
        }
        let Ok(ex) = self.exec.try_lock() else {
            drop(st);
            return self.submit(b);
        };
        let n = b.rest.len() as u64 + u64::from(b.first.is_some());
        self.submitted.fetch_add(n, Ordering::SeqCst);
        drop(st);
        let mut jobs: VecDeque<J> = b.first.into_iter().chain(b.rest).collect();
        // A job never settles; if one did, it must not wait for itself here either.
        ON_ENGINE.with(|c| c.set(true));
        self.run_all_locked(&mut jobs);
        ON_ENGINE.with(|c| c.set(false));
        drop(ex);
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
                let mut jobs = std::mem::take(&mut st.jobs);
                drop(st);
                self.run_all(&mut jobs);
                return;
            }
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

    fn run_all(&self, jobs: &mut VecDeque<J>) {
        let _ex = lock(&self.exec);
        self.run_all_locked(jobs);
    }

    /// [`Engine::run_all`] with the runner lock already held.
    fn run_all_locked(&self, jobs: &mut VecDeque<J>) {
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
        // Swapped with the shared queue, so neither reallocates once grown.
        let mut jobs = VecDeque::new();
        loop {
            {
                let mut st = lock(&self.st);
                while st.jobs.is_empty() {
                    st.sleeping = true;
                    st = self.work.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                st.sleeping = false;
                std::mem::swap(&mut st.jobs, &mut jobs);
            }
            self.run_all(&mut jobs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// What the test engine's jobs saw: (job number, ran on an engine thread).
    static SEEN: Mutex<Vec<(u32, bool)>> = Mutex::new(Vec::new());
    /// While set, jobs wait (so a test can hold work queued).
    static GATE: AtomicBool = AtomicBool::new(false);

    fn record(n: u32) {
        while GATE.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        lock(&SEEN).push((n, ON_ENGINE.with(|c| c.get())));
    }

    static TEST_ENGINE: Engine<u32> = Engine::new("engine-test", record);

    #[test]
    fn in_place_runs_on_the_caller_when_idle_and_queues_behind_work_otherwise() {
        static SEEN2: Mutex<Vec<(u32, bool)>> = Mutex::new(Vec::new());
        static GATE2: AtomicBool = AtomicBool::new(false);
        fn record2(n: u32) {
            while GATE2.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            let on_engine = std::thread::current().name() == Some("engine-test-2");
            lock(&SEEN2).push((n, on_engine));
        }
        static E: Engine<u32> = Engine::new("engine-test-2", record2);
        let one = |n: u32| {
            let mut b = Batch::new();
            b.push(n);
            b
        };
        // Idle: the batch runs before the call returns, on this thread.
        E.submit_in_place_if_idle(one(1));
        assert!(!E.busy());
        assert_eq!(*lock(&SEEN2), vec![(1, false)]);
        // Work queued on the engine (held at the gate): the batch queues behind it.
        GATE2.store(true, Ordering::Release);
        E.submit(one(2));
        E.submit_in_place_if_idle(one(3));
        assert!(E.busy(), "the in-place batch waits behind the queued job");
        GATE2.store(false, Ordering::Release);
        E.settle();
        assert_eq!(
            std::mem::take(&mut *lock(&SEEN2)),
            vec![(1, false), (2, true), (3, true)],
            "submission order kept; queued work runs on the engine thread"
        );
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
