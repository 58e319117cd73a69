//! The library's lock types: [`futex`]'s mutex and condition variable (no poisoning) and
//! `std::sync::RwLock` in normal builds, and with the cargo feature `valgrind-annotations` thin
//! wrappers around them that tell Helgrind about the ordering each lock provides (see [`crate::hb`]).
//! Every acquisition (lock, read, write, return from a condvar wait) is an [`hb::after`] on the
//! lock's address and every release (guard drop, entry into a condvar wait) is an [`hb::before`]
//! on it, which is the happens-before relation a pthread mutex gives and Helgrind models natively.
//!
//! Every lock has a rank ([`rank`], the `R` of [`Mutex`] and [`RwLock`]; the table of the locks
//! is in docs/architecture.md, "Locks"): a thread may only take a lock of a higher rank than every
//! lock it holds. Builds with debug assertions check this on every acquisition, per thread (a
//! stack of the ranks the thread holds), and panic with the names of both locks on an inversion;
//! other builds carry no trace of it (the bookkeeping functions are empty).
//!
//! Only the API the library uses is provided. The library ignores poisoning ([`lock`], [`read`] and
//! [`write`] take the lock whether or not a thread panicked while holding it: its state stays
//! consistent across a panic of user code, which the API boundary catches), so its mutex does not
//! track it at all: `std::sync::Mutex` checks the thread's panic state on every lock and every
//! unlock, about a tenth of the library's instructions per chunk (docs/performance.md,
//! "Alternatives measured and not kept").
//!
//! [`hb::after`]: crate::hb::after
//! [`hb::before`]: crate::hb::before

use std::ops::{Deref, DerefMut};
use std::sync::PoisonError;

#[cfg(not(feature = "valgrind-annotations"))]
pub use futex::{Condvar, Mutex, MutexGuard};
#[cfg(not(feature = "valgrind-annotations"))]
use std::sync::RwLock as BaseRwLock;

#[cfg(feature = "valgrind-annotations")]
use annotated::RwLock as BaseRwLock;
#[cfg(feature = "valgrind-annotations")]
pub use annotated::{Condvar, Mutex, MutexGuard};

/// The rank of every lock of the library, lowest first: a thread holding a lock takes only locks
/// of a higher rank (so at most one lock of each rank: one shard, one slot, one worker queue).
/// docs/architecture.md, "Locks", says what each protects and what is taken while it is held.
pub mod rank {
    /// `instance::LIVE`, the process's instance (`RwLock`).
    pub const INSTANCE: u8 = 1;
    /// A shard of an instance's request-id index (`request::index`).
    pub const SHARD: u8 = 2;
    /// A slot of the sync table: one request's state (`request::slots`).
    pub const SLOT: u8 = 3;
    /// The early-completion stash and the tombstones (`request::index::Kept`).
    pub const KEPT: u8 = 4;
    /// The free list of the sync table (`request::slots`).
    pub const FREE_LIST: u8 = 5;
    /// A worker's wake-up queue (`pool`).
    pub const WORKER_QUEUE: u8 = 6;
    /// A worker's join handle (`pool`).
    pub const WORKER_JOIN: u8 = 7;
    /// The instance's recorded receive queue (`instance::Instance::recvq`).
    pub const RECV_QUEUE: u8 = 8;
    /// The instance's recorded JFCE and JFC (`instance::Instance::jfc_info`).
    pub const JFC_INFO: u8 = 9;
    /// The log backend (`log`), which writes to a file or syslog while held.
    pub const LOG: u8 = 10;

    /// The name of the locks of rank `r` (for the order check of debug builds).
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    pub const fn name(r: u8) -> &'static str {
        match r {
            INSTANCE => "instance",
            SHARD => "request-index shard",
            SLOT => "sync slot",
            KEPT => "stash/tombstone",
            FREE_LIST => "sync-table free list",
            WORKER_QUEUE => "worker queue",
            WORKER_JOIN => "worker join handle",
            RECV_QUEUE => "receive queue",
            JFC_INFO => "JFC record",
            LOG => "log",
            _ => "unnamed",
        }
    }
}

