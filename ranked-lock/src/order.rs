//! The per-thread check of the lock order.

#[cfg(debug_assertions)]
mod imp {
    use crate::rank;
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
#[cfg(not(debug_assertions))]
mod imp {
    #[inline(always)]
    pub fn acquire(_r: u8) {}

    #[inline(always)]
    pub fn release(_r: u8) {}
}

pub use imp::*;
