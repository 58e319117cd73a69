//! Ranked locks: the lock types of the workspace's Rust libraries, each lock with a rank, and
//! the check of their order.
//!
//! [`futex`]'s mutex and condition variable (no poisoning) and `std::sync::RwLock` in normal
//! builds; with the cargo feature `valgrind-annotations`, thin wrappers around them that tell
//! Helgrind about the ordering each lock provides ([`hb`]): every acquisition (lock, read, write,
//! return from a condvar wait) is an [`hb::after`] on the lock's address and every release (guard
//! drop, entry into a condvar wait) is an [`hb::before`] on it, the happens-before relation a
//! pthread mutex gives and Helgrind models natively.
//!
//! Every lock has a rank ([`rank`], the `R` of [`Mutex`] and [`RwLock`]): a thread may only take
//! a lock of a higher rank than every lock it holds. [`rank`] is the one table of every lock of
//! the workspace, each crate's in a range of its own, ordered as calls go (the library calls
//! URMA, the interposition layer calls the provider): a crate that holds a lock while it calls
//! the next one down takes only locks of higher ranks there. Builds with debug assertions check
//! the order on every acquisition, per thread (a stack of the ranks the thread holds, one per
//! shared object that links this crate), and panic with the names of both locks on an
//! inversion, taking nothing; other builds carry no trace of it (the bookkeeping functions are
//! empty).
//!
//! Poisoning is ignored ([`lock`], [`read`] and [`write`] take the lock whether or not a thread
//! panicked while holding it: the users keep their state consistent across a panic of user code,
//! which their C boundary catches), so the mutex does not track it at all: `std::sync::Mutex`
//! checks the thread's panic state on every lock and every unlock, about a tenth of the
//! library's instructions per chunk (docs/performance.md, "Alternatives measured and not kept").

pub mod clock;
pub mod futex;
pub mod hb;
pub mod rank;

#[cfg(feature = "valgrind-annotations")]
mod annotated;
mod order;
#[cfg(test)]
mod tests;

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
