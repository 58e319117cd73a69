//! An instance's request-id index (request id → sync slot, O(1)), the early-completion stash (D4)
//! and tombstones.
//!
//! The id → slot map is split into [`SHARDS`] independently locked shards chosen by a hash of the
//! id, so the threads that meet on every request (the submitter registering, the polling thread
//! delivering completions, the workers ending tasks, the waiter cleaning up) rarely wait for each
//! other: each locks only the shard of the id it works on. Everything done for one id is still
//! serialised by that id's shard lock, which is what makes a request's end and its table cleanup
//! atomic for a racing completion.
//!
//! The early-completion stash and the tombstones ([`Kept`]) are process-wide (their capacities are
//! documented limits) and sit behind one more lock, taken only inside a shard lock and only when
//! they hold something or must change; the common path never touches it.
//!
//! What may be taken while a shard or the [`Kept`] lock is held: docs/architecture.md, "Locks".

use super::padded::Padded;
use ranked_lock::{lock, rank, Mutex, MutexGuard};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Hasher for request ids (≤ 40-bit keys, not attacker-chosen in a way that matters: a bad key set
/// only slows the table down). One folded 64×64→128 multiply instead of SipHash.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        let m = u128::from(self.0) * 0x9E37_79B9_7F4A_7C15u128;
        (m >> 64) as u64 ^ m as u64
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 ^= v;
    }
}

type IdMap = HashMap<u64, (u32, u32), BuildHasherDefault<IdHasher>>;

/// Receive-side completions kept for requests that are not registered yet (D4). When full, the
/// oldest kept completion is dropped to make room (FIFO), so completions that never find a request
/// (foreign or corrupt CRs) cannot fill the stash for good and disable D4.
pub const STASH_CAPACITY: usize = 1024;
/// Request ids of recently failed/cancelled receives whose stray completions are dropped instead of
/// stashed (so a later request reusing the id never consumes a stale chunk).
pub const TOMBSTONES: usize = 256;

/// An early completion: request id and decoded user data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Early {
    /// decoded request id
    pub rid: u64,
    /// decoded user data (raw64)
    pub ud: u64,
}

/// Number of independently locked shards of the id → slot map (a power of two).
pub const SHARDS: usize = 16;
/// Ids each shard's map holds without growing. A map holds only unfinished requests (a finished
/// one is removed whether or not its sync was collected) and ids spread evenly over the shards,
/// so 16 × 512 unfinished requests fit without growing; a shard that gets more grows its map
/// (allocating on the submit path) and keeps the room. Sized so that all 16 maps together stay
/// within a core's L2 cache.
pub const SHARD_CAPACITY: usize = 512;
/// Entries of the lock-free lookup hints (a power of two).
pub const HINTS: usize = 8192;

const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// Shard of `rid`: the top bits of a multiplicative hash (the map inside uses the low bits).
fn shard_of(rid: u64) -> usize {
    (rid.wrapping_mul(MIX) >> (64 - SHARDS.trailing_zeros())) as usize
}

/// Hint entry of `rid`: the hash bits below the shard bits.
fn hint_of(rid: u64) -> usize {
    let shift = 64 - SHARDS.trailing_zeros() - HINTS.trailing_zeros();
    ((rid.wrapping_mul(MIX) >> shift) as usize) & (HINTS - 1)
}

fn hint_word(slot: u32, gen: u32) -> u64 {
    ((u64::from(slot) + 1) << 32) | u64::from(gen)
}

/// One shard: the live ids whose hash falls here.
pub struct Shard {
    map: IdMap,
    /// Destroy has started: no new registrations (set in every shard by destroy).
    pub closing: bool,
}

/// Early completions kept for later receives (D4) and tombstones of failed receives, shared by all
/// shards.
pub struct Kept {
    stash: VecDeque<Early>,
    tombs: [u64; TOMBSTONES],
    tomb_valid: [bool; TOMBSTONES],
    tomb_next: usize,
    /// Number of set `tomb_valid` entries.
    tomb_count: usize,
}

