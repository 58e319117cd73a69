//! The library's lock types: [`futex`]'s mutex and condition variable (no poisoning) and
//! `std::sync::RwLock` in normal builds, and with the cargo feature `valgrind-annotations` thin
//! wrappers around them that tell Helgrind about the ordering each lock provides (see [`crate::hb`]).
//! Every acquisition (lock, read, write, return from a condvar wait) is an [`hb::after`] on the
//! lock's address and every release (guard drop, entry into a condvar wait) is an [`hb::before`]
//! on it, which is the happens-before relation a pthread mutex gives and Helgrind models natively.
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
pub use std::sync::RwLock;

#[cfg(feature = "valgrind-annotations")]
pub use annotated::{Condvar, Mutex, MutexGuard, RwLock};

/// Locks `m` (its `lock` never reports poisoning; the signature keeps `std`'s).
#[inline]
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-locks `l`, ignoring poisoning.
#[inline]
pub fn read<T: ?Sized>(l: &RwLock<T>) -> impl Deref<Target = T> + '_ {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks `l`, ignoring poisoning.
#[inline]
pub fn write<T: ?Sized>(l: &RwLock<T>) -> impl DerefMut<Target = T> + '_ {
    l.write().unwrap_or_else(PoisonError::into_inner)
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

    /// Sleeps while `*word == expected` (at most `timeout`); `false` if the timeout elapsed.
    fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> bool {
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: d.subsec_nanos() as _,
        });
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: FUTEX_WAIT on a live, aligned 32-bit atomic of this process, with a NULL or
        // valid relative timeout; the kernel only reads the word and the timespec.
        let r = unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                tsp,
            )
        };
        !(r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT))
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

    /// A mutual exclusion lock without poisoning (see the module documentation).
    pub struct Mutex<T: ?Sized> {
        word: AtomicU32,
        data: UnsafeCell<T>,
    }

    // SAFETY: the lock hands out access to `data` to one thread at a time, so a `T` that may move
    // between threads may be shared through it (the same bounds as `std::sync::Mutex`).
    unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
    // SAFETY: as above.
    unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

    /// Access to the data of a locked [`Mutex`]; unlocks when dropped. Not `Send` (it is released
    /// by the thread that locked).
    #[must_use = "the lock is released when the guard is dropped"]
    pub struct MutexGuard<'a, T: ?Sized> {
        m: &'a Mutex<T>,
        _not_send: PhantomData<*const ()>,
    }

    // SAFETY: a shared guard only gives `&T`, which is shareable when `T: Sync`.
    unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

    impl<T> Mutex<T> {
        /// An unlocked mutex holding `t`.
        pub const fn new(t: T) -> Mutex<T> {
            Mutex {
                word: AtomicU32::new(UNLOCKED),
                data: UnsafeCell::new(t),
            }
        }
    }

    impl<T: Default> Default for Mutex<T> {
        fn default() -> Self {
            Mutex::new(T::default())
        }
    }

    impl<T: ?Sized> std::fmt::Debug for Mutex<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Mutex { .. }")
        }
    }

    impl<T: ?Sized> Mutex<T> {
        /// Locks, blocking while another thread holds the lock. Never `Err` (no poisoning); the
        /// `LockResult` keeps `std`'s signature.
        #[inline]
        pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
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

    impl<T: ?Sized> Deref for MutexGuard<'_, T> {
        type Target = T;
        #[inline]
        fn deref(&self) -> &T {
            // SAFETY: the guard exists only while this thread holds the lock.
            unsafe { &*self.m.data.get() }
        }
    }

    impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
        #[inline]
        fn deref_mut(&mut self) -> &mut T {
            // SAFETY: the guard exists only while this thread holds the lock, and `&mut self`
            // makes this the only access through it.
            unsafe { &mut *self.m.data.get() }
        }
    }

    impl<T: ?Sized> Drop for MutexGuard<'_, T> {
        #[inline]
        fn drop(&mut self) {
            self.m.release();
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
        pub fn wait<'a, T: ?Sized>(
            &self,
            guard: MutexGuard<'a, T>,
        ) -> LockResult<MutexGuard<'a, T>> {
            let (g, _) = self.wait_inner(guard, None);
            Ok(g)
        }

        /// As [`Condvar::wait`], sleeping at most `dur`; the flag says whether the time was up
        /// (the condition may have changed anyway: re-check it).
        pub fn wait_timeout<'a, T: ?Sized>(
            &self,
            guard: MutexGuard<'a, T>,
            dur: Duration,
        ) -> LockResult<(MutexGuard<'a, T>, bool)> {
            let (g, woken) = self.wait_inner(guard, Some(dur));
            Ok((g, !woken))
        }

        fn wait_inner<'a, T: ?Sized>(
            &self,
            guard: MutexGuard<'a, T>,
            dur: Option<Duration>,
        ) -> (MutexGuard<'a, T>, bool) {
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
    pub struct Mutex<T: ?Sized>(futex::Mutex<T>);

    /// Guard of [`Mutex`]; `g` is `None` only while a [`Condvar`] wait holds the std guard.
    pub struct MutexGuard<'a, T: ?Sized> {
        g: Option<futex::MutexGuard<'a, T>>,
        tag: usize,
    }

    impl<T> Mutex<T> {
        /// [`futex::Mutex::new`].
        pub const fn new(t: T) -> Mutex<T> {
            Mutex(futex::Mutex::new(t))
        }
    }

    impl<T: ?Sized> Mutex<T> {
        fn tag(&self) -> usize {
            (self as *const Self).cast::<u8>() as usize
        }

        /// [`futex::Mutex::lock`], then acquire annotation.
        pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
            let tag = self.tag();
            map(self.0.lock(), |g| {
                hb::after(tag);
                MutexGuard { g: Some(g), tag }
            })
        }
    }

    impl<T: ?Sized> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.g.as_ref().expect("guard held")
        }
    }

    impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.g.as_mut().expect("guard held")
        }
    }

    impl<T: ?Sized> Drop for MutexGuard<'_, T> {
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
        pub fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
            let tag = guard.tag;
            let g = guard.g.take().expect("guard held");
            hb::before(tag);
            map(self.0.wait(g), |g| {
                hb::after(tag);
                MutexGuard { g: Some(g), tag }
            })
        }

        /// [`futex::Condvar::wait_timeout`].
        pub fn wait_timeout<'a, T>(
            &self,
            mut guard: MutexGuard<'a, T>,
            dur: Duration,
        ) -> LockResult<(MutexGuard<'a, T>, bool)> {
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
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn the_mutex_excludes_under_contention() {
        // Unsynchronised read-modify-write of a plain counter under the lock: any overlap of two
        // critical sections loses increments. Four threads on two cores force the sleeping path.
        let m = Arc::new(Mutex::new(0u64));
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
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
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
        let m = Mutex::new(());
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
}
