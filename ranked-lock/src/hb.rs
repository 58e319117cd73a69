//! Happens-before hints for Helgrind (the race checker of docs/reliability.md).
//!
//! Helgrind only models pthread primitives; the locks of this crate are futex-based (and
//! `std::sync::RwLock`), so it cannot see their ordering. With the cargo feature
//! `valgrind-annotations` these functions issue Helgrind's user-level synchronisation-object
//! client requests (`ANNOTATE_HAPPENS_BEFORE` / `ANNOTATE_HAPPENS_AFTER`): every
//! [`before`]`(tag)` happens-before any later [`after`]`(tag)` with the same tag. Outside
//! Valgrind the request sequence is a handful of register rotations that leave every register
//! unchanged. Without the feature both functions are empty and inlined away.

/// Marks the release side: everything this thread did so far happens-before any later
/// [`after`] on `tag` (Helgrind `_VG_USERREQ__HG_USERSO_SEND_PRE`).
#[cfg(not(feature = "valgrind-annotations"))]
#[inline(always)]
pub fn before(_tag: usize) {}

/// Marks the acquire side: every earlier [`before`] on `tag` happens-before what this thread
/// does next (Helgrind `_VG_USERREQ__HG_USERSO_RECV_POST`).
#[cfg(not(feature = "valgrind-annotations"))]
#[inline(always)]
pub fn after(_tag: usize) {}

#[cfg(feature = "valgrind-annotations")]
pub use imp::{after, before};

#[cfg(feature = "valgrind-annotations")]
mod imp {
    /// `VG_USERREQ_TOOL_BASE('H','G')`: tool requests are `('H' << 24) | ('G' << 16) + n`.
    const HG_BASE: u64 = (b'H' as u64) << 24 | (b'G' as u64) << 16;
    /// `_VG_USERREQ__HG_USERSO_SEND_PRE` (helgrind.h: base + 256 + 33).
    const USERSO_SEND_PRE: u64 = HG_BASE + 0x121;
    /// `_VG_USERREQ__HG_USERSO_RECV_POST` (helgrind.h: base + 256 + 34).
    const USERSO_RECV_POST: u64 = HG_BASE + 0x122;

    /// One Valgrind client request with a single argument; returns Valgrind's answer, or 0 when
    /// the program does not run under Valgrind.
    #[cfg(target_arch = "x86_64")]
    #[inline(never)]
    fn request(code: u64, arg: u64) -> u64 {
        let args: [u64; 6] = [code, arg, 0, 0, 0, 0];
        let mut res: u64 = 0;
        // SAFETY: the x86_64 client-request sequence of valgrind.h: four `rol` of rdi by
        // 3+13+61+51 = 128 bits (rdi ends unchanged) and `xchg rbx, rbx` (no effect). Natively it
        // changes only the flags (declared by not using `preserves_flags`); under Valgrind the
        // core reads the 6-word block at rax (valid and live for the duration: `args` is on this
        // frame) and writes the answer to rdx. No memory is written by the guest code, yet the
        // block is not declared `readonly`: it is a synchronisation point for Helgrind, so it
        // must stay a compiler barrier (a `readonly` block lets the compiler move this thread's
        // stores across it, out of the happens-before edge it announces).
        unsafe {
            core::arch::asm!(
                "rol rdi, 3",
                "rol rdi, 13",
                "rol rdi, 61",
                "rol rdi, 51",
                "xchg rbx, rbx",
                in("rax") args.as_ptr(),
                inout("rdx") res,
                out("rdi") _,
                options(nostack),
            );
        }
        res
    }

    /// Other architectures: no client requests (the feature only targets the x86_64 CI run).
    #[cfg(not(target_arch = "x86_64"))]
    fn request(_code: u64, _arg: u64) -> u64 {
        0
    }

    /// See the crate-level `before` documentation in [`super`].
    #[inline]
    pub fn before(tag: usize) {
        request(USERSO_SEND_PRE, tag as u64);
    }

    /// See the crate-level `after` documentation in [`super`].
    #[inline]
    pub fn after(tag: usize) {
        request(USERSO_RECV_POST, tag as u64);
    }
}
