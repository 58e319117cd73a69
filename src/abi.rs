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

/// The exports have exactly the prototypes that programs which load them with `dlsym` use
/// (`os_transport_abi::exports`): a difference does not compile.
const _: () = {
    use crate::ffi;
    use os_transport_abi::exports::*;
    let _: os_transport_log_reg_fn = ffi::os_transport_log_reg;
    let _: os_transport_init_fn = ffi::os_transport_init;
    let _: os_transport_reg_jfc_fn = ffi::os_transport_reg_jfc;
    let _: os_transport_send_fn = ffi::os_transport_send;
    let _: os_transport_recv_fn = ffi::os_transport_recv;
    let _: os_transport_wake_up_task_fn = ffi::os_transport_wake_up_task;
    let _: wait_and_free_sync_fn = ffi::wait_and_free_sync;
    let _: wait_and_free_sync_timeout_fn = ffi::wait_and_free_sync_timeout;
    let _: os_transport_cancel_tasks_fn = ffi::os_transport_cancel_tasks;
    let _: os_transport_destroy_fn = ffi::os_transport_destroy;
};
