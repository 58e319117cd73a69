//! The fault plane: the one fault engine of the loopback provider and of the interposition
//! layer. Each library keeps one `static` [`FaultPlane`]; what the faults mean, how the events
//! they name are numbered and what happens to held and delayed CRs is written here once.
//!
//! * [`Rules`]: the fault rules and CR timing both libraries have (`fail_post`, `fail_cr`,
//!   `drop_cr` / `dup_cr`, `hold`, `delay_ms`), set through the control exports
//!   ([`FaultPlane::add_fail_post`], ...) or a knob spec ([`FaultPlane::apply_spec`]); each rule
//!   names "the Nth WR / CR" and is used once.
//! * [`Seq`]: the numbering of send WRs, recv WRs and CRs (1-based since start or reset), exact
//!   whenever a rule can match and otherwise counted on per-thread stripes.
//! * [`Kept`]: the CRs the plane holds (until released, in an [`order`]) or delays (until due).
//! * The library's own state (`X`, see [`Own`]) lives under the same lock: the provider has none,
//!   the layer its rules by send WR / receive CR and the CRs it is about to hand over.
//!
//! Fast path: [`FaultPlane::any`] is one atomic load, false while no rule is set and the library
//! says its own state needs nothing ([`Own::busy`]); posts and CRs then take no lock. Every change
//! goes through [`FaultPlane::edit`], which recomputes it under the lock.

use ranked_lock::{rank, Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::spec::{self, Knob};
use crate::stripe::{Counter, Line};
use crate::{CR_DROP, CR_DUP, ORDER_REVERSE, ORDER_SHUFFLE, Q_RECV, Q_SEND};

/// What happens to one CR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Deliver,
    Drop,
    Dup,
}

impl Fate {
    /// From a `cr_action` selector (`CR_DROP`, `CR_DUP`; anything else delivers).
    pub fn of(action: c_int) -> Fate {
        match action {
            CR_DROP => Fate::Drop,
            CR_DUP => Fate::Dup,
            _ => Fate::Deliver,
        }
    }

    /// The trace's name of the fate (`fate` of a `cr` line).
    pub fn as_str(self) -> &'static str {
        match self {
            Fate::Deliver => "deliver",
            Fate::Drop => "drop",
            Fate::Dup => "dup",
        }
    }
}

/// Takes the rule for the `nth` item out of `rules` ((nth, value) pairs): its value, once.
pub fn take<T: Copy>(rules: &mut Vec<(u64, T)>, nth: u64) -> Option<T> {
    let i = rules.iter().position(|&(n, _)| n == nth)?;
    Some(rules.remove(i).1)
}

/// Takes the `fail_post` rule ((queue, nth, status)) for the `nth` WR of `queue`: its status,
/// once.
pub fn take_post(rules: &mut Vec<(c_int, u64, c_int)>, queue: c_int, nth: u64) -> Option<c_int> {
    let i = rules.iter().position(|&(q, n, _)| q == queue && n == nth)?;
    Some(rules.remove(i).2)
}

/// Puts held CRs in their release order: `ORDER_FIFO` (as held), `ORDER_REVERSE`, or
/// `ORDER_SHUFFLE` (a Fisher-Yates shuffle driven by splitmix64 from `seed`: the same seed gives
/// the same order on the loopback and in the layer).
pub fn order<T>(v: &mut [T], order: c_int, seed: u64) {
    match order {
        ORDER_REVERSE => v.reverse(),
        ORDER_SHUFFLE => {
            let mut s = seed;
            let mut next = || {
                s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = s;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
            };
            for i in (1..v.len()).rev() {
                let j = (next() % (i as u64 + 1)) as usize;
                v.swap(i, j);
            }
        }
        _ => {}
    }
}

/// The fault rules and CR timing both libraries have.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// (queue, nth, status): the Nth WR of that queue kind is rejected by the post call.
    pub fail_post: Vec<(c_int, u64, c_int)>,
    /// (nth, cr status): the Nth send WR completes with this error status (nothing executed).
    pub fail_cr: Vec<(u64, u32)>,
    /// (nth, action): the Nth CR is dropped or duplicated.
    pub cr_action: Vec<(u64, c_int)>,
    /// CRs are held until released.
    pub hold: bool,
    /// CRs are delayed by this many milliseconds (0: not delayed).
    pub delay_ms: u64,
}