/// The request table of an instance: sharded map plus the shared [`Kept`] state.
pub struct ReqTables {
    /// Each on cache lines of its own: locking one shard never invalidates the line of another.
    shards: Box<[Padded<Mutex<Shard, { rank::SHARD }>>]>,
    /// Lock-free lookup hints: entry [`hint_of`]`(rid)` names the `(slot, gen)` of the live
    /// request `rid` once it is fully registered, or of another id with the same entry, or nothing
    /// (0). A hint is only a guess: the completion path checks the slot itself (live, generation,
    /// id, not done) under the slot lock and falls back to the locked map when the guess fails.
    /// Written under the id's shard lock (published after registration, cleared with the map
    /// entry).
    hints: Box<[AtomicU64]>,
    kept: Mutex<Kept, { rank::KEPT }>,
    /// Stashed completions + set tombstones (changed only under the `kept` lock, read under a
    /// shard lock to skip the `kept` lock when there is nothing kept: whatever was kept for an id
    /// was kept under that id's shard lock, so the reader sees it).
    kept_n: AtomicUsize,
}

impl Default for ReqTables {
    fn default() -> Self {
        Self::new()
    }
}

impl ReqTables {
    /// Preallocates everything (see [`SHARD_CAPACITY`]), so registration and lookup do not
    /// allocate.
    pub fn new() -> Self {
        let shards = (0..SHARDS)
            .map(|_| {
                Padded(Mutex::new(Shard {
                    map: IdMap::with_capacity_and_hasher(SHARD_CAPACITY, Default::default()),
                    closing: false,
                }))
            })
            .collect();
        ReqTables {
            shards,
            hints: (0..HINTS).map(|_| AtomicU64::new(0)).collect(),
            kept: Mutex::new(Kept::new()),
            kept_n: AtomicUsize::new(0),
        }
    }

    /// Locks the shard of `rid`.
    pub fn lock(&self, rid: u64) -> ReqTable<'_> {
        let idx = shard_of(rid);
        ReqTable {
            shard: lock(&self.shards[idx].0),
            tables: self,
            idx,
        }
    }

    /// Runs `f` on every shard in turn (each locked while `f` runs).
    pub fn for_each_shard(&self, mut f: impl FnMut(&mut Shard)) {
        for s in self.shards.iter() {
            f(&mut lock(&s.0));
        }
    }

    /// The `(slot, gen)` hinted for `rid`, without any lock (see `hints`).
    #[inline(always)]
    pub fn hint(&self, rid: u64) -> Option<(u32, u32)> {
        let v = self.hints[hint_of(rid)].load(Ordering::Acquire);
        (v != 0).then(|| (((v >> 32) - 1) as u32, v as u32))
    }

    fn kept(&self) -> MutexGuard<'_, Kept, { rank::KEPT }> {
        lock(&self.kept)
    }

    fn kept_changed(&self, k: &Kept) {
        self.kept_n
            .store(k.stash.len() + k.tomb_count, Ordering::Release);
    }

    fn nothing_kept(&self) -> bool {
        self.kept_n.load(Ordering::Acquire) == 0
    }
}

/// The locked shard of one id, with the id's view of the shared [`Kept`] state. Pass only ids of
/// this shard (the ones it was locked for).
pub struct ReqTable<'a> {
    shard: MutexGuard<'a, Shard, { rank::SHARD }>,
    tables: &'a ReqTables,
    idx: usize,
}

impl Deref for ReqTable<'_> {
    type Target = Shard;
    fn deref(&self) -> &Shard {
        &self.shard
    }
}

impl DerefMut for ReqTable<'_> {
    fn deref_mut(&mut self) -> &mut Shard {
        &mut self.shard
    }
}

