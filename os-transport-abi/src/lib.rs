//! `#[repr(C)]` mirrors of the public types and constants of `include/os_transport.h`, written
//! once for the library (`os-transport`), the conformance harness (`compat-tests`) and the
//! benchmarks. `tests/abi_drift.rs` compares every size, offset and constant with what a C
//! compiler sees, and the library's exports with the header's prototypes.
//!
//! [`user_data`] is the bit layout of `os_transport_user_data_t` and the request-id encoding the
//! library uses. The tests do not check the library against it: they keep their own independent
//! oracle (`compat_tests::oracle`), so a mistake here is still caught.
#![allow(non_camel_case_types)]
#![warn(missing_docs)]

pub mod user_data;

use std::ffi::{c_char, c_int, c_uint, c_void};
use urma_sys::{
    urma_jetty_t, urma_jfc_t, urma_jfce_t, urma_jfr_t, urma_jfs_t, urma_target_jetty_t,
    urma_target_seg_t,
};

/// `OS_TRANSPORT_VERSION_MAJOR`
pub const OS_TRANSPORT_VERSION_MAJOR: u32 = 1;
/// `OS_TRANSPORT_VERSION_MINOR`
pub const OS_TRANSPORT_VERSION_MINOR: u32 = 0;
/// `OS_TRANSPORT_VERSION_PATCH`
pub const OS_TRANSPORT_VERSION_PATCH: u32 = 0;
/// `OS_TRANSPORT_VERSION`
pub const OS_TRANSPORT_VERSION: u32 = OS_TRANSPORT_VERSION_MAJOR * 10000
    + OS_TRANSPORT_VERSION_MINOR * 100
    + OS_TRANSPORT_VERSION_PATCH;
/// `DEFAULT_CHUNK_SIZE`: 2 MiB, fixed.
pub const DEFAULT_CHUNK_SIZE: u32 = 2 * 1024 * 1024;
/// `REQUEST_ID_BITS`
pub const REQUEST_ID_BITS: u32 = 60;
/// `REQUEST_ID_EFFECTIVE_BITS`
pub const REQUEST_ID_EFFECTIVE_BITS: u32 = 40;
/// `CHUNK_TYPE_BITS`
pub const CHUNK_TYPE_BITS: u32 = 1;
/// `CHUNK_ID_BITS`
pub const CHUNK_ID_BITS: u32 = 3;
/// `OS_TRANSPORT_MAX_CHUNK_ID`
pub const OS_TRANSPORT_MAX_CHUNK_ID: u64 = (1u64 << CHUNK_ID_BITS) - 2;
/// `OS_TRANSPORT_MAX_CHUNK_NUM`
pub const OS_TRANSPORT_MAX_CHUNK_NUM: u32 = OS_TRANSPORT_MAX_CHUNK_ID as u32 + 1;
/// Largest transfer: `OS_TRANSPORT_MAX_CHUNK_NUM` chunks of `DEFAULT_CHUNK_SIZE` (14 MiB).
pub const MAX_TRANSFER: u32 = DEFAULT_CHUNK_SIZE * OS_TRANSPORT_MAX_CHUNK_NUM;

/// Error return of the `uint32_t` functions: `(uint32_t)-1`.
pub const ERR: u32 = u32::MAX;
/// `wait_and_free_sync_timeout` result when the deadline passed.
pub const WAIT_TIMEOUT: u32 = 1;

/// The function behind a non-NULL `log_callback_t`.
pub type log_fn = unsafe extern "C" fn(level: c_int, msg: *const c_char);
/// `log_callback_t` (NULL is `None`).
pub type log_callback_t = Option<log_fn>;
/// The function behind a non-NULL `notify_callback_t`.
pub type notify_fn = unsafe extern "C" fn(user_data: *mut c_void) -> c_int;
/// `notify_callback_t` (NULL is `None`).
pub type notify_callback_t = Option<notify_fn>;
/// `os_transport_user_data_t` (the bitfield view is [`user_data::UserData`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub union os_transport_user_data_t {
    /// bitfield struct `bs` viewed as its 64-bit storage unit
    pub bs: u64,
    /// `user_ctx`
    pub user_ctx: u64,
}

/// `ost_buffer_info_t`
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ost_buffer_info_t {
    /// base address
    pub addr: u64,
    /// segment covering it
    pub tseg: *mut urma_target_seg_t,
}

/// `ost_device_info_t`
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ost_device_info_t {
    /// fallback receive queue
    pub jfr: *mut urma_jfr_t,
    /// preferred receive queue
    pub jetty: *mut urma_jetty_t,
    /// destination (informational)
    pub dst: *mut c_void,
}

/// `jetty_mode_t` (a C enum: 4 bytes, unsigned underlying type)
pub type jetty_mode_t = c_uint;
/// `JETTY_MODE_SIMPLEX`
pub const JETTY_MODE_SIMPLEX: jetty_mode_t = 0;
/// `JETTY_MODE_DUPLEX`
pub const JETTY_MODE_DUPLEX: jetty_mode_t = 1;

/// `urma_jetty_info_t` (`struct urma_jetty_info`)
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct urma_jetty_info_t {
    /// preferred send queue
    pub jfs: *mut urma_jfs_t,
    /// fallback send queue
    pub jetty: *mut urma_jetty_t,
    /// target of every WR
    pub tjetty: *mut urma_target_jetty_t,
    /// informational
    pub jetty_mode: jetty_mode_t,
}

