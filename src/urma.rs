//! The application's URMA objects as the library keeps them between the call that names them and
//! the work requests posted on them: typed, non-NULL handles ([`Jfs`], [`Jetty`], [`Jfr`],
//! [`TargetJetty`], [`TargetSeg`]) and what a request is made of ([`SendQueue`], [`Buffer`],
//! [`RecvQueue`]). The library never dereferences a handle; it only passes it back to liburma.
//!
//! Handles are made in `ffi` alone, from the pointers the caller passed to an export, through the
//! `unsafe` constructors below (each call with its `// SAFETY:` line): the caller's promise that
//! the pointer names a live URMA object of that type, kept alive while a request posts on it, is
//! what every later post relies on. Safe code cannot make one (the fields are private), and
//! [`RecvQueueWord`] keeps a receive queue in one atomic word without handing the word out.

use std::ptr::{null_mut, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};
use urma_sys::{urma_jetty_t, urma_jfr_t, urma_jfs_t, urma_target_jetty_t, urma_target_seg_t};

/// One handle type: a non-NULL pointer to a URMA object of the application.
macro_rules! handle {
    ($(#[$doc:meta])* $name:ident($raw:ty)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name(NonNull<$raw>);

        impl $name {
            /// The handle of `p`; `None` for NULL.
            ///
            /// # Safety
            /// `p` is NULL or points to a live URMA object of this type that the application keeps
            /// alive while any request posts on it (docs/abi.md, "Threading and ownership"). Only
            /// `ffi` calls this, with a pointer of the caller.
            #[inline(always)]
            pub unsafe fn new(p: *mut $raw) -> Option<$name> {
                NonNull::new(p).map($name)
            }

            /// The pointer, for liburma.
            #[inline(always)]
            pub fn as_ptr(self) -> *mut $raw {
                self.0.as_ptr()
            }
        }

        // SAFETY: the handle is an address that the library only passes back to liburma, whose
        // objects the API lets any thread post on; it gives no access to the object itself.
        unsafe impl Send for $name {}
        // SAFETY: as above.
        unsafe impl Sync for $name {}
    };
    // A handle that liburma also takes as NULL, meaning "none".
    ($(#[$doc:meta])* $name:ident($raw:ty), or_null) => {
        handle!($(#[$doc])* $name($raw));

        impl $name {
            /// The pointer of `h`, NULL for `None`.
            #[inline(always)]
            pub fn ptr_or_null(h: Option<$name>) -> *mut $raw {
                h.map_or(null_mut(), $name::as_ptr)
            }
        }
    };
}

handle!(
    /// `urma_jfs_t *`: a send queue.
    Jfs(urma_jfs_t)
);
handle!(
    /// `urma_jetty_t *`: a jetty (its send or its receive queue).
    Jetty(urma_jetty_t)
);
handle!(
    /// `urma_jfr_t *`: a receive queue.
    Jfr(urma_jfr_t)
);
handle!(
    /// `urma_target_jetty_t *`: the imported jetty of the peer, the target of every WR of a send.
    TargetJetty(urma_target_jetty_t),
    or_null
);
handle!(
    /// `urma_target_seg_t *`: a registered or imported segment.
    TargetSeg(urma_target_seg_t),
    or_null
);

/// The queue a send posts on: `jetty_info->jfs`, else `jetty_info->jetty`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendQueue {
    /// `urma_post_jfs_wr`
    Jfs(Jfs),
    /// `urma_post_jetty_send_wr`
    Jetty(Jetty),
}

/// One side of a transfer: an address and the segment covering it (`ost_buffer_info_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// base address (never dereferenced: the provider reads or writes it)
    pub addr: u64,
    /// the segment, `None` for NULL
    pub tseg: Option<TargetSeg>,
}

impl Buffer {
    /// No buffer (address 0, no segment).
    pub const NONE: Buffer = Buffer {
        addr: 0,
        tseg: None,
    };
}

/// A receive queue: the jetty (preferred) or the JFR of a recv (D6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvQueue {
    /// `urma_post_jetty_recv_wr`
    Jetty(Jetty),
    /// `urma_post_jfr_wr`
    Jfr(Jfr),
}

const TAG_SHIFT: u32 = 62;
const ADDR_MASK: u64 = (1 << TAG_SHIFT) - 1;

impl RecvQueue {
    /// One-word form: tag in the top 2 bits, address below. 0 (also for an address that does not
    /// fit, which no user-space pointer has) means "ask the lock".
    fn encode(self) -> u64 {
        let (tag, a) = match self {
            RecvQueue::Jetty(j) => (1u64, j.as_ptr() as u64),
            RecvQueue::Jfr(f) => (2u64, f.as_ptr() as u64),
        };
        if a & !ADDR_MASK != 0 {
            0
        } else {
            (tag << TAG_SHIFT) | a
        }
    }

    /// Inverse of [`RecvQueue::encode`] for the words it made; `None` for 0.
    #[inline(always)]
    fn decode(v: u64) -> Option<RecvQueue> {
        let tag = v >> TAG_SHIFT;
        if tag != 1 && tag != 2 {
            return None;
        }
        // SAFETY: a tagged word was made by `encode` (the word is private to `RecvQueueWord`)
        // from the address of a handle, which is not NULL.
        let a = unsafe { NonNull::new_unchecked((v & ADDR_MASK) as usize as *mut u8) };
        Some(if tag == 1 {
            RecvQueue::Jetty(Jetty(a.cast()))
        } else {
            RecvQueue::Jfr(Jfr(a.cast()))
        })
    }
}

/// A [`RecvQueue`] (or none) in one atomic word, for readers that do not take the lock it is
/// written under. Only a queue stored here is ever read back: the word itself is private.
#[derive(Debug, Default)]
pub struct RecvQueueWord(AtomicU64);

impl RecvQueueWord {
    /// No queue recorded.
    pub const fn new() -> RecvQueueWord {
        RecvQueueWord(AtomicU64::new(0))
    }

    /// The queue last stored; `None` when none was, or when it does not fit in the word (the
    /// reader then asks the lock).
    #[inline]
    pub fn load(&self) -> Option<RecvQueue> {
        RecvQueue::decode(self.0.load(Ordering::Acquire))
    }

    /// Records `q` (under the lock that also holds it).
    #[inline]
    pub fn store(&self, q: RecvQueue) {
        self.0.store(q.encode(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jetty(a: usize) -> RecvQueue {
        RecvQueue::Jetty(Jetty(NonNull::new(a as *mut _).unwrap()))
    }

    fn jfr(a: usize) -> RecvQueue {
        RecvQueue::Jfr(Jfr(NonNull::new(a as *mut _).unwrap()))
    }

    #[test]
    fn recv_queue_word_round_trips_or_defers_to_the_lock() {
        let w = RecvQueueWord::new();
        assert_eq!(w.load(), None);
        for q in [jetty(0x7f00_1234_5670), jfr(0x5555_0000_0008), jfr(8)] {
            w.store(q);
            assert_eq!(w.load(), Some(q));
        }
        w.store(jetty(usize::MAX));
        assert_eq!(w.load(), None, "does not fit: readers lock");
        assert_ne!(jetty(16).encode(), jfr(16).encode());
    }

    #[test]
    fn absent_handles_are_null_pointers() {
        assert!(TargetSeg::ptr_or_null(None).is_null());
        let p = 0x1000 as *mut urma_target_seg_t;
        // SAFETY: the handle is only compared, never passed to liburma.
        let t = unsafe { TargetSeg::new(p) };
        assert_eq!(TargetSeg::ptr_or_null(t), p);
        // SAFETY: NULL.
        assert_eq!(unsafe { Jfs::new(null_mut()) }, None);
    }
}
