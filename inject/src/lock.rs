//! The registry's spin lock, on the original's word (offset 8) with its 0/1 protocol: acquire by
//! exchanging 1 until the old value is 0, spinning on plain reads with `sched_yield` in between;
//! release by storing 0. Unlike the original, the wait is bounded ([`LOCK_BOUND`]): a word left
//! at 1 by a holder that died makes the operation give up with a log line instead of hanging the
//! process, and once that happened the process tries once, without spinning, until it gets the
//! lock again.

use crate::layout::{Point, Registry, REGISTRY_SIZE, VERSION};
use crate::map::Mapping;
use crate::say;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The longest a caller waits for the lock word. The original holds it for a few stores.
pub const LOCK_BOUND: Duration = Duration::from_secs(1);

/// Set after a wait hit [`LOCK_BOUND`]; cleared by the next successful acquisition.
static STUCK: AtomicBool = AtomicBool::new(false);

/// The lock, held; released on drop.
pub struct Guard<'a> {
    m: &'a Mapping,
}

impl<'a> Guard<'a> {
    /// Takes the lock of `m`'s registry; `None` (logged) if the word stayed held.
    pub fn acquire(m: &'a Mapping) -> Option<Guard<'a>> {
        let word = &m.registry().header.lock;
        let deadline = Instant::now() + LOCK_BOUND;
        loop {
            if word.swap(1, Ordering::Acquire) == 0 {
                STUCK.store(false, Ordering::Relaxed);
                return Some(Guard { m });
            }
            if STUCK.load(Ordering::Relaxed) {
                return None;
            }
            while word.load(Ordering::Relaxed) != 0 {
                if Instant::now() >= deadline {
                    if !STUCK.swap(true, Ordering::Relaxed) {
                        say!(
                            "lock word held for over {} ms (its holder may be gone): operation \
                             skipped; the registry is not used until the word is free",
                            LOCK_BOUND.as_millis()
                        );
                    }
                    return None;
                }
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
    }

    /// The raw registry, for writes under the lock.
    pub fn registry_ptr(&self) -> *mut Registry {
        self.m.as_ptr()
    }

    /// The registry, for its atomic fields.
    pub fn registry(&self) -> &Registry {
        self.m.registry()
    }

    /// Slot `i` (< MAX_POINTS), whose plain fields may be read and written while the guard lives.
    pub fn point(&self, i: usize) -> *mut Point {
        // SAFETY: in bounds of the mapped array (callers pass i < MAX_POINTS, checked by the
        // indexing of `points`' address below).
        unsafe { std::ptr::addr_of_mut!((*self.m.as_ptr()).points[i]) }
    }

    /// The version reset of an object with a foreign version: every slot and record zeroed,
    /// counters restarted, the right version stored.
    pub fn reset(&self, pid: i32) {
        let base = self.m.as_ptr();
        // SAFETY: under the lock; `points` through `ring` are the bytes after the header, all
        // inside the REGISTRY_SIZE mapping, with no atomic of the header among them.
        unsafe {
            let from = std::ptr::addr_of_mut!((*base).points).cast::<u8>();
            let header = std::mem::size_of::<crate::layout::Header>();
            std::ptr::write_bytes(from, 0, REGISTRY_SIZE - header);
        }
        let r = self.registry();
        r.ring_tail.store(0, Ordering::Release);
        r.header.seq.store(1, Ordering::Release);
        r.header.count.store(0, Ordering::Release);
        r.header.writer_pid.store(pid, Ordering::Release);
        r.header.version.store(VERSION, Ordering::Release);
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.m.registry().header.lock.store(0, Ordering::Release);
    }
}
