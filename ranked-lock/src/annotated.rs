//! The lock types with Helgrind annotations (cargo feature `valgrind-annotations`).

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