/// `os_transport_cfg_t` (64 bytes)
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct os_transport_cfg_t {
    /// informational
    pub urma_event_mode: bool,
    /// reserved
    pub reserved1: [u8; 3],
    /// number of worker threads
    pub worker_thread_num: u32,
    /// informational
    pub jfce: *mut urma_jfce_t,
    /// informational
    pub jfc: *mut urma_jfc_t,
    /// recv WRs pre-posted per queue = 4 x this
    pub recv_queue_capacity: u32,
    /// reserved
    pub reserved2: [u32; 9],
}

impl Default for os_transport_cfg_t {
    /// All fields zero, NULL or false: a C `os_transport_cfg_t cfg = {0};`.
    fn default() -> Self {
        os_transport_cfg_t {
            urma_event_mode: false,
            reserved1: [0; 3],
            worker_thread_num: 0,
            jfce: std::ptr::null_mut(),
            jfc: std::ptr::null_mut(),
            recv_queue_capacity: 0,
            reserved2: [0; 9],
        }
    }
}

/// `task_sync_t` (`struct task_sync`): opaque; the values the library hands out are tokens.
#[repr(C)]
pub struct task_sync_t {
    _opaque: [u8; 0],
}

/// The prototypes of the ten exported functions, as function-pointer types: what a program that
/// finds them with `dlsym` calls (the conformance harness, the benchmarks). The library checks at
/// compile time that its exports have exactly these types, and `tests/abi_drift.rs` checks its
/// exports against the header's prototypes.
pub mod exports {
    use super::*;
    use urma_sys::{urma_context_t, urma_status_t};

    /// `os_transport_log_reg`
    pub type os_transport_log_reg_fn =
        unsafe extern "C" fn(level: c_int, cb: log_callback_t) -> c_int;
    /// `os_transport_init`
    pub type os_transport_init_fn = unsafe extern "C" fn(
        urma_ctx: *mut urma_context_t,
        ost_cfg: *mut os_transport_cfg_t,
        handle: *mut *mut c_void,
    ) -> u32;
    /// `os_transport_reg_jfc`
    pub type os_transport_reg_jfc_fn = unsafe extern "C" fn(
        jfce: *mut urma_jfce_t,
        jfc: *mut urma_jfc_t,
        handle: *mut c_void,
    ) -> u32;
    /// `os_transport_send`
    pub type os_transport_send_fn = unsafe extern "C" fn(
        handle: *mut c_void,
        jetty_info: *mut urma_jetty_info_t,
        local_src: *mut ost_buffer_info_t,
        remote_dst: *mut ost_buffer_info_t,
        len: u32,
        server_key: u64,
        client_key: u64,
        ret_sync_handle: *mut *mut task_sync_t,
        urma_status: *mut urma_status_t,
    ) -> u32;
    /// `os_transport_recv`
    pub type os_transport_recv_fn = unsafe extern "C" fn(
        handle: *mut c_void,
        host_src: *mut ost_buffer_info_t,
        device_dst: *mut ost_device_info_t,
        len: u32,
        client_key: u64,
        ret_sync_handle: *mut *mut task_sync_t,
        notify_callback: notify_callback_t,
    ) -> u32;
    /// `os_transport_wake_up_task`
    pub type os_transport_wake_up_task_fn =
        unsafe extern "C" fn(handle: *mut c_void, cr_t: *mut c_void) -> c_int;
    /// `wait_and_free_sync`
    pub type wait_and_free_sync_fn = unsafe extern "C" fn(
        handle: *mut c_void,
        sync_handle: *mut task_sync_t,
        urma_status: *mut urma_status_t,
    ) -> u32;
    /// `wait_and_free_sync_timeout`
    pub type wait_and_free_sync_timeout_fn = unsafe extern "C" fn(
        handle: *mut c_void,
        sync_handle: *mut task_sync_t,
        timeout_ms: i64,
        urma_status: *mut urma_status_t,
    ) -> u32;
    /// `os_transport_cancel_tasks`
    pub type os_transport_cancel_tasks_fn = unsafe extern "C" fn(
        handle: *mut c_void,
        sync_handle: *mut *mut task_sync_t,
        request_id: u64,
    ) -> u32;
    /// `os_transport_destroy`
    pub type os_transport_destroy_fn = unsafe extern "C" fn(handle: *mut c_void) -> u32;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn sizes_match_spec_1_1() {
        assert_eq!(size_of::<os_transport_user_data_t>(), 8);
        assert_eq!(size_of::<ost_buffer_info_t>(), 16);
        assert_eq!(size_of::<ost_device_info_t>(), 24);
        assert_eq!(size_of::<urma_jetty_info_t>(), 32);
        assert_eq!(offset_of!(urma_jetty_info_t, jetty_mode), 24);
        assert_eq!(size_of::<os_transport_cfg_t>(), 64);
        assert_eq!(offset_of!(os_transport_cfg_t, worker_thread_num), 4);
        assert_eq!(offset_of!(os_transport_cfg_t, jfce), 8);
        assert_eq!(offset_of!(os_transport_cfg_t, jfc), 16);
        assert_eq!(offset_of!(os_transport_cfg_t, recv_queue_capacity), 24);
        assert_eq!(offset_of!(os_transport_cfg_t, reserved2), 28);
        assert_eq!(OS_TRANSPORT_MAX_CHUNK_NUM, 7);
        assert_eq!(MAX_TRANSFER, 14 * 1024 * 1024);
        assert_eq!(OS_TRANSPORT_VERSION, 10000);
    }
}
