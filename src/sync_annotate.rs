//! The library's lock types: `std::sync` itself in normal builds, and with the cargo feature
//! `valgrind-annotations` thin wrappers that tell Helgrind about the ordering each lock provides
//! (see [`crate::hb`]). Every acquisition (lock, read, write, return from a condvar wait) is an
//! [`hb::after`] on the lock's address and every release (guard drop, entry into a condvar wait)
//! is an [`hb::before`] on it, which is the happens-before relation a pthread mutex gives and
//! Helgrind models natively.
//!
//! Only the API the library uses is provided; poisoning behaves as in `std`, and the library
//! ignores it: [`lock`], [`read`] and [`write`] take the lock whether or not a thread panicked
//! while holding it (the library's state stays consistent across a panic of user code, which the
//! API boundary catches).

use std::ops::{Deref, DerefMut};
use std::sync::PoisonError;

#[cfg(not(feature = "valgrind-annotations"))]
pub use std::sync::{Condvar, Mutex, MutexGuard, RwLock};

#[cfg(feature = "valgrind-annotations")]
pub use annotated::{Condvar, Mutex, MutexGuard, RwLock};

/// Locks `m`, ignoring poisoning.
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

#[cfg(feature = "valgrind-annotations")]
mod annotated {
    use crate::hb;
    use std::ops::{Deref, DerefMut};
    use std::sync::{LockResult, PoisonError, WaitTimeoutResult};
    use std::time::Duration;

    /// Applies `f` to the guard in a [`LockResult`], keeping the poison flag.
    fn map<G, H>(r: LockResult<G>, f: impl FnOnce(G) -> H) -> LockResult<H> {
        match r {
            Ok(g) => Ok(f(g)),
            Err(e) => Err(PoisonError::new(f(e.into_inner()))),
        }
    }

    /// `std::sync::Mutex` with Helgrind annotations.
    #[derive(Debug, Default)]
    pub struct Mutex<T: ?Sized>(std::sync::Mutex<T>);

    /// Guard of [`Mutex`]; `g` is `None` only while a [`Condvar`] wait holds the std guard.
    pub struct MutexGuard<'a, T: ?Sized> {
        g: Option<std::sync::MutexGuard<'a, T>>,
        tag: usize,
    }

    impl<T> Mutex<T> {
        /// `std::sync::Mutex::new`.
        pub const fn new(t: T) -> Mutex<T> {
            Mutex(std::sync::Mutex::new(t))
        }
    }

    impl<T: ?Sized> Mutex<T> {
        fn tag(&self) -> usize {
            (self as *const Self).cast::<u8>() as usize
        }

        /// `std::sync::Mutex::lock`, then acquire annotation.
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

    /// `std::sync::Condvar` whose waits release and reacquire an annotated [`Mutex`].
    #[derive(Debug, Default)]
    pub struct Condvar(std::sync::Condvar);

    impl Condvar {
        /// `std::sync::Condvar::new`.
        pub const fn new() -> Condvar {
            Condvar(std::sync::Condvar::new())
        }

        /// `std::sync::Condvar::wait`.
        pub fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
            let tag = guard.tag;
            let g = guard.g.take().expect("guard held");
            hb::before(tag);
            map(self.0.wait(g), |g| {
                hb::after(tag);
                MutexGuard { g: Some(g), tag }
            })
        }

        /// `std::sync::Condvar::wait_timeout`.
        pub fn wait_timeout<'a, T>(
            &self,
            mut guard: MutexGuard<'a, T>,
            dur: Duration,
        ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
            let tag = guard.tag;
            let g = guard.g.take().expect("guard held");
            hb::before(tag);
            map(self.0.wait_timeout(g, dur), |(g, t)| {
                hb::after(tag);
                (MutexGuard { g: Some(g), tag }, t)
            })
        }

        /// `std::sync::Condvar::notify_one`.
        pub fn notify_one(&self) {
            self.0.notify_one();
        }

        /// `std::sync::Condvar::notify_all`.
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
