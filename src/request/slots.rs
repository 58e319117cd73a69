//! Generation-checked sync table (contract §6; stale and foreign syncs are refused, docs/reliability.md).
//!
//! A `task_sync_t *` handed to the caller is a token, never a pointer: it names a slot of a
//! process-wide table and the slot's generation. Every use locks the slot and checks the
//! generation, so stale (already waited / cancelled / destroyed), foreign or forged values are
//! refused with ERR and can never dangle. The slot also carries all per-request state (sized for 7
//! chunks), so a request allocates nothing on the heap.
//!
//! The table grows with use, one [`SEGMENT`] of slots at a time, up to [`SYNC_CAPACITY`] slots: a
//! slot stays taken until its sync is given back (waited, cancelled, or the instance destroyed),
//! and a caller may keep any number of syncs of finished requests without collecting them (each
//! costs one slot, [`SLOT_BYTES`]). Segments are never freed or moved, so a slot reference stays
//! valid for the life of the process; growing allocates one segment on the submit path, and a
//! table in steady state allocates nothing.
//!
//! Separately, at most [`max_inflight`] requests may be unfinished at once (a request is finished
//! once every task completed, failed or was cancelled, whether or not its sync was collected).

use super::padded::Padded;
use super::state::Req;
use crate::log::{debug, error, warning};
use once_cell::sync::Lazy;
use ranked_lock::{lock, rank, Condvar, Mutex, MutexGuard};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Slots per table segment (a power of two): the unit the table grows by.
pub const SEGMENT: usize = 4096;
const SEGMENT_SHIFT: u32 = SEGMENT.trailing_zeros();
/// Most segments the table may have.
const MAX_SEGMENTS: usize = 1 << 14;
/// Most syncs the table can hold at once, process-wide, finished or not (2^26, fixed by the token
/// encoding; at [`SLOT_BYTES`] each, more memory than a process keeps for them in practice).
pub const SYNC_CAPACITY: usize = SEGMENT * MAX_SEGMENTS;
/// Memory one table slot costs, i.e. what a sync kept without being collected costs (the slot
/// plus its entry in the free list).
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>() + std::mem::size_of::<u32>();
// A sync kept uncollected must not cost more than the legacy library leaks for one (about 200
// bytes for the sync alone): checked at compile time.
const _: () = assert!(SLOT_BYTES <= 200, "a table slot grew beyond 200 bytes");
/// Default of [`max_inflight`].
pub const DEFAULT_MAX_INFLIGHT: usize = 1 << 20;
/// Environment variable that sets [`max_inflight`] (read by every `os_transport_init`).
pub const MAX_INFLIGHT_ENV: &str = "OS_TRANSPORT_MAX_INFLIGHT";

// Token layout: bits 0..4 zero, slot in bits 4..30, generation in bits 30..60, tag 0x5 above. A
// slot whose generation reaches GEN_MASK is retired instead of wrapping (see `SyncTable::free`),
// so a generation value is never handed out twice for the same slot: a stale token can never
// name a later request.
const SLOT_SHIFT: u32 = 4;
const SLOT_BITS: u32 = SYNC_CAPACITY.trailing_zeros();
const GEN_SHIFT: u32 = SLOT_SHIFT + SLOT_BITS;
const GEN_BITS: u32 = 30;
/// Last generation a slot is used with.
pub const GEN_MASK: u32 = (1 << GEN_BITS) - 1;
const TAG_SHIFT: u32 = GEN_SHIFT + GEN_BITS;
const TOKEN_TAG: u64 = 0x5 << TAG_SHIFT;
const TOKEN_TAG_MASK: u64 = !((1u64 << TAG_SHIFT) - 1);
const _: () = assert!(TAG_SHIFT == 60, "the token layout fills 64 bits");

/// Encodes (slot, generation) as the opaque value the caller holds.
pub fn token(slot: u32, gen: u32) -> usize {
    (TOKEN_TAG | (u64::from(gen & GEN_MASK) << GEN_SHIFT) | (u64::from(slot) << SLOT_SHIFT))
        as usize
}

/// Decodes a token; `None` for values that cannot be one of ours (including slots the table has
/// not grown to).
pub fn untoken(t: usize) -> Option<(u32, u32)> {
    let (slot, gen) = untoken_bits(t)?;
    ((slot as usize) < table().len()).then_some((slot, gen))
}