impl Rules {
    /// No rule, nothing held or delayed.
    pub const fn new() -> Rules {
        Rules {
            fail_post: Vec::new(),
            fail_cr: Vec::new(),
            cr_action: Vec::new(),
            hold: false,
            delay_ms: 0,
        }
    }

    /// Whether any rule is set (posts and CRs must then be numbered and checked).
    pub fn is_set(&self) -> bool {
        !self.fail_post.is_empty()
            || !self.fail_cr.is_empty()
            || !self.cr_action.is_empty()
            || self.hold
            || self.delay_ms > 0
    }
}

/// A numbering of events ("the Nth send WR / recv WR / CR"), 1-based since start or
/// [`Seq::reset`]. It is exact only while it must be (some rule is set: [`FaultPlane::any`]):
/// then every event takes the next number from one shared word. Otherwise each thread counts on
/// a stripe of its own ([`Counter`]), so that the posting threads and the poller do not pass
/// one cache line back and forth at every post and CR; the stripes still count, so that a rule
/// set later numbers from start or reset.
pub struct Seq {
    exact: Line<AtomicU64>,
    quiet: Counter,
}

impl Seq {
    pub const fn new() -> Seq {
        Seq {
            exact: Line(AtomicU64::new(0)),
            quiet: Counter::new(),
        }
    }

    /// Counts one event; returns its 1-based number when `exact`, 0 (no rule names it)
    /// otherwise. Events counted while not exact are numbered before every later one.
    #[inline]
    pub fn next(&self, exact: bool) -> u64 {
        if !exact {
            self.quiet.fetch_add(1, Ordering::Relaxed);
            return 0;
        }
        self.exact.fetch_add(1, Ordering::Relaxed) + 1 + self.quiet.load(Ordering::Relaxed)
    }

    /// Counts `n` events at once (exact or on the thread's stripe).
    #[inline]
    pub fn add(&self, n: u64, exact: bool) {
        if exact {
            self.exact.fetch_add(n, Ordering::Relaxed);
        } else {
            self.quiet.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The number of the last event counted (0 before the first).
    pub fn last(&self) -> u64 {
        self.exact.load(Ordering::Relaxed) + self.quiet.load(Ordering::Relaxed)
    }

    /// Numbering from 1 again.
    pub fn reset(&self) {
        self.exact.store(0, Ordering::Release);
        self.quiet.store(0, Ordering::Release);
    }
}

impl Default for Seq {
    fn default() -> Self {
        Seq::new()
    }
}

/// CRs kept by the plane: held (until released) and delayed (until due). `T` is what the library
/// needs to hand a CR over later (the CR and where it goes).
pub struct Kept<T> {
    held: Vec<T>,
    /// In due order; entries due at the same time in the order they came.
    delayed: VecDeque<(Instant, T)>,
}

impl<T> Kept<T> {
    pub const fn new() -> Kept<T> {
        Kept {
            held: Vec::new(),
            delayed: VecDeque::new(),
        }
    }

    /// CRs held or delayed.
    pub fn len(&self) -> usize {
        self.held.len() + self.delayed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every CR kept, held ones first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.held.iter().chain(self.delayed.iter().map(|(_, t)| t))
    }

    /// Keeps only the CRs `keep` says yes to (e.g. not those of a deleted JFC).
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.held.retain(&mut keep);
        self.delayed.retain(|(_, t)| keep(t));
    }

    /// Takes the delayed CRs due at `now`, in due order.
    pub fn take_due(&mut self, now: Instant) -> Vec<T> {
        let n = self.delayed.iter().take_while(|(t, _)| *t <= now).count();
        self.delayed.drain(..n).map(|(_, t)| t).collect()
    }

    /// When the next delayed CR is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.delayed.front().map(|(t, _)| *t)
    }

    fn delay(&mut self, due: Instant, t: T) {
        let pos = self
            .delayed
            .iter()
            .rposition(|(d, _)| *d <= due)
            .map_or(0, |i| i + 1);
        self.delayed.insert(pos, (due, t));
    }
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept::new()
    }
}

/// A library's own fault state, kept under the plane's lock beside the shared [`Rules`].
pub trait Own {
    /// Whether this state needs the slow path although no shared rule is set; `kept`: the CRs
    /// the plane holds or delays now.
    fn busy(&self, kept: usize) -> bool;
}