/// The per-thread check of the lock order (builds with debug assertions): each thread keeps the
/// ranks of the locks it holds, in the order taken (so, increasing).
#[cfg(debug_assertions)]
mod order {
    use super::rank;
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Most locks one thread holds at once (the library nests at most three).
    const DEPTH: usize = 8;

    struct Held {
        ranks: Cell<[u8; DEPTH]>,
        len: Cell<usize>,
    }

    thread_local! {
        // Constant initialiser and no destructor: usable until the thread's very end (locks are
        // also taken by thread-local destructors).
        static HELD: Held = const {
            Held {
                ranks: Cell::new([0; DEPTH]),
                len: Cell::new(0),
            }
        };
    }

    /// Inversions found in this process.
    pub static VIOLATIONS: AtomicUsize = AtomicUsize::new(0);

    /// Before taking a lock of rank `r`: panics if the thread holds one of rank `r` or above
    /// (the lock is then not taken), else records it as held.
    #[track_caller]
    pub fn acquire(r: u8) {
        HELD.with(|h| {
            let (mut ranks, n) = (h.ranks.get(), h.len.get());
            if let Some(&top) = ranks[..n].last() {
                if top >= r {
                    VIOLATIONS.fetch_add(1, Ordering::Relaxed);
                    panic!(
                        "lock order violated: taking the {} lock (rank {}) while holding the {} \
                         lock (rank {})",
                        rank::name(r),
                        r,
                        rank::name(top),
                        top
                    );
                }
            }
            assert!(n < DEPTH, "more than {DEPTH} locks held by one thread");
            ranks[n] = r;
            h.ranks.set(ranks);
            h.len.set(n + 1);
        });
    }

    /// After releasing a lock of rank `r` (not necessarily the last one taken).
    pub fn release(r: u8) {
        HELD.with(|h| {
            let (mut ranks, n) = (h.ranks.get(), h.len.get());
            if let Some(i) = ranks[..n].iter().rposition(|&x| x == r) {
                ranks.copy_within(i + 1..n, i);
                h.ranks.set(ranks);
                h.len.set(n - 1);
            }
        });
    }
}

/// Release builds: no lock-order bookkeeping at all.
#[cfg(not(debug_assertions))]
mod order {
    #[inline(always)]
    pub fn acquire(_r: u8) {}

    #[inline(always)]
    pub fn release(_r: u8) {}
}

/// Lock-order inversions found so far in this process (always 0 without debug assertions, where
/// nothing is checked). Test hook.
pub fn lock_order_violations() -> usize {
    #[cfg(debug_assertions)]
    return order::VIOLATIONS.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(debug_assertions))]
    return 0;
}

/// Locks `m` (its `lock` never reports poisoning; the signature keeps `std`'s).
#[inline]
#[cfg_attr(debug_assertions, track_caller)]
pub fn lock<T: ?Sized, const R: u8>(m: &Mutex<T, R>) -> MutexGuard<'_, T, R> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `std::sync::RwLock` (Helgrind-annotated with the `valgrind-annotations` feature) of rank `R`;
/// locked with [`read`] and [`write`].
#[derive(Debug, Default)]
pub struct RwLock<T, const R: u8>(BaseRwLock<T>);

impl<T, const R: u8> RwLock<T, R> {
    /// An unlocked lock holding `t`.
    pub const fn new(t: T) -> Self {
        RwLock(BaseRwLock::new(t))
    }
}

/// A guard of a lock of rank `R` whose lock type does not record ranks itself: forgets the rank
/// when dropped (just before the inner guard releases the lock).
struct Ranked<G, const R: u8>(G);

impl<G: Deref, const R: u8> Deref for Ranked<G, R> {
    type Target = G::Target;
    #[inline]
    fn deref(&self) -> &G::Target {
        &self.0
    }
}

