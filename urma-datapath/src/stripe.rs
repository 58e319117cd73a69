//! Striped globals: counters that every posting thread and the poller bump, cut by thread over
//! cache lines of their own, so that they do not pass one line back and forth at every post and
//! CR. The provider's statistics and engine lanes and the fault plane's sequence counters
//! ([`crate::faults::Seq`]) use them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// How many stripes a striped global ([`Counter`], the fault plane's sequence counters, the
/// provider's engine lane locks) is cut into.
pub const STRIPES: usize = 8;

/// The calling thread's stripe (`0..STRIPES`): threads take stripes round-robin in the order
/// they first ask, so the few threads that post and poll at once (an application's submitter,
/// its poller, the library's workers) each update their own cache lines instead of bouncing one
/// line between CPUs.
#[inline]
pub fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.try_with(|s| *s).unwrap_or(0)
}

/// A hot global on cache lines of its own (the provider's registry EPOCH is read on every
/// lookup; it shared a line with the sequence counters, which every post and CR increments).
#[repr(align(128))]
pub struct Line<T>(pub T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// One stripe on cache lines of its own.
#[repr(align(128))]
struct Stripe(AtomicU64);

/// A counter striped over cache lines by thread: every post, CR and poll bumps a few counters,
/// and one shared word per counter bounced between the posting threads and the poller. Reads
/// sum the stripes (wrapping, so a gauge such as `crs_held` that one thread raises and another
/// lowers still reads right); like plain atomics, a read concurrent with updates may miss some
/// of them.
pub struct Counter([Stripe; STRIPES]);

impl Default for Counter {
    fn default() -> Self {
        Self::new()
    }
}

impl Counter {
    pub const fn new() -> Counter {
        Counter([const { Stripe(AtomicU64::new(0)) }; STRIPES])
    }

    #[inline]
    fn mine(&self) -> &AtomicU64 {
        &self.0[stripe()].0
    }

    #[inline]
    pub fn fetch_add(&self, v: u64, o: Ordering) {
        self.mine().fetch_add(v, o);
    }

    #[inline]
    pub fn fetch_sub(&self, v: u64, o: Ordering) {
        self.mine().fetch_sub(v, o);
    }

    #[inline]
    pub fn load(&self, o: Ordering) -> u64 {
        self.0
            .iter()
            .fold(0u64, |acc, s| acc.wrapping_add(s.0.load(o)))
    }

    pub fn store(&self, v: u64, o: Ordering) {
        for (i, s) in self.0.iter().enumerate() {
            s.0.store(if i == 0 { v } else { 0 }, o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Counter;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn striped_counter_sums_every_thread_and_resets() {
        let c = Counter::new();
        std::thread::scope(|s| {
            for _ in 0..12 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        c.fetch_add(1, Relaxed);
                    }
                });
            }
        });
        assert_eq!(c.load(Relaxed), 12_000);
        c.store(0, Relaxed);
        assert_eq!(c.load(Relaxed), 0);
        c.store(5, Relaxed);
        assert_eq!(c.load(Relaxed), 5);
    }

    #[test]
    fn a_gauge_raised_and_lowered_on_different_threads_reads_right() {
        let c = Counter::new();
        std::thread::scope(|s| {
            s.spawn(|| c.fetch_add(7, Relaxed));
        });
        std::thread::scope(|s| {
            s.spawn(|| {
                // Likely another stripe: that stripe wraps below zero, the sum does not.
                std::thread::spawn(|| ()).join().unwrap();
                c.fetch_sub(3, Relaxed)
            });
        });
        c.fetch_sub(4, Relaxed);
        assert_eq!(c.load(Relaxed), 0);
    }
}