/// The fields of a token-shaped value, without looking at the table.
fn untoken_bits(t: usize) -> Option<(u32, u32)> {
    let t = t as u64;
    if t & TOKEN_TAG_MASK != TOKEN_TAG || t & ((1 << SLOT_SHIFT) - 1) != 0 {
        return None;
    }
    let slot = ((t >> SLOT_SHIFT) & ((1 << SLOT_BITS) - 1)) as u32;
    let gen = ((t >> GEN_SHIFT) as u32) & GEN_MASK;
    (gen != 0).then_some((slot, gen))
}

/// One table entry.
pub struct Slot {
    m: Mutex<Req, { rank::SLOT }>,
    /// Signalled whenever `done` may have changed.
    pub(super) cv: Condvar,
    /// Recv: the `os_transport_user_data_t` copy handed to notify_callback for the chunk whose
    /// task runs now (one copy is enough: a request's receive tasks run one at a time, on its
    /// bound worker, and the slot is not reused while one runs).
    pub ud: AtomicU64,
    /// `done` as last settled, readable without the lock by a waiter that waits briefly before
    /// sleeping (a hint only: the waiter decides under the lock).
    pub done_hint: AtomicBool,
}

impl Slot {
    /// Locks the request state (poisoning is ignored: state stays consistent across panics of user
    /// code). The raw lock, for the lifecycle only: other modules lock a slot through
    /// `super::Locked` or `super::SlotGuard`.
    #[inline]
    pub(super) fn lock(&self) -> ReqGuard<'_> {
        lock(&self.m)
    }
}

/// A locked slot: the request state, changed only by the request lifecycle.
pub(super) type ReqGuard<'a> = MutexGuard<'a, Req, { rank::SLOT }>;

/// One segment of the table.
type Segment = [Slot; SEGMENT];

fn new_segment() -> Box<Segment> {
    let v: Vec<Slot> = (0..SEGMENT)
        .map(|_| Slot {
            m: Mutex::new(Req::empty()),
            cv: Condvar::new(),
            ud: AtomicU64::new(0),
            done_hint: AtomicBool::new(false),
        })
        .collect();
    v.into_boxed_slice().try_into().ok().expect("SEGMENT slots")
}

/// Why [`SyncTable::alloc`] found no slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// [`max_inflight`] requests are unfinished.
    InFlight,
    /// The table holds [`SYNC_CAPACITY`] syncs.
    Full,
}

/// The process-wide table.
///
/// The fields every slot lookup reads (`segs`, `len`) and those read per registration (`limit`,
/// `refused`) are written almost never; the free list (written by every registration and release)
/// and the in-flight count (also written by the thread that ends a request) each sit on lines of
/// their own, so that no thread's lookup misses because another one registered or ended a
/// request.
pub struct SyncTable {
    /// Segment `i` holds slots `i * SEGMENT ..`; published once (Release) and never freed.
    segs: Box<[AtomicPtr<Segment>; MAX_SEGMENTS]>,
    /// Slots in the published segments (a multiple of [`SEGMENT`]; only grows).
    len: AtomicUsize,
    /// Free slot indices (a stack: the slot freed last, still in cache, is reused first). Slots in
    /// use = length of the table − length of this list, so no separate counter is written per
    /// request. Its capacity always covers every slot, so pushing never allocates.
    free: Padded<Mutex<Vec<u32>, { rank::FREE_LIST }>>,
    /// Unfinished requests (see [`Req::counted`]).
    inflight: Padded<AtomicUsize>,
    /// Most unfinished requests.
    limit: AtomicUsize,
    /// Registrations refused since the last accepted one (a burst of refusals is logged once when
    /// it starts and once, with its size, when it ends).
    refused: AtomicU64,
    /// Slots retired after their last generation (never handed out again).
    retired: AtomicUsize,
}

static TABLE: Lazy<SyncTable> = Lazy::new(|| {
    let first = Box::into_raw(new_segment());
    let t = SyncTable {
        segs: (0..MAX_SEGMENTS)
            .map(|i| AtomicPtr::new(if i == 0 { first } else { std::ptr::null_mut() }))
            .collect::<Box<[_]>>()
            .try_into()
            .expect("MAX_SEGMENTS segment pointers"),
        len: AtomicUsize::new(SEGMENT),
        free: Padded(Mutex::new((0..SEGMENT as u32).rev().collect())),
        inflight: Padded(AtomicUsize::new(0)),
        limit: AtomicUsize::new(DEFAULT_MAX_INFLIGHT),
        refused: AtomicU64::new(0),
        retired: AtomicUsize::new(0),
    };
    // Helgrind: the initialising thread's writes happen-before every `table()` caller (once_cell
    // orders them with an atomic flag Helgrind cannot see). No-op without the feature.
    ranked_lock::hb::before(std::ptr::addr_of!(TABLE) as usize);
    t
});