impl<G: DerefMut, const R: u8> DerefMut for Ranked<G, R> {
    #[inline]
    fn deref_mut(&mut self) -> &mut G::Target {
        &mut self.0
    }
}

impl<G, const R: u8> Drop for Ranked<G, R> {
    #[inline]
    fn drop(&mut self) {
        order::release(R);
    }
}

/// Read-locks `l`, ignoring poisoning.
#[inline]
#[cfg_attr(debug_assertions, track_caller)]
pub fn read<T, const R: u8>(l: &RwLock<T, R>) -> impl Deref<Target = T> + '_ {
    order::acquire(R);
    Ranked::<_, R>(l.0.read().unwrap_or_else(PoisonError::into_inner))
}

/// Write-locks `l`, ignoring poisoning.
#[inline]
#[cfg_attr(debug_assertions, track_caller)]
pub fn write<T, const R: u8>(l: &RwLock<T, R>) -> impl DerefMut<Target = T> + '_ {
    order::acquire(R);
    Ranked::<_, R>(l.0.write().unwrap_or_else(PoisonError::into_inner))
}

/// A mutex and a condition variable on Linux futexes, without poisoning.
///
/// The mutex word is 0 (unlocked), 1 (locked) or 2 (locked, and a thread may sleep on it). Locking
/// is one compare-and-swap 0 → 1; under contention a thread re-reads the word for a short while
/// (the holder usually releases within a few hundred instructions), then sets 2 and sleeps on the
/// futex until the word is no longer 2, and locks with 2 (it cannot know whether others still
/// sleep). Unlocking swaps in 0 and wakes one sleeper only if the word was 2.
///
/// The condition variable is a sequence number: a waiter reads it, unlocks, sleeps while it is
/// unchanged (the kernel compares atomically with going to sleep, so a notification between the
/// unlock and the sleep is never lost) and relocks; a notification increments it and wakes one or
/// all sleepers. Waits may return spuriously, as `std`'s do: every caller re-checks its condition.
pub mod futex {
    use std::cell::UnsafeCell;
    use std::marker::PhantomData;
    use std::ops::{Deref, DerefMut};
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::LockResult;
    use std::time::Duration;

    const UNLOCKED: u32 = 0;
    const LOCKED: u32 = 1;
    const CONTENDED: u32 = 2;
    /// Reads of a held lock's word before a contended locker sleeps.
    const SPIN_READS: u32 = 100;

    /// Now on `CLOCK_MONOTONIC` plus `d`: the absolute deadline of a timed [`futex_wait`].
    fn monotonic_deadline(d: Duration) -> libc::timespec {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into `now`, a live local of that type.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let nanos = now.tv_nsec as u64 + u64::from(d.subsec_nanos());
        let secs = (now.tv_sec as u64)
            .saturating_add(d.as_secs())
            .saturating_add(nanos / 1_000_000_000)
            .min(libc::time_t::MAX as u64);
        libc::timespec {
            tv_sec: secs as libc::time_t,
            tv_nsec: (nanos % 1_000_000_000) as _,
        }
    }

