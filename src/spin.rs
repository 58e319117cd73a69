//! Waiting without sleeping: the bounded pause-then-yield loop used by a worker right after a task
//! (`pool`) and by a waiter before it blocks on its condvar (`wait`), and the estimate that decides
//! whether such a wait is worth starting at all ([`Gaps`]).
//!
//! Times here are plain nanoseconds of the monotonic clock ([`now_ns`]): these waits run after
//! every task and before every blocking wait, and `Instant`/`Duration` arithmetic (checked
//! subtraction and normalisation of two-field timestamps) cost more instructions than the clock
//! read itself.

/// Yields between two reads of the clock: a yield that finds nothing else to run returns in well
/// under a microsecond, and a clock read per yield would cost more instructions than the yield.
const YIELDS_PER_CHECK: u32 = 4;

pub use ranked_lock::clock::now_ns;

/// How [`pause_then_yield`] ended.
pub enum Spun {
    /// `ready` held; the yield phase had lasted this many ns (zero if it held during the pauses).
    Ready(u64),
    /// `ready` never held within the budget; the yield phase started at this [`now_ns`] reading.
    TimedOut(u64),
}

/// Checks `ready` up to `pauses` times with a spin-loop hint in between, then between
/// `sched_yield`s until `ready` holds or `budget_ns` have passed since the yield phase began.
///
/// Always inlined: called on every task and wait, with closures that must fold into the loop
/// (out of line it cost ~0.5 k more instructions per 7-chunk pair under callgrind).
#[inline(always)]
pub fn pause_then_yield(ready: impl Fn() -> bool, pauses: u32, budget_ns: u64) -> Spun {
    for _ in 0..pauses {
        if ready() {
            return Spun::Ready(0);
        }
        std::hint::spin_loop();
    }
    let start = now_ns();
    loop {
        for _ in 0..YIELDS_PER_CHECK {
            if ready() {
                return Spun::Ready(now_ns().wrapping_sub(start));
            }
            std::thread::yield_now();
        }
        if now_ns().wrapping_sub(start) >= budget_ns {
            return Spun::TimedOut(start);
        }
    }
}

/// When a wait without sleeping pays, for one kind of wait (see [`Gaps`]). Nanoseconds (plain
/// integers: this runs after every task and before every blocking wait, and `Duration`
/// arithmetic cost several hundred instructions per request there).
#[derive(Debug, Clone, Copy)]
pub struct SpinPolicy {
    /// Longest expected wait worth spinning for: beyond it, blocking at once costs less CPU.
    pub limit_ns: u64,
    /// Shortest budget once spinning (an estimate from a few samples is rough).
    pub min_ns: u64,
    /// Longest budget.
    pub max_ns: u64,
}

/// After this many waits in a row that blocked at once, one wait spins for [`SpinPolicy::min_ns`]
/// (a probe): a blocked wait measures the wake-up latency too, so without these probes an
/// estimate that went above the limit could stay there after the arrivals became close again.
/// Gaps longer than the minimum are measured well enough by the blocked waits themselves.
const PROBE_EVERY: u32 = 8;

/// A moving estimate (weight 1/4) of how long one kind of wait lasts until what it waits for
/// arrives, and the budget it gives the next such wait: twice the estimate, within
/// [`SpinPolicy::min_ns`]..=[`SpinPolicy::max_ns`], while the estimate is at most
/// [`SpinPolicy::limit_ns`]; otherwise no spinning at all (the thread blocks at once), except for
/// a short probe every [`PROBE_EVERY`] waits. Each sample is capped at 4 × the limit, so that one
/// long idle period does not hold the estimate above the limit for long: two such samples in a
/// row put it above, four or five close ones bring it back.
#[derive(Debug, Default, Clone, Copy)]
pub struct Gaps {
    est_ns: u64,
    blocked: u32,
}

impl Gaps {
    /// A fresh estimate (no history: the next wait spins for the minimum).
    pub const fn new() -> Gaps {
        Gaps {
            est_ns: 0,
            blocked: 0,
        }
    }