/// The table.
pub fn table() -> &'static SyncTable {
    let t = &*TABLE;
    ranked_lock::hb::after(std::ptr::addr_of!(TABLE) as usize);
    t
}

/// Most unfinished requests at once, process-wide: [`MAX_INFLIGHT_ENV`] as read by the last
/// `os_transport_init`, else [`DEFAULT_MAX_INFLIGHT`]. Registrations beyond it return ERR.
pub fn max_inflight() -> usize {
    table().limit.load(Ordering::Relaxed)
}

/// Reads [`MAX_INFLIGHT_ENV`]: a decimal number from 1 to [`SYNC_CAPACITY`]; anything else gives
/// the default, with a warning (so call it with no lock held: the log callback may call in).
pub fn max_inflight_from_env() -> usize {
    match std::env::var(MAX_INFLIGHT_ENV) {
        Err(_) => DEFAULT_MAX_INFLIGHT,
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if (1..=SYNC_CAPACITY).contains(&n) => n,
            _ => {
                warning!(
                    "{}={:?} is not a number from 1 to {}: using {}",
                    MAX_INFLIGHT_ENV,
                    v,
                    SYNC_CAPACITY,
                    DEFAULT_MAX_INFLIGHT
                );
                DEFAULT_MAX_INFLIGHT
            }
        },
    }
}

/// Sets [`max_inflight`] (by init, from [`max_inflight_from_env`]).
pub fn set_max_inflight(limit: usize) {
    table().limit.store(limit, Ordering::Relaxed);
}

impl SyncTable {
    /// Slot `i` (`i` < [`SyncTable::len`]: from [`untoken`], a registration or an iteration).
    #[inline(always)]
    pub fn slot(&self, i: u32) -> &Slot {
        // Masked: a fixed-size array indexed below its length needs no bounds check (a slot index
        // beyond the table finds a NULL segment below).
        let seg =
            self.segs[(i >> SEGMENT_SHIFT) as usize & (MAX_SEGMENTS - 1)].load(Ordering::Acquire);
        assert!(!seg.is_null(), "slot {i} beyond the table");
        // SAFETY: a non-NULL segment pointer was published (Release, after the segment was fully
        // built) by `grow` and is never freed or changed again, so it points to a live `Segment`
        // for the rest of the process.
        let seg: &'static Segment = unsafe { &*seg };
        &seg[i as usize & (SEGMENT - 1)]
    }

    /// Slots in the table (grows, never shrinks).
    #[inline]
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// All slots.
    pub fn slots(&self) -> impl Iterator<Item = (u32, &Slot)> {
        (0..self.len() as u32).map(move |i| (i, self.slot(i)))
    }

    /// Takes a free slot for a new unfinished request (its state is reset by the caller under the
    /// slot lock, which also sets [`Req::counted`]). Grows the table by one segment when every
    /// slot is taken.
    pub fn alloc(&self) -> Result<u32, Refusal> {
        let limit = self.limit.load(Ordering::Relaxed);
        if self.inflight.fetch_add(1, Ordering::Relaxed) >= limit {
            self.inflight.fetch_sub(1, Ordering::Relaxed);
            return Err(self.refuse(Refusal::InFlight));
        }
        let mut free = lock(&self.free);
        let got = match free.pop() {
            Some(i) => Some(i),
            None => self.grow(&mut free).then(|| free.pop()).flatten(),
        };
        drop(free);
        let Some(i) = got else {
            self.inflight.fetch_sub(1, Ordering::Relaxed);
            return Err(self.refuse(Refusal::Full));
        };
        if self.refused.load(Ordering::Relaxed) != 0 {
            let n = self.refused.swap(0, Ordering::Relaxed);
            if n != 0 {
                warning!("requests accepted again after {} refused", n);
            }
        }
        Ok(i)
    }

    /// Counts a refusal; logs only the first of a burst.
    fn refuse(&self, why: Refusal) -> Refusal {
        if self.refused.fetch_add(1, Ordering::Relaxed) == 0 {
            match why {
                Refusal::InFlight => error!(
                    "{} requests unfinished ({} limit, {}): new requests refused until one \
                     finishes (logged once per burst)",
                    max_inflight(),
                    MAX_INFLIGHT_ENV,
                    "finished requests whose syncs were not collected do not count"
                ),
                Refusal::Full => error!(
                    "{} syncs held (table full): new requests refused until syncs are waited for \
                     or cancelled (logged once per burst)",
                    SYNC_CAPACITY
                ),
            }
        }
        why
    }

