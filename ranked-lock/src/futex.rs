//! A mutex and a condition variable on Linux futexes, without poisoning.
//!
//! The mutex word is 0 (unlocked), 1 (locked) or 2 (locked, and a thread may sleep on it). Locking
//! is one compare-and-swap 0 → 1; under contention a thread re-reads the word for a short while
//! (the holder usually releases within a few hundred instructions), then sets 2 and sleeps on the
//! futex until the word is no longer 2, and locks with 2 (it cannot know whether others still
//! sleep). Unlocking swaps in 0 and wakes one sleeper only if the word was 2.
//!
//! The condition variable is a sequence number: a waiter reads it, unlocks, sleeps while it is
//! unchanged (the kernel compares atomically with going to sleep, so a notification between the
//! unlock and the sleep is never lost) and relocks; a notification increments it and wakes one or
//! all sleepers. Waits may return spuriously, as `std`'s do: every caller re-checks its condition.

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
    let now = crate::clock::now();
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
        crate::order::acquire(R);
        self.acquire();
        Ok(MutexGuard {
            m: self,
            _not_send: PhantomData,
        })
    }

    /// Takes the lock if it is free, else `None` at once. A failed try cannot deadlock, so the
    /// order is not checked; a lock taken is recorded like any other, and the locks taken while
    /// it is held are checked against it.
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T, R>> {
        self.word
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        crate::order::record(R);
        Some(MutexGuard {
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
            match self
                .word
                .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            {
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
        crate::order::release(R);
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