/// The provider has no fault state of its own: held and delayed CRs are in their JFC's future,
/// not in the post or poll path.
impl Own for () {
    fn busy(&self, _: usize) -> bool {
        false
    }
}

/// Everything under the plane's lock.
pub struct State<X, T> {
    pub rules: Rules,
    pub kept: Kept<T>,
    pub own: X,
    /// A thread sleeps in [`FaultPlane::wait_due`].
    sleeping: bool,
}

impl<X: Own, T> State<X, T> {
    fn busy(&self) -> bool {
        self.rules.is_set() || self.own.busy(self.kept.len())
    }
}

/// What [`FaultPlane::keep`] did with a CR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    Held,
    Delayed,
}

/// The fault plane of one library (see the module doc). `X` is the library's own state, `T` what
/// it keeps for a held or delayed CR.
pub struct FaultPlane<X, T> {
    state: Mutex<State<X, T>, { rank::FAULT_PLANE }>,
    /// `State::busy`, written under the lock, read without it.
    any: AtomicBool,
    /// Signalled when a delayed CR is added while a thread waits for the next one due.
    due: Condvar,
    /// "The Nth send WR" (every send WR that reaches a post call).
    pub send: Seq,
    /// "The Nth recv WR".
    pub recv: Seq,
    /// "The Nth CR".
    pub cr: Seq,
}

/// The plane's state, locked; dropping it recomputes [`FaultPlane::any`].
pub struct Edit<'a, X: Own, T> {
    g: MutexGuard<'a, State<X, T>, { rank::FAULT_PLANE }>,
    any: &'a AtomicBool,
}

impl<X: Own, T> std::ops::Deref for Edit<'_, X, T> {
    type Target = State<X, T>;
    fn deref(&self) -> &State<X, T> {
        &self.g
    }
}

impl<X: Own, T> std::ops::DerefMut for Edit<'_, X, T> {
    fn deref_mut(&mut self) -> &mut State<X, T> {
        &mut self.g
    }
}

impl<X: Own, T> Drop for Edit<'_, X, T> {
    fn drop(&mut self) {
        self.any.store(self.g.busy(), Ordering::Release);
    }
}

impl<X: Own, T> FaultPlane<X, T> {
    /// No rule, nothing kept, numbering from 1.
    pub const fn new(own: X) -> FaultPlane<X, T> {
        FaultPlane {
            state: Mutex::new(State {
                rules: Rules::new(),
                kept: Kept::new(),
                own,
                sleeping: false,
            }),
            any: AtomicBool::new(false),
            due: Condvar::new(),
            send: Seq::new(),
            recv: Seq::new(),
            cr: Seq::new(),
        }
    }

