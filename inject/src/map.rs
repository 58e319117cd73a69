//! The process's mapping of the registry object: unmapped and closed when its last user drops it.

use crate::layout::{Registry, REGISTRY_SIZE};
use std::ptr::NonNull;

/// The process's mapping of the registry.
pub struct Mapping {
    reg: NonNull<Registry>,
    fd: libc::c_int,
}

// SAFETY: the mapping is shared memory that every process and thread accesses through atomics or
// under the registry's spin lock; the pointer and the fd are plain values.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Takes over the mapping `reg` of the object `fd`.
    ///
    /// # Safety
    /// `reg` is a shared read-write mapping of REGISTRY_SIZE bytes of `fd`, page-aligned, that
    /// nothing else unmaps; `fd` is open and nothing else closes it.
    pub(crate) unsafe fn new(reg: NonNull<Registry>, fd: libc::c_int) -> Mapping {
        Mapping { reg, fd }
    }

    /// The mapped registry. Its non-atomic fields are only written under the spin lock.
    pub fn registry(&self) -> &Registry {
        // SAFETY: `reg` maps REGISTRY_SIZE bytes, at least size_of::<Registry>(), page-aligned,
        // for as long as this Mapping lives.
        unsafe { self.reg.as_ref() }
    }

    /// The raw pointer, for `os_transport_inject_init`'s return value and for writes under the
    /// lock.
    pub fn as_ptr(&self) -> *mut Registry {
        self.reg.as_ptr()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `reg` is this mapping of REGISTRY_SIZE bytes and `fd` its descriptor; nothing
        // uses either after the last Arc is gone.
        unsafe {
            libc::munmap(self.reg.as_ptr().cast(), REGISTRY_SIZE);
            libc::close(self.fd);
        }
    }
}
