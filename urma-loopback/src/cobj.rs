//! The C allocation owner ([`CBox`]) and the context ([`Ctx`]): what every object, queues
//! included, points back to. Below the queues and the registry.

use std::sync::atomic::AtomicU64;

/// Owner of one leaked C allocation of type `T`.
pub struct CBox<T> {
    ptr: *mut T,
}

// SAFETY: the C object is only accessed through raw pointers by code that follows the URMA
// threading rules; CBox itself only frees it once, in Drop.
unsafe impl<T> Send for CBox<T> {}
// SAFETY: see above.
unsafe impl<T> Sync for CBox<T> {}

impl<T> CBox<T> {
    /// Moves `v` to the heap and keeps ownership.
    pub fn new(v: T) -> Self {
        CBox {
            ptr: Box::into_raw(Box::new(v)),
        }
    }
    /// The address handed to C.
    pub fn ptr(&self) -> *mut T {
        self.ptr
    }
    /// The address as a registry key.
    pub fn key(&self) -> usize {
        self.ptr as usize
    }
}

impl<T> Drop for CBox<T> {
    fn drop(&mut self) {
        // SAFETY: ptr came from Box::into_raw in new() and is freed exactly once here.
        drop(unsafe { Box::from_raw(self.ptr) });
    }
}

/// Context (one per `urma_create_context`).
pub struct Ctx {
    pub c: CBox<urma_sys::urma_context_t>,
    pub uasid: u32,
    pub eid: urma_sys::urma_eid_t,
    /// Objects created on this context and still alive.
    pub users: AtomicU64,
}

/// The single EID of loopback0: `::ffff:127.0.0.1` (every process of the host shares it).
pub fn loopback_eid() -> urma_sys::urma_eid_t {
    let mut e: urma_sys::urma_eid_t = crate::util::zeroed();
    e.raw = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1];
    e
}