    /// Sleeps while `*word == expected` (at most `timeout`); `false` if the timeout elapsed.
    ///
    /// The deadline is absolute (`FUTEX_WAIT_BITSET` on `CLOCK_MONOTONIC`), fixed before the
    /// first sleep: a signal that interrupts the sleep (`EINTR`) is not a wake-up, so the wait
    /// goes on while the word is unchanged, until the same deadline.
    fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(monotonic_deadline);
        let tsp = deadline
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        loop {
            // SAFETY: FUTEX_WAIT_BITSET on a live, aligned 32-bit atomic of this process, with a
            // NULL or valid absolute timeout; the kernel only reads the word and the timespec
            // (the second address argument is unused by this operation).
            let r = unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    word.as_ptr(),
                    libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG,
                    expected,
                    tsp,
                    std::ptr::null::<u32>(),
                    libc::FUTEX_BITSET_MATCH_ANY,
                )
            };
            if r == 0 {
                return true;
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::ETIMEDOUT) => return false,
                Some(libc::EINTR) if word.load(Ordering::Relaxed) == expected => continue,
                // EAGAIN: the word changed before the sleep; EINTR after a change: both wake.
                _ => return true,
            }
        }
    }

    /// Wakes up to `n` threads sleeping on `word`.
    fn futex_wake(word: &AtomicU32, n: i32) {
        // SAFETY: FUTEX_WAKE on a live, aligned 32-bit atomic of this process; reads nothing else.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                n,
            )
        };
    }

    /// A mutual exclusion lock of rank `R` without poisoning (see the module documentation).
    pub struct Mutex<T: ?Sized, const R: u8> {
        word: AtomicU32,
        data: UnsafeCell<T>,
    }

    // SAFETY: the lock hands out access to `data` to one thread at a time, so a `T` that may move
    // between threads may be shared through it (the same bounds as `std::sync::Mutex`).
    unsafe impl<T: ?Sized + Send, const R: u8> Send for Mutex<T, R> {}
    // SAFETY: as above.
    unsafe impl<T: ?Sized + Send, const R: u8> Sync for Mutex<T, R> {}

    /// Access to the data of a locked [`Mutex`]; unlocks when dropped. Not `Send` (it is released
    /// by the thread that locked).
    #[must_use = "the lock is released when the guard is dropped"]
    pub struct MutexGuard<'a, T: ?Sized, const R: u8> {
        m: &'a Mutex<T, R>,
        _not_send: PhantomData<*const ()>,
    }

    // SAFETY: a shared guard only gives `&T`, which is shareable when `T: Sync`.
    unsafe impl<T: ?Sized + Sync, const R: u8> Sync for MutexGuard<'_, T, R> {}

    impl<T, const R: u8> Mutex<T, R> {
        /// An unlocked mutex holding `t`.
        pub const fn new(t: T) -> Mutex<T, R> {
            Mutex {
                word: AtomicU32::new(UNLOCKED),
                data: UnsafeCell::new(t),
            }
        }
    }

    impl<T: Default, const R: u8> Default for Mutex<T, R> {
        fn default() -> Self {
            Mutex::new(T::default())
        }
    }

    impl<T: ?Sized, const R: u8> std::fmt::Debug for Mutex<T, R> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "Mutex {{ rank: {R}, .. }}")
        }
    }

    impl<T: ?Sized, const R: u8> Mutex<T, R> {
        /// Locks, blocking while another thread holds the lock. Never `Err` (no poisoning); the
        /// `LockResult` keeps `std`'s signature. With debug assertions, panics instead if the
        /// thread holds a lock of rank `R` or higher (see the module documentation).
        #[inline]
        #[cfg_attr(debug_assertions, track_caller)]
        pub fn lock(&self) -> LockResult<MutexGuard<'_, T, R>> {
            super::order::acquire(R);
            self.acquire();
            Ok(MutexGuard {
                m: self,
                _not_send: PhantomData,
            })
        }

        #[inline]
        fn acquire(&self) {
            if self
                .word
                .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                self.acquire_contended();
            }
        }

        #[cold]
        fn acquire_contended(&self) {
            let mut w = self.spin();
            if w == UNLOCKED {
                match self.word.compare_exchange(
                    UNLOCKED,
                    LOCKED,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return,
                    Err(now) => w = now,
                }
            }
            loop {
                // Taking the lock with CONTENDED: other threads may still sleep on it, and the
                // next unlock must wake one of them.
                if w != CONTENDED && self.word.swap(CONTENDED, Ordering::Acquire) == UNLOCKED {
                    return;
                }
                futex_wait(&self.word, CONTENDED, None);
                w = self.spin();
            }
        }

        /// Re-reads the word while it says "locked, nobody sleeps", a bounded number of times.
        fn spin(&self) -> u32 {
            let mut n = SPIN_READS;
            loop {
                let w = self.word.load(Ordering::Relaxed);
                if w != LOCKED || n == 0 {
                    return w;
                }
                std::hint::spin_loop();
                n -= 1;
            }
        }

        #[inline]
        fn release(&self) {
            if self.word.swap(UNLOCKED, Ordering::Release) == CONTENDED {
                futex_wake(&self.word, 1);
            }
        }
    }

    impl<T: ?Sized, const R: u8> Deref for MutexGuard<'_, T, R> {
        type Target = T;
        #[inline]
        fn deref(&self) -> &T {
            // SAFETY: the guard exists only while this thread holds the lock.
            unsafe { &*self.m.data.get() }
        }
    }

    impl<T: ?Sized, const R: u8> DerefMut for MutexGuard<'_, T, R> {
        #[inline]
        fn deref_mut(&mut self) -> &mut T {
            // SAFETY: the guard exists only while this thread holds the lock, and `&mut self`
            // makes this the only access through it.
            unsafe { &mut *self.m.data.get() }
        }
    }

    impl<T: ?Sized, const R: u8> Drop for MutexGuard<'_, T, R> {
        #[inline]
        fn drop(&mut self) {
            self.m.release();
            super::order::release(R);
        }
    }

    /// A condition variable for [`Mutex`] (see the module documentation).
    #[derive(Debug, Default)]
    pub struct Condvar {
        seq: AtomicU32,
    }

    impl Condvar {
        /// A condition variable nobody waits on.
        pub const fn new() -> Condvar {
            Condvar {
                seq: AtomicU32::new(0),
            }
        }

        /// Unlocks `guard`'s mutex, sleeps until notified (or spuriously), relocks.
        pub fn wait<'a, T: ?Sized, const R: u8>(
            &self,
            guard: MutexGuard<'a, T, R>,
        ) -> LockResult<MutexGuard<'a, T, R>> {
            let (g, _) = self.wait_inner(guard, None);
            Ok(g)
        }

        /// As [`Condvar::wait`], sleeping at most `dur`; the flag says whether the time was up
        /// (the condition may have changed anyway: re-check it).
        pub fn wait_timeout<'a, T: ?Sized, const R: u8>(
            &self,
            guard: MutexGuard<'a, T, R>,
            dur: Duration,
        ) -> LockResult<(MutexGuard<'a, T, R>, bool)> {
            let (g, woken) = self.wait_inner(guard, Some(dur));
            Ok((g, !woken))
        }

        fn wait_inner<'a, T: ?Sized, const R: u8>(
            &self,
            guard: MutexGuard<'a, T, R>,
            dur: Option<Duration>,
        ) -> (MutexGuard<'a, T, R>, bool) {
            // Read before unlocking: a notification after this point changes it, and the
            // futex wait then returns at once.
            let seen = self.seq.load(Ordering::Relaxed);
            let m = guard.m;
            drop(guard);
            let woken = futex_wait(&self.seq, seen, dur);
            (m.lock().unwrap_or_else(|e| e.into_inner()), woken)
        }

        /// Wakes one waiter.
        pub fn notify_one(&self) {
            self.seq.fetch_add(1, Ordering::Relaxed);
            futex_wake(&self.seq, 1);
        }

        /// Wakes every waiter.
        pub fn notify_all(&self) {
            self.seq.fetch_add(1, Ordering::Relaxed);
            futex_wake(&self.seq, i32::MAX);
        }
    }
}