    /// Whether posts and CRs must take the slow path: a rule is set, or the library's own state
    /// needs it. One atomic load.
    #[inline]
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// Locks the state; [`FaultPlane::any`] follows whatever is changed through the guard.
    pub fn lock(&self) -> Edit<'_, X, T> {
        Edit {
            g: ranked_lock::lock(&self.state),
            any: &self.any,
        }
    }

    /// Runs `f` on the locked state (see [`FaultPlane::lock`]).
    pub fn edit<R>(&self, f: impl FnOnce(&mut State<X, T>) -> R) -> R {
        f(&mut self.lock())
    }

    /// Numbers one send WR (0 while no rule can name it).
    #[inline]
    pub fn next_send(&self) -> u64 {
        self.send.next(self.any())
    }

    /// Numbers one recv WR (0 while no rule can name it).
    #[inline]
    pub fn next_recv(&self) -> u64 {
        self.recv.next(self.any())
    }

    /// Numbers one CR (0 while no rule can name it).
    #[inline]
    pub fn next_cr(&self) -> u64 {
        self.cr.next(self.any())
    }

    /// Clears the rules and restarts the numbering (held CRs stay held: the library releases
    /// them, [`FaultPlane::release`]).
    pub fn reset(&self) {
        self.edit(|s| s.rules = Rules::new());
        self.send.reset();
        self.recv.reset();
        self.cr.reset();
    }

    /// `urma_*_fail_post`: the `nth` WR of `queue` fails its post with `status`. 0, or -1 for an
    /// unknown queue or `nth` 0.
    pub fn add_fail_post(&self, queue: c_int, nth: u64, status: c_int) -> c_int {
        if !(queue == Q_SEND || queue == Q_RECV) || nth == 0 {
            return -1;
        }
        self.edit(|s| s.rules.fail_post.push((queue, nth, status)));
        0
    }

    /// `urma_*_fail_completion`: the `nth` send WR completes with `cr_status`. 0, or -1 for
    /// `nth` 0.
    pub fn add_fail_cr(&self, nth: u64, cr_status: u32) -> c_int {
        if nth == 0 {
            return -1;
        }
        self.edit(|s| s.rules.fail_cr.push((nth, cr_status)));
        0
    }

    /// `urma_*_cr_action`: the `nth` CR is dropped (`CR_DROP`) or duplicated (`CR_DUP`). 0, or
    /// -1 for `nth` 0 or another action.
    pub fn add_cr_action(&self, nth: u64, action: c_int) -> c_int {
        if nth == 0 || !(action == CR_DROP || action == CR_DUP) {
            return -1;
        }
        self.edit(|s| s.rules.cr_action.push((nth, action)));
        0
    }

    /// Holds CRs from now on (true) or stops holding (false; held CRs stay until released).
    pub fn set_hold(&self, on: bool) {
        self.edit(|s| s.rules.hold = on);
    }

    /// Delays every CR from now on by `ms` (0: off).
    pub fn set_delay(&self, ms: u64) {
        self.edit(|s| s.rules.delay_ms = ms);
    }

    /// Applies a knob spec (`urma_datapath::spec`): the fault keys both libraries know go to
    /// the rules, any other key to `own` (the library's), which returns `None` for a key it does
    /// not know or a value it cannot read. The number of items applied, or the first item that
    /// does not parse (the items before it stay applied).
    pub fn apply_spec(
        &self,
        spec: &str,
        mut own: impl FnMut(&str, &str) -> Option<()>,
    ) -> Result<usize, String> {
        spec::apply(spec, |knob| {
            match knob {
                Knob::FailPost { queue, nth, status } => {
                    self.edit(|s| s.rules.fail_post.push((queue, nth, status)))
                }
                Knob::FailCr { nth, status } => self.edit(|s| s.rules.fail_cr.push((nth, status))),
                Knob::CrAction { nth, action } => {
                    self.edit(|s| s.rules.cr_action.push((nth, action)))
                }
                Knob::Hold(on) => self.set_hold(on),
                Knob::DelayMs(ms) => self.set_delay(ms),
                Knob::Other(k, v) => return own(k, v),
            }
            Some(())
        })
    }

    /// The status the `nth` WR of `queue` must fail its post with, if a rule says so (the rule
    /// is used up).
    #[inline]
    pub fn take_fail_post(&self, queue: c_int, nth: u64) -> Option<c_int> {
        if nth == 0 || !self.any() {
            return None;
        }
        self.edit(|s| take_post(&mut s.rules.fail_post, queue, nth))
    }

    /// The CR status the `nth` send WR must complete with, if a rule says so (used up).
    #[inline]
    pub fn take_fail_cr(&self, nth: u64) -> Option<u32> {
        if nth == 0 || !self.any() {
            return None;
        }
        self.edit(|s| take(&mut s.rules.fail_cr, nth))
    }

    /// Whether a `fail_cr` rule names the `nth` send WR (the rule is not used up).
    pub fn fail_cr_pending(&self, nth: u64) -> bool {
        self.any() && self.edit(|s| s.rules.fail_cr.iter().any(|&(n, _)| n == nth))
    }

    /// The fate of the `nth` CR (its `cr_action` rule is used up).
    #[inline]
    pub fn cr_fate(&self, nth: u64) -> Fate {
        if nth == 0 || !self.any() {
            return Fate::Deliver;
        }
        self.edit(|s| take(&mut s.rules.cr_action, nth).map_or(Fate::Deliver, Fate::of))
    }

    /// Keeps a CR when CRs are held or delayed: `item()` is kept and what was done is returned;
    /// `None` when the CR goes on now (`item` is not called).
    pub fn keep(&self, item: impl FnOnce() -> T) -> Option<Keep> {
        let mut s = self.lock();
        if s.rules.hold {
            s.kept.held.push(item());
            return Some(Keep::Held);
        }
        if s.rules.delay_ms == 0 {
            return None;
        }
        let due = Instant::now() + Duration::from_millis(s.rules.delay_ms);
        s.kept.delay(due, item());
        if s.sleeping {
            self.due.notify_all();
        }
        Some(Keep::Delayed)
    }

    /// Releases the held CRs in `order` (`seed` for the shuffle): after `delay_ms` (as delayed
    /// CRs), or now, handing them to `now` under the lock. Returns how many were held and what
    /// `now` returned.
    pub fn release<R>(
        &self,
        order: c_int,
        seed: u64,
        delay_ms: u32,
        now: impl FnOnce(&mut X, Vec<T>) -> R,
    ) -> (u64, R) {
        let mut s = self.lock();
        let mut v = std::mem::take(&mut s.kept.held);
        self::order(&mut v, order, seed);
        let n = v.len() as u64;
        if delay_ms == 0 {
            return (n, now(&mut s.own, v));
        }
        let due = Instant::now() + Duration::from_millis(u64::from(delay_ms));
        for t in v {
            s.kept.delay(due, t);
        }
        if s.sleeping {
            self.due.notify_all();
        }
        (n, now(&mut s.own, Vec::new()))
    }

    /// Waits until delayed CRs are due and takes them (for a thread that hands delayed CRs over
    /// as they fall due).
    pub fn wait_due(&self) -> Vec<T> {
        let mut g = ranked_lock::lock(&self.state);
        loop {
            let now = Instant::now();
            let due = g.kept.take_due(now);
            if !due.is_empty() {
                self.any.store(g.busy(), Ordering::Release);
                return due;
            }
            let next = g.kept.next_due();
            g.sleeping = true;
            g = match next {
                None => self.due.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(t) => {
                    self.due
                        .wait_timeout(g, t - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
            g.sleeping = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ORDER_FIFO;

    #[test]
    fn rules_are_used_once_and_orders_are_deterministic() {
        let mut r = vec![(3u64, 7u32), (3, 8), (5, 9)];
        assert_eq!(take(&mut r, 3), Some(7));
        assert_eq!(take(&mut r, 3), Some(8));
        assert_eq!(take(&mut r, 3), None);
        assert_eq!(take(&mut r, 4), None);
        let mut p = vec![(Q_SEND, 2u64, -1), (Q_RECV, 2, 12)];
        assert_eq!(take_post(&mut p, Q_RECV, 2), Some(12));
        assert_eq!(take_post(&mut p, Q_RECV, 2), None);
        assert_eq!(take_post(&mut p, Q_SEND, 2), Some(-1));
        assert_eq!(Fate::of(CR_DROP), Fate::Drop);
        assert_eq!(Fate::of(CR_DUP).as_str(), "dup");
        assert_eq!(Fate::of(0), Fate::Deliver);
        let base: Vec<u32> = (0..16).collect();
        let mut f = base.clone();
        order(&mut f, ORDER_FIFO, 1);
        assert_eq!(f, base);
        order(&mut f, ORDER_REVERSE, 1);
        assert_eq!(f, base.iter().rev().copied().collect::<Vec<_>>());
        let (mut a, mut b, mut c) = (base.clone(), base.clone(), base.clone());
        order(&mut a, ORDER_SHUFFLE, 42);
        order(&mut b, ORDER_SHUFFLE, 42);
        order(&mut c, ORDER_SHUFFLE, 43);
        assert_eq!(a, b, "same seed, same order");
        assert_ne!(a, base);
        assert_ne!(a, c);
        a.sort();
        assert_eq!(a, base, "a permutation");
    }

    #[test]
    fn events_counted_quietly_come_before_the_numbered_ones() {
        let s = Seq::new();
        for _ in 0..5 {
            assert_eq!(s.next(false), 0, "no knob set: no number");
        }
        assert_eq!(s.next(true), 6);
        assert_eq!(s.next(true), 7);
        assert_eq!(s.next(false), 0);
        assert_eq!(s.next(true), 9, "the quiet one in between was counted");
        s.add(3, false);
        assert_eq!(s.last(), 12);
        s.add(2, true);
        assert_eq!(s.next(true), 15);
        s.reset();
        assert_eq!(s.last(), 0);
        assert_eq!(s.next(true), 1, "1-based again after a reset");
    }

    #[test]
    fn numbered_events_of_several_threads_get_distinct_numbers() {
        let s = Seq::new();
        for _ in 0..3 {
            s.next(false);
        }
        let mut all: Vec<u64> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4)
                .map(|_| sc.spawn(|| (0..500).map(|_| s.next(true)).collect::<Vec<_>>()))
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        all.sort_unstable();
        assert_eq!(all, (4..=2003).collect::<Vec<u64>>());
    }

    /// A library state that needs the slow path while its flag is up.
    #[derive(Default)]
    struct Flag(bool);

    impl Own for Flag {
        fn busy(&self, kept: usize) -> bool {
            self.0 || kept > 0
        }
    }

    #[test]
    fn any_follows_the_rules_and_the_librarys_own_state() {
        let p: FaultPlane<(), u32> = FaultPlane::new(());
        assert!(!p.any());
        assert_eq!(p.next_send(), 0, "not numbered while nothing is set");
        assert_eq!(p.add_fail_post(3, 1, -1), -1, "unknown queue");
        assert_eq!(p.add_fail_post(Q_SEND, 0, -1), -1, "nth 0");
        assert_eq!(p.add_cr_action(1, 7), -1, "unknown action");
        assert_eq!(p.add_fail_cr(0, 5), -1);
        assert!(!p.any(), "refused rules set nothing");
        assert_eq!(p.add_fail_post(Q_SEND, 2, -1), 0);
        assert!(p.any());
        assert_eq!(p.next_send(), 2, "the quiet WR before it was counted");
        assert_eq!(p.take_fail_post(Q_SEND, 2), Some(-1));
        assert!(!p.any(), "the rule is used up");
        p.set_hold(true);
        assert_eq!(p.keep(|| 1), Some(Keep::Held));
        p.set_hold(false);
        assert!(!p.any(), "the provider's held CRs do not slow its posts");
        assert_eq!(p.keep(|| unreachable!("goes on now")), None);
        let (n, now) = p.release(ORDER_FIFO, 0, 0, |_, v| v);
        assert_eq!((n, now), (1, vec![1]));

        let q: FaultPlane<Flag, u32> = FaultPlane::new(Flag(false));
        q.set_hold(true);
        q.keep(|| 5);
        q.set_hold(false);
        assert!(q.any(), "the layer's kept CRs keep it on the slow path");
        q.release(ORDER_FIFO, 0, 0, |own, v| own.0 = !v.is_empty());
        assert!(q.any(), "its own state says so");
        q.edit(|s| s.own.0 = false);
        assert!(!q.any());
    }

    #[test]
    fn the_spec_fills_the_rules_and_leaves_other_keys_to_the_library() {
        let p: FaultPlane<(), ()> = FaultPlane::new(());
        let mut own = Vec::new();
        let r = p.apply_spec(
            "fail_post=1:-1,fail_recv_post=2:3,fail_cr=3:9,drop_cr=4,dup_cr=5,hold=1,delay_ms=6,mine=7",
            |k, v| {
                own.push(format!("{k}={v}"));
                Some(())
            },
        );
        assert_eq!(r, Ok(8));
        assert_eq!(own, ["mine=7"]);
        let want = Rules {
            fail_post: vec![(Q_SEND, 1, -1), (Q_RECV, 2, 3)],
            fail_cr: vec![(3, 9)],
            cr_action: vec![(4, CR_DROP), (5, CR_DUP)],
            hold: true,
            delay_ms: 6,
        };
        assert!(p.edit(|s| s.rules == want));
        assert_eq!(
            p.apply_spec("hold=0,theirs=1", |_, _| None),
            Err("theirs=1".into())
        );
        p.reset();
        assert!(!p.any());
    }

    #[test]
    fn delayed_crs_fall_due_in_due_order_and_released_ones_after_their_delay() {
        let p: FaultPlane<(), u32> = FaultPlane::new(());
        p.set_delay(40);
        // CR 1 falls due 40 ms after it was kept, however slowly the rest runs.
        let kept_1 = Instant::now();
        assert_eq!(p.keep(|| 1), Some(Keep::Delayed));
        p.set_delay(5);
        assert_eq!(p.keep(|| 2), Some(Keep::Delayed));
        p.set_delay(0);
        p.set_hold(true);
        p.keep(|| 3);
        p.keep(|| 4);
        p.set_hold(false);
        let (n, now) = p.release(ORDER_REVERSE, 0, 20, |_, v| v);
        assert_eq!((n, now), (2, Vec::new()));
        let mut got = Vec::new();
        while got.len() < 4 {
            got.extend(p.wait_due());
        }
        assert_eq!(got, [2, 4, 3, 1]);
        assert!(kept_1.elapsed() >= Duration::from_millis(40));
        assert!(p.edit(|s| s.kept.is_empty()));
    }
}