impl Shard {
    /// Entry for `rid` (may be stale: the caller checks the slot generation).
    pub fn get(&self, rid: u64) -> Option<(u32, u32)> {
        self.map.get(&rid).copied()
    }

    /// Inserts or replaces the entry for `rid`.
    pub fn insert(&mut self, rid: u64, slot: u32, gen: u32) {
        self.map.insert(rid, (slot, gen));
    }

    /// Removes the entry for `rid` if it still names `(slot, gen)`.
    pub fn remove_if(&mut self, rid: u64, slot: u32, gen: u32) {
        if self.map.get(&rid) == Some(&(slot, gen)) {
            self.map.remove(&rid);
        }
    }

    /// `true` when empty.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl<'a> ReqTable<'a> {
    /// The tables this shard belongs to.
    pub(super) fn tables(&self) -> &'a ReqTables {
        self.tables
    }

    /// Publishes the lock-free hint for `rid` → `(slot, gen)`: call once the request is fully
    /// registered (for a receive, after its stashed completions were handed over, so that a
    /// completion found through the hint never overtakes them).
    pub fn publish(&mut self, rid: u64, slot: u32, gen: u32) {
        debug_assert!(self.holds(rid));
        self.tables.hints[hint_of(rid)].store(hint_word(slot, gen), Ordering::Release);
    }

    /// Removes the entry for `rid` if it still names `(slot, gen)`, and its hint if the hint
    /// names it too.
    pub fn remove_if(&mut self, rid: u64, slot: u32, gen: u32) {
        debug_assert!(self.holds(rid));
        self.shard.remove_if(rid, slot, gen);
        let w = hint_word(slot, gen);
        let _ = self.tables.hints[hint_of(rid)].compare_exchange(
            w,
            0,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }

    /// Keeps an early completion. When the stash is full the oldest entry is dropped and returned.
    pub fn stash(&mut self, e: Early) -> Option<Early> {
        debug_assert!(self.holds(e.rid));
        let mut k = self.tables.kept();
        let evicted = k.stash(e);
        self.tables.kept_changed(&k);
        evicted
    }

    /// Takes every stashed completion for `rid`, in arrival order, handing each to `f` (with the
    /// shared lock held: `f` must not lock a slot or a shard).
    pub fn drain_stash(&mut self, rid: u64, f: impl FnMut(Early)) {
        if self.tables.nothing_kept() {
            return;
        }
        let mut k = self.tables.kept();
        k.drain_stash(rid, f);
        self.tables.kept_changed(&k);
    }

    /// Remembers that receive `rid` ended without success.
    pub fn tombstone(&mut self, rid: u64) {
        debug_assert!(self.holds(rid));
        let mut k = self.tables.kept();
        k.tombstone(rid);
        self.tables.kept_changed(&k);
    }

    /// `true` if `rid` is tombstoned.
    pub fn is_tombstoned(&self, rid: u64) -> bool {
        !self.tables.nothing_kept() && self.tables.kept().is_tombstoned(rid)
    }

    /// Forgets the tombstone of `rid` (a new receive registered it).
    pub fn clear_tombstone(&mut self, rid: u64) {
        if self.tables.nothing_kept() {
            return;
        }
        let mut k = self.tables.kept();
        k.clear_tombstone(rid);
        self.tables.kept_changed(&k);
    }

    /// Whether `rid` belongs to this shard (debug checks).
    pub fn holds(&self, rid: u64) -> bool {
        shard_of(rid) == self.idx
    }
}

impl Default for Kept {
    fn default() -> Self {
        Self::new()
    }
}

impl Kept {
    /// Empty, with the stash preallocated.
    pub fn new() -> Self {
        Kept {
            stash: VecDeque::with_capacity(STASH_CAPACITY),
            tombs: [0; TOMBSTONES],
            tomb_valid: [false; TOMBSTONES],
            tomb_next: 0,
            tomb_count: 0,
        }
    }