    /// How long the next wait may spin, ns; `None`: block at once.
    #[inline]
    pub fn budget(&mut self, p: &SpinPolicy) -> Option<u64> {
        if self.would_spin(p) {
            self.blocked = 0;
            return Some((self.est_ns * 2).clamp(p.min_ns, p.max_ns));
        }
        self.blocked += 1;
        if self.blocked >= PROBE_EVERY {
            self.blocked = 0;
            return Some(p.min_ns);
        }
        None
    }

    /// Whether the next wait would spin (the estimate is within the limit), without counting it
    /// as a wait.
    #[inline]
    pub fn would_spin(&self, p: &SpinPolicy) -> bool {
        self.est_ns <= p.limit_ns
    }

    /// Records how long a wait lasted until its event arrived (spinning or blocked), ns.
    #[inline]
    pub fn record(&mut self, waited_ns: u64, p: &SpinPolicy) {
        let g = waited_ns.min(p.limit_ns * 4);
        self.est_ns = self.est_ns - self.est_ns / 4 + g / 4;
    }

    /// The current estimate, ns.
    #[cfg(test)]
    pub fn estimate_ns(&self) -> u64 {
        self.est_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1000;
    const P: SpinPolicy = SpinPolicy {
        limit_ns: 20 * US,
        min_ns: 5 * US,
        max_ns: 30 * US,
    };

    #[test]
    fn close_arrivals_spin_twice_the_estimate_within_bounds() {
        let mut g = Gaps::new();
        assert_eq!(g.budget(&P), Some(P.min_ns), "no history: the minimum");
        for _ in 0..32 {
            g.record(8 * US, &P);
        }
        let b = g.budget(&P).expect("8 µs is below the limit");
        assert!(b > 14 * US && b <= 16 * US, "{b}");
        for _ in 0..32 {
            g.record(19 * US, &P);
        }
        assert_eq!(g.budget(&P), Some(P.max_ns), "capped at the maximum");
    }

    #[test]
    fn far_arrivals_block_at_once_but_probe_and_recover() {
        let mut g = Gaps::new();
        for _ in 0..2 {
            g.record(1000 * US, &P);
        }
        assert!(
            g.estimate_ns() > P.limit_ns,
            "two long gaps put it above the limit"
        );
        let decisions: Vec<_> = (0..PROBE_EVERY).map(|_| g.budget(&P)).collect();
        assert!(decisions[..PROBE_EVERY as usize - 1]
            .iter()
            .all(Option::is_none));
        assert_eq!(
            decisions[PROBE_EVERY as usize - 1],
            Some(P.min_ns),
            "one short probe"
        );
        assert!(g.estimate_ns() <= P.limit_ns * 4, "samples are capped");
        for _ in 0..6 {
            g.record(3 * US, &P);
        }
        assert!(
            g.budget(&P).is_some(),
            "close arrivals again: spinning again"
        );
    }

    #[test]
    fn the_clock_is_the_monotonic_clock_in_nanoseconds() {
        let (a, ia) = (now_ns(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (ib, b) = (std::time::Instant::now(), now_ns());
        let inner = u64::try_from(ib.duration_since(ia).as_nanos()).expect("fits");
        assert!(b - a >= 5_000_000, "slept 5 ms: {} ns", b - a);
        // Read outside the two `Instant` readings (the same clock): at least their distance, and
        // not far more (the slack only covers preemption between the readings).
        assert!(
            b - a >= inner && b - a < inner + 100_000_000,
            "{} vs {inner}",
            b - a
        );
    }

    #[test]
    fn ready_during_the_pauses_takes_no_yield_phase() {
        assert!(matches!(pause_then_yield(|| true, 8, 0), Spun::Ready(0)));
    }

    #[test]
    fn never_ready_ends_at_the_computed_end() {
        let before = now_ns();
        let Spun::TimedOut(start) = pause_then_yield(|| false, 4, 200 * US) else {
            panic!("never ready must time out");
        };
        assert!(start >= before);
        assert!(now_ns() - start >= 200 * US);
    }

    #[test]
    fn ready_in_the_yield_phase_reports_how_long_it_took() {
        let n = std::cell::Cell::new(0);
        let ready = || {
            n.set(n.get() + 1);
            n.get() > 20
        };
        let Spun::Ready(_) = pause_then_yield(ready, 4, 5_000_000 * US) else {
            panic!("ready after 20 checks");
        };
        assert_eq!(n.get(), 21);
    }
}
