//! Request table (request id → sync slot, O(1)), the early-completion stash (D4) and tombstones.
//!
//! Lock order: the request table lock is taken before any slot lock, never the other way round.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

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
/// (foreign or corrupt CRs) cannot fill the stash for good and disable D4 (issue 9).
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

/// The table, guarded by one mutex in the instance.
pub struct ReqTable {
    map: IdMap,
    stash: VecDeque<Early>,
    tombs: [u64; TOMBSTONES],
    tomb_valid: [bool; TOMBSTONES],
    tomb_next: usize,
    /// Number of set `tomb_valid` entries (lets the common no-tombstone case skip the scans).
    tomb_count: usize,
    /// Destroy has started: no new registrations.
    pub closing: bool,
}

impl Default for ReqTable {
    fn default() -> Self {
        Self::new()
    }
}

impl ReqTable {
    /// Preallocates everything, so registration and lookup never allocate.
    pub fn new() -> Self {
        ReqTable {
            map: IdMap::with_capacity_and_hasher(
                crate::sync::SYNC_CAPACITY * 2,
                Default::default(),
            ),
            stash: VecDeque::with_capacity(STASH_CAPACITY),
            tombs: [0; TOMBSTONES],
            tomb_valid: [false; TOMBSTONES],
            tomb_next: 0,
            tomb_count: 0,
            closing: false,
        }
    }

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
        let mut t = ReqTable::new();
        t.insert(5, 1, 1);
        t.remove_if(5, 1, 2);
        assert_eq!(t.get(5), Some((1, 1)));
        t.remove_if(5, 1, 1);
        assert_eq!(t.get(5), None);
        assert!(t.is_empty());
    }

    #[test]
    fn stash_is_bounded_and_drains_in_order() {
        let mut t = ReqTable::new();
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
        // Issue 9: completions that never find a request must not disable D4 for good.
        let mut t = ReqTable::new();
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
        let mut t = ReqTable::new();
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
}