    /// Keeps an early completion. When the stash is full the oldest entry is dropped and returned.
    pub fn stash(&mut self, e: Early) -> Option<Early> {
        let evicted = if self.stash.len() >= STASH_CAPACITY {
            self.stash.pop_front()
        } else {
            None
        };
        self.stash.push_back(e);
        evicted
    }

    /// Takes every stashed completion for `rid`, in arrival order, handing each to `f`.
    pub fn drain_stash(&mut self, rid: u64, mut f: impl FnMut(Early)) {
        if self.stash.is_empty() {
            return;
        }
        self.stash.retain(|e| {
            if e.rid == rid {
                f(*e);
                false
            } else {
                true
            }
        });
    }

    /// Remembers that receive `rid` ended without success.
    pub fn tombstone(&mut self, rid: u64) {
        if self.is_tombstoned(rid) {
            return;
        }
        if !self.tomb_valid[self.tomb_next] {
            self.tomb_count += 1;
        }
        self.tombs[self.tomb_next] = rid;
        self.tomb_valid[self.tomb_next] = true;
        self.tomb_next = (self.tomb_next + 1) % TOMBSTONES;
    }

    /// `true` if `rid` is tombstoned.
    pub fn is_tombstoned(&self, rid: u64) -> bool {
        self.tomb_count != 0
            && self
                .tombs
                .iter()
                .zip(self.tomb_valid.iter())
                .any(|(&t, &v)| v && t == rid)
    }