#[cfg(feature = "valgrind-annotations")]
mod annotated {
    use super::futex;
    use crate::hb;
    use std::ops::{Deref, DerefMut};
    use std::sync::{LockResult, PoisonError};
    use std::time::Duration;

    /// Applies `f` to the guard in a [`LockResult`], keeping the poison flag.
    fn map<G, H>(r: LockResult<G>, f: impl FnOnce(G) -> H) -> LockResult<H> {
        match r {
            Ok(g) => Ok(f(g)),
            Err(e) => Err(PoisonError::new(f(e.into_inner()))),
        }
    }

    /// [`futex::Mutex`] with Helgrind annotations.
    #[derive(Debug, Default)]
    pub struct Mutex<T: ?Sized, const R: u8>(futex::Mutex<T, R>);

    /// Guard of [`Mutex`]; `g` is `None` only while a [`Condvar`] wait holds the std guard.
    pub struct MutexGuard<'a, T: ?Sized, const R: u8> {
        g: Option<futex::MutexGuard<'a, T, R>>,
        tag: usize,
    }

    impl<T, const R: u8> Mutex<T, R> {
        /// [`futex::Mutex::new`].
        pub const fn new(t: T) -> Mutex<T, R> {
            Mutex(futex::Mutex::new(t))
        }
    }

    impl<T: ?Sized, const R: u8> Mutex<T, R> {
        fn tag(&self) -> usize {
            (self as *const Self).cast::<u8>() as usize
        }

        /// [`futex::Mutex::lock`], then acquire annotation.
        #[cfg_attr(debug_assertions, track_caller)]
        pub fn lock(&self) -> LockResult<MutexGuard<'_, T, R>> {
            let tag = self.tag();
            map(self.0.lock(), |g| {
                hb::after(tag);
                MutexGuard { g: Some(g), tag }
            })
        }
    }

    impl<T: ?Sized, const R: u8> Deref for MutexGuard<'_, T, R> {
        type Target = T;
        fn deref(&self) -> &T {
            self.g.as_ref().expect("guard held")
        }
    }

    impl<T: ?Sized, const R: u8> DerefMut for MutexGuard<'_, T, R> {
        fn deref_mut(&mut self) -> &mut T {
            self.g.as_mut().expect("guard held")
        }
    }

    impl<T: ?Sized, const R: u8> Drop for MutexGuard<'_, T, R> {
        fn drop(&mut self) {
            if let Some(g) = self.g.take() {
                hb::before(self.tag);
                drop(g);
            }
        }
    }

    /// [`futex::Condvar`] whose waits release and reacquire an annotated [`Mutex`].
    #[derive(Debug, Default)]
    pub struct Condvar(futex::Condvar);

    impl Condvar {
        /// [`futex::Condvar::new`].
        pub const fn new() -> Condvar {
            Condvar(futex::Condvar::new())
        }

        /// [`futex::Condvar::wait`].
        pub fn wait<'a, T, const R: u8>(
            &self,
            mut guard: MutexGuard<'a, T, R>,
        ) -> LockResult<MutexGuard<'a, T, R>> {
            let tag = guard.tag;
            let g = guard.g.take().expect("guard held");
            hb::before(tag);
            map(self.0.wait(g), |g| {
                hb::after(tag);
                MutexGuard { g: Some(g), tag }
            })
        }

        /// [`futex::Condvar::wait_timeout`].
        pub fn wait_timeout<'a, T, const R: u8>(
            &self,
            mut guard: MutexGuard<'a, T, R>,
            dur: Duration,
        ) -> LockResult<(MutexGuard<'a, T, R>, bool)> {
            let tag = guard.tag;
            let g = guard.g.take().expect("guard held");
            hb::before(tag);
            map(self.0.wait_timeout(g, dur), |(g, t)| {
                hb::after(tag);
                (MutexGuard { g: Some(g), tag }, t)
            })
        }

        /// [`futex::Condvar::notify_one`].
        pub fn notify_one(&self) {
            self.0.notify_one();
        }

        /// [`futex::Condvar::notify_all`].
        pub fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    /// `std::sync::RwLock` with Helgrind annotations (readers and writers share one tag: a
    /// reader's release also orders before the next writer, which is what the lock guarantees).
    #[derive(Debug, Default)]
    pub struct RwLock<T: ?Sized>(std::sync::RwLock<T>);

    /// Read or write guard of [`RwLock`].
    pub struct RwGuard<G> {
        g: Option<G>,
        tag: usize,
    }

    impl<T> RwLock<T> {
        /// `std::sync::RwLock::new`.
        pub const fn new(t: T) -> RwLock<T> {
            RwLock(std::sync::RwLock::new(t))
        }
    }

    impl<T: ?Sized> RwLock<T> {
        fn tag(&self) -> usize {
            (self as *const Self).cast::<u8>() as usize
        }

        /// `std::sync::RwLock::read`, then acquire annotation.
        pub fn read(&self) -> LockResult<RwGuard<std::sync::RwLockReadGuard<'_, T>>> {
            let tag = self.tag();
            map(self.0.read(), |g| {
                hb::after(tag);
                RwGuard { g: Some(g), tag }
            })
        }

        /// `std::sync::RwLock::write`, then acquire annotation.
        pub fn write(&self) -> LockResult<RwGuard<std::sync::RwLockWriteGuard<'_, T>>> {
            let tag = self.tag();
            map(self.0.write(), |g| {
                hb::after(tag);
                RwGuard { g: Some(g), tag }
            })
        }
    }

    impl<G: Deref> Deref for RwGuard<G> {
        type Target = G::Target;
        fn deref(&self) -> &G::Target {
            self.g.as_ref().expect("guard held")
        }
    }

    impl<G: DerefMut> DerefMut for RwGuard<G> {
        fn deref_mut(&mut self) -> &mut G::Target {
            self.g.as_mut().expect("guard held")
        }
    }

    impl<G> Drop for RwGuard<G> {
        fn drop(&mut self) {
            if let Some(g) = self.g.take() {
                hb::before(self.tag);
                drop(g);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::futex::{Condvar, Mutex};
    use super::rank;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// A rank for the tests that are not about ranks.
    const ANY: u8 = rank::SLOT;

    #[test]
    fn the_mutex_excludes_under_contention() {
        // Unsynchronised read-modify-write of a plain counter under the lock: any overlap of two
        // critical sections loses increments. Four threads on two cores force the sleeping path.
        let m = Arc::new(Mutex::<u64, ANY>::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..50_000 {
                        let mut g = m.lock().unwrap();
                        let v = *g;
                        std::hint::black_box(&v);
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*m.lock().unwrap(), 200_000);
    }

    #[test]
    fn a_notification_wakes_a_waiter_and_none_is_lost() {
        let pair = Arc::new((Mutex::<bool, ANY>::new(false), Condvar::new()));
        let woke = Arc::new(AtomicBool::new(false));
        let (p2, w2) = (pair.clone(), woke.clone());
        let waiter = std::thread::spawn(move || {
            let (m, cv) = &*p2;
            let mut g = m.lock().unwrap();
            while !*g {
                g = cv.wait(g).unwrap();
            }
            w2.store(true, Ordering::SeqCst);
        });
        // Set under the lock, notify after: the waiter either sees the flag before sleeping or is
        // woken (the sequence number changed since it read it under the lock).
        std::thread::sleep(Duration::from_millis(20));
        *pair.0.lock().unwrap() = true;
        pair.1.notify_all();
        waiter.join().unwrap();
        assert!(woke.load(Ordering::SeqCst));
    }

    #[test]
    fn a_timed_wait_without_notification_times_out() {
        let m = Mutex::<(), ANY>::new(());
        let cv = Condvar::new();
        let t = Instant::now();
        let (g, timed_out) = cv
            .wait_timeout(m.lock().unwrap(), Duration::from_millis(30))
            .unwrap();
        drop(g);
        assert!(timed_out);
        assert!(t.elapsed() >= Duration::from_millis(30));
        // And the lock was taken again and released by the guard.
        drop(m.lock().unwrap());
    }

    /// A signal handler installed without `SA_RESTART` interrupts a futex sleep with `EINTR`.
    extern "C" fn ignore_signal(_: libc::c_int) {}

    #[test]
    fn a_timed_wait_interrupted_by_signals_still_waits_until_its_deadline() {
        // SAFETY: a handler that does nothing (async-signal-safe), installed for SIGURG, which
        // nothing else in this test binary uses; no SA_RESTART, so the sleep returns EINTR.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ignore_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGURG, &sa, std::ptr::null_mut()), 0);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            tx.send(unsafe { libc::pthread_self() }).unwrap();
            let m = Mutex::<(), ANY>::new(());
            let cv = Condvar::new();
            let t = Instant::now();
            let (g, timed_out) = cv
                .wait_timeout(m.lock().unwrap(), Duration::from_millis(400))
                .unwrap();
            drop(g);
            (timed_out, t.elapsed())
        });
        let thread = rx.recv().unwrap();
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(40));
            // SAFETY: the waiter thread is alive until it returns, 400 ms after it started
            // waiting; these signals are all sent within 200 ms of its start.
            unsafe { libc::pthread_kill(thread, libc::SIGURG) };
        }
        let (timed_out, took) = waiter.join().unwrap();
        assert!(
            timed_out,
            "an interrupted wait reported a wake-up after {took:?}"
        );
        assert!(took >= Duration::from_millis(400), "ended early: {took:?}");
    }

    #[test]
    fn locks_taken_in_rank_order_pass_and_are_forgotten_in_any_release_order() {
        let shard = Mutex::<(), { rank::SHARD }>::new(());
        let slot = Mutex::<(), { rank::SLOT }>::new(());
        let log = Mutex::<(), { rank::LOG }>::new(());
        let cv = Condvar::new();
        let (a, b) = (shard.lock().unwrap(), slot.lock().unwrap());
        // Released out of order: the slot lock is still held, so only higher ranks may follow.
        drop(a);
        let (b, _) = cv.wait_timeout(b, Duration::from_millis(1)).unwrap();
        let c = log.lock().unwrap();
        drop((b, c));
        // Nothing held any more: any rank may be taken again.
        drop(shard.lock().unwrap());
        let live = super::RwLock::<(), { rank::INSTANCE }>::new(());
        let g = super::write(&live);
        drop(shard.lock().unwrap());
        drop(g);
        drop(super::read(&live));
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(
        expected = "lock order violated: taking the request-index shard lock (rank 2) while \
                    holding the sync slot lock (rank 3)"
    )]
    fn an_inversion_panics_with_both_lock_names() {
        let shard = Mutex::<(), { rank::SHARD }>::new(());
        let slot = Mutex::<(), { rank::SLOT }>::new(());
        let _s = slot.lock().unwrap();
        let _t = shard.lock().unwrap();
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(
        expected = "taking the sync slot lock (rank 3) while holding the sync slot lock"
    )]
    fn two_locks_of_one_rank_panic() {
        let (a, b) = (
            Mutex::<(), { rank::SLOT }>::new(()),
            Mutex::<(), { rank::SLOT }>::new(()),
        );
        let _a = a.lock().unwrap();
        let _b = b.lock().unwrap();
    }

    #[cfg(debug_assertions)]
    #[test]
    fn an_inversion_takes_no_lock_and_leaves_the_thread_consistent() {
        let before = super::lock_order_violations();
        let log = Mutex::<(), { rank::LOG }>::new(());
        let queue = Mutex::<(), { rank::WORKER_QUEUE }>::new(());
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _l = log.lock().unwrap();
            let _q = queue.lock().unwrap();
        }));
        let msg = caught.expect_err("inverted");
        let msg = msg.downcast_ref::<String>().expect("formatted message");
        assert!(
            msg.contains("worker queue lock (rank 6) while holding the log lock (rank 10)"),
            "{msg}"
        );
        assert!(super::lock_order_violations() > before);
        // The queue lock was never taken, and the log lock was released by the unwinding: both
        // can be taken again, in order, by this thread.
        let _q = queue.lock().unwrap();
        let _l = log.lock().unwrap();
    }
}
