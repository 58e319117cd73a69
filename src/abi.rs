//! The public types and constants of `include/os_transport.h`: written once in the
//! `os-transport-abi` crate (shared with the tests and the benchmarks) and re-exported here, plus
//! the library's own view of an out-parameter.

pub use os_transport_abi::*;

/// An out-parameter of the C API, already checked to be non-NULL (by `ffi`, the only place that
/// turns a C pointer into one): it can only be written, never read, so it may point to memory the
/// caller left uninitialised.
pub(crate) struct Out<'a, T>(&'a mut std::mem::MaybeUninit<T>);

impl<'a, T> Out<'a, T> {
    /// Wraps the caller's variable.
    pub(crate) fn new(v: &'a mut std::mem::MaybeUninit<T>) -> Self {
        Out(v)
    }

    /// Stores `v` in the caller's variable.
    #[inline]
    pub(crate) fn set(&mut self, v: T) {
        self.0.write(v);
    }
}