    /// Forgets the tombstone of `rid` (a new receive registered it).
    pub fn clear_tombstone(&mut self, rid: u64) {
        if self.tomb_count == 0 {
            return;
        }
        for (t, v) in self.tombs.iter().zip(self.tomb_valid.iter_mut()) {
            if *v && *t == rid {
                *v = false;
                self.tomb_count -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_remove_only_matching_generation() {
        let tables = ReqTables::new();
        let mut t = tables.lock(5);
        t.insert(5, 1, 1);
        t.remove_if(5, 1, 2);
        assert_eq!(t.get(5), Some((1, 1)));
        t.remove_if(5, 1, 1);
        assert_eq!(t.get(5), None);
        assert!(t.is_empty());
    }

    #[test]
    fn stash_is_bounded_and_drains_in_order() {
        let mut t = Kept::new();
        for i in 0..STASH_CAPACITY as u64 {
            assert_eq!(t.stash(Early { rid: i % 3, ud: i }), None);
        }
        let mut got = Vec::new();
        t.drain_stash(1, |e| got.push(e.ud));
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            got.len(),
            STASH_CAPACITY / 3 + usize::from(STASH_CAPACITY % 3 > 1)
        );
        assert_eq!(t.stash(Early { rid: 9, ud: 9 }), None);
    }

    #[test]
    fn full_stash_drops_the_oldest_entry() {
        // Completions that never find a request must not disable D4 for good.
        let mut t = Kept::new();
        for i in 0..STASH_CAPACITY as u64 {
            assert_eq!(
                t.stash(Early {
                    rid: 1000 + i,
                    ud: i
                }),
                None
            );
        }
        assert_eq!(
            t.stash(Early { rid: 7, ud: 70 }),
            Some(Early { rid: 1000, ud: 0 })
        );
        let mut got = Vec::new();
        t.drain_stash(7, |e| got.push(e.ud));
        assert_eq!(got, vec![70]);
        let mut old = Vec::new();
        t.drain_stash(1000, |e| old.push(e.ud));
        assert!(old.is_empty(), "the oldest entry was evicted");
    }

    #[test]
    fn tombstones() {
        let mut t = Kept::new();
        t.tombstone(7);
        assert!(t.is_tombstoned(7));
        t.clear_tombstone(7);
        assert!(!t.is_tombstoned(7));
        assert_eq!(t.tomb_count, 0);
        for i in 0..(TOMBSTONES as u64 + 1) {
            t.tombstone(100 + i);
        }
        assert!(!t.is_tombstoned(100), "oldest tombstone was overwritten");
        assert!(t.is_tombstoned(100 + TOMBSTONES as u64));
        assert_eq!(t.tomb_count, TOMBSTONES);
        t.clear_tombstone(101);
        assert_eq!(t.tomb_count, TOMBSTONES - 1);
        assert!(!t.is_tombstoned(101));
    }

    #[test]
    fn ids_spread_over_every_shard() {
        let mut seen = [0usize; SHARDS];
        for rid in 0..4096u64 {
            seen[shard_of(rid)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 4096 / SHARDS / 2), "{seen:?}");
        // Client keys in the transport encoding (high bits set) spread too.
        let mut seen = [0usize; SHARDS];
        for k in 0..4096u64 {
            seen[shard_of((0x3AB << 40) | k)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
    }

    #[test]
    fn kept_state_is_shared_by_the_shards_and_skipped_when_empty() {
        let tables = ReqTables::new();
        let (a, b) = (
            1u64,
            (1..100).find(|&r| shard_of(r) != shard_of(1)).unwrap(),
        );
        assert!(tables.nothing_kept());
        tables.lock(a).stash(Early { rid: a, ud: 10 });
        tables.lock(b).tombstone(b);
        assert_eq!(tables.kept_n.load(Ordering::Relaxed), 2);
        assert!(tables.lock(b).is_tombstoned(b));
        assert!(!tables.lock(a).is_tombstoned(a));
        let mut got = Vec::new();
        tables.lock(a).drain_stash(a, |e| got.push(e.ud));
        assert_eq!(got, vec![10]);
        tables.lock(b).clear_tombstone(b);
        assert!(tables.nothing_kept(), "counter follows the kept state");
        assert!(!tables.lock(b).is_tombstoned(b));
    }

    #[test]
    fn closing_is_set_on_every_shard() {
        let tables = ReqTables::new();
        tables.for_each_shard(|s| s.closing = true);
        assert!((0..64u64).all(|rid| tables.lock(rid).closing));
    }

    #[test]
    fn hints_name_published_requests_until_removed() {
        let tables = ReqTables::new();
        assert_eq!(tables.hint(42), None);
        let mut t = tables.lock(42);
        t.insert(42, 7, 3);
        assert_eq!(tables.hint(42), None, "not published yet");
        t.publish(42, 7, 3);
        drop(t);
        assert_eq!(tables.hint(42), Some((7, 3)));
        assert_eq!(tables.hint(43), None);
        // Slot 0 generation 0 still encodes as a non-empty word.
        let mut t = tables.lock(43);
        t.publish(43, 0, 0);
        drop(t);
        assert_eq!(tables.hint(43), Some((0, 0)));
        // A removal of another incarnation leaves the hint alone; the right one clears it.
        tables.lock(42).remove_if(42, 7, 2);
        assert_eq!(tables.hint(42), Some((7, 3)));
        tables.lock(42).remove_if(42, 7, 3);
        assert_eq!(tables.hint(42), None);
        assert_eq!(tables.lock(42).get(42), None);
    }

    #[test]
    fn a_colliding_id_takes_the_hint_and_keeps_it() {
        let tables = ReqTables::new();
        let a = 5u64;
        let b = (6..1_000_000u64)
            .find(|&r| hint_of(r) == hint_of(a))
            .expect("a colliding id");
        tables.lock(a).publish(a, 1, 1);
        tables.lock(b).publish(b, 2, 1);
        assert_eq!(
            tables.hint(a),
            Some((2, 1)),
            "a guess only: the slot check rejects it"
        );
        tables.lock(a).remove_if(a, 1, 1);
        assert_eq!(
            tables.hint(b),
            Some((2, 1)),
            "b's hint survives a's removal"
        );
    }
}