    /// Adds one segment (with `free` locked and empty); `false` when the table is at capacity.
    #[cold]
    fn grow(&self, free: &mut Vec<u32>) -> bool {
        let len = self.len.load(Ordering::Relaxed);
        let n = len >> SEGMENT_SHIFT;
        if n >= MAX_SEGMENTS {
            return false;
        }
        free.reserve_exact(len + SEGMENT - free.len());
        let seg = Box::into_raw(new_segment());
        self.segs[n].store(seg, Ordering::Release);
        self.len.store(len + SEGMENT, Ordering::Release);
        free.extend((len as u32..(len + SEGMENT) as u32).rev());
        true
    }

    /// Returns a slot that was allocated but never made live.
    pub fn unalloc(&self, idx: u32) {
        self.inflight.fetch_sub(1, Ordering::Relaxed);
        lock(&self.free).push(idx);
    }

    /// The request in `r` is finished (or swept): it stops counting against the in-flight limit.
    /// Idempotent.
    #[inline]
    pub fn finished(&self, r: &mut Req) {
        if r.counted {
            r.counted = false;
            self.inflight.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Frees a live slot: bumps its generation (every outstanding token goes stale) and recycles it.
    pub fn free(&self, idx: u32, r: &mut Req) {
        debug_assert!(r.live);
        self.finished(r);
        r.live = false;
        r.cb = None;
        let mut free = lock(&self.free);
        if r.gen >= GEN_MASK {
            // Every generation of this slot has been handed out: retire it rather than start
            // again at 1, which would make the oldest tokens valid again.
            self.retired.fetch_add(1, Ordering::Relaxed);
            drop(free);
            debug!(1, "sync slot {} retired after {} uses", idx, GEN_MASK);
            return;
        }
        r.gen += 1;
        free.push(idx);
    }

    /// Number of slots in use (test hook for leak checks).
    pub fn live(&self) -> usize {
        let free = lock(&self.free);
        // `grow` changes the length and the free list together under this lock, and `free`
        // retires a slot under it.
        self.len() - free.len() - self.retired.load(Ordering::Relaxed)
    }

    /// Unfinished requests (test hook).
    pub fn inflight(&self) -> usize {
        self.inflight.load(Ordering::Relaxed)
    }
}

/// Number of live syncs in this process. Test-only hook (not a C export).
#[doc(hidden)]
pub fn live_syncs() -> usize {
    table().live()
}

/// Sets the generation of the slot the next request will take (the top of the free list) and
/// returns that slot. Test-only hook (not a C export), for the generation wrap point.
#[doc(hidden)]
pub fn set_next_free_generation(gen: u32) -> Option<u32> {
    let t = table();
    // Lock order: a slot before the free list, so read the index first, then lock the slot.
    let idx = *lock(&t.free).last()?;
    t.slot(idx).lock().gen = gen.clamp(1, GEN_MASK);
    Some(idx)
}

/// Number of unfinished requests in this process. Test-only hook (not a C export).
#[doc(hidden)]
pub fn inflight_requests() -> usize {
    table().inflight()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serialises the tests that take slots of the process-wide table.
    static TABLE_TESTS: Mutex<(), { rank::TEST_SERIAL }> = Mutex::new(());

    fn table_test() -> MutexGuard<'static, (), { rank::TEST_SERIAL }> {
        lock(&TABLE_TESTS)
    }

    #[test]
    fn tokens_roundtrip_and_reject_garbage() {
        let t = token(5, 7);
        assert_eq!(untoken(t), Some((5, 7)));
        let last = SYNC_CAPACITY as u32 - 1;
        assert_eq!(untoken_bits(token(last, GEN_MASK)), Some((last, GEN_MASK)));
        assert_eq!(untoken_bits(token(0, 1)), Some((0, 1)));
        if table().len() < SYNC_CAPACITY {
            assert_eq!(
                untoken(token(last, 1)),
                None,
                "a slot the table has not grown to"
            );
        }
        // Not a user-space pointer on any 64-bit target: the tag is above bit 56.
        assert!(token(0, 1) as u64 >= 1 << 56);
        assert_eq!(untoken(0), None);
        assert_eq!(untoken(t + 1), None);
        assert_eq!(untoken(0x7fff_1234_5670), None);
        assert_eq!(untoken(token(5, 0)), None);
    }

    #[test]
    fn free_bumps_generation() {
        let _g = table_test();
        let tab = table();
        let i = tab.alloc().unwrap();
        let s = tab.slot(i);
        let mut r = s.lock();
        let g = r.gen;
        r.reset();
        r.live = true;
        r.counted = true;
        tab.free(i, &mut r);
        assert_ne!(r.gen, g);
        assert!(!r.live);
        assert!(!r.counted, "a freed request no longer counts as in flight");
    }

    #[test]
    fn a_slot_is_retired_at_its_last_generation_instead_of_wrapping() {
        let _g = table_test();
        let tab = table();
        let live = tab.live();
        let take = |gen: u32| {
            let i = set_next_free_generation(gen).expect("a free slot");
            assert_eq!(tab.alloc(), Ok(i));
            let mut r = tab.slot(i).lock();
            r.reset();
            r.live = true;
            r.counted = true;
            (i, r.gen)
        };
        let (i, g) = take(GEN_MASK - 1);
        assert_eq!(g, GEN_MASK - 1);
        tab.free(i, &mut tab.slot(i).lock());
        assert_eq!(tab.slot(i).lock().gen, GEN_MASK);
        // The same slot comes back (the free list is a stack) with its last generation.
        let (j, g) = take(GEN_MASK);
        assert_eq!((j, g), (i, GEN_MASK));
        tab.free(j, &mut tab.slot(j).lock());
        assert_eq!(tab.live(), live, "a retired slot does not count as in use");
        let next = tab.alloc().unwrap();
        assert_ne!(next, i, "a retired slot is never handed out again");
        tab.unalloc(next);
        assert_eq!(
            untoken(token(i, 1)).map(|(s, g)| tab.slot(s).lock().gen == g),
            Some(false),
            "no token of the retired slot matches it again"
        );
    }

    #[test]
    fn the_in_flight_limit_comes_from_the_environment() {
        // Only this test touches the variable in this process.
        for (v, want) in [
            (Some("12"), 12),
            (Some(" 4096 "), 4096),
            (Some("0"), DEFAULT_MAX_INFLIGHT),
            (Some("-3"), DEFAULT_MAX_INFLIGHT),
            (Some("lots"), DEFAULT_MAX_INFLIGHT),
            (Some("67108865"), DEFAULT_MAX_INFLIGHT),
            (None, DEFAULT_MAX_INFLIGHT),
        ] {
            match v {
                Some(v) => std::env::set_var(MAX_INFLIGHT_ENV, v),
                None => std::env::remove_var(MAX_INFLIGHT_ENV),
            }
            assert_eq!(max_inflight_from_env(), want, "{v:?}");
        }
        std::env::remove_var(MAX_INFLIGHT_ENV);
    }

    #[test]
    fn refusals_beyond_the_limit_and_finished_requests_do_not_count() {
        let _g = table_test();
        let tab = table();
        let base = tab.inflight();
        // Only this test changes the limit in this process (unit tests create no instance).
        set_max_inflight(base + 2);
        let a = tab.alloc().unwrap();
        let b = tab.alloc().unwrap();
        assert_eq!(tab.alloc(), Err(Refusal::InFlight));
        assert_eq!(tab.alloc(), Err(Refusal::InFlight));
        assert_eq!(tab.refused.load(Ordering::Relaxed), 2, "one burst of two");
        // `a` finishes but stays held (its sync not collected): room for one more.
        let mut r = tab.slot(a).lock();
        r.reset();
        r.live = true;
        r.counted = true;
        tab.finished(&mut r);
        tab.finished(&mut r);
        drop(r);
        let c = tab.alloc().unwrap();
        assert_eq!(tab.refused.load(Ordering::Relaxed), 0, "the burst ended");
        assert_eq!(tab.inflight(), base + 2);
        let mut r = tab.slot(a).lock();
        tab.free(a, &mut r);
        drop(r);
        tab.unalloc(b);
        tab.unalloc(c);
        assert_eq!(tab.inflight(), base);
        set_max_inflight(DEFAULT_MAX_INFLIGHT);
    }

    #[test]
    fn segments_are_addressed_by_the_high_bits() {
        let tab = table();
        assert!(tab.len() >= SEGMENT && tab.len() % SEGMENT == 0);
        let a: *const Slot = tab.slot(0);
        let b: *const Slot = tab.slot(SEGMENT as u32 - 1);
        assert_eq!(
            b as usize - a as usize,
            (SEGMENT - 1) * std::mem::size_of::<Slot>()
        );
        assert_eq!(tab.slots().count(), tab.len());
    }
}
