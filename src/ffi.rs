//! The ten C exports. Each one is a panic boundary (`catch_unwind`) that returns the function's
//! error value (ERR, or -1 for the `int` functions) if anything inside panics.

use crate::abi::{
    log_callback_t, notify_callback_t, os_transport_cfg_t, ost_buffer_info_t, ost_device_info_t,
    task_sync_t, urma_jetty_info_t, ERR,
};
use crate::instance;
use crate::log::error;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use urma_sys::{urma_context_t, urma_cr_t, urma_jfc_t, urma_jfce_t, urma_status_t, URMA_SUCCESS};

/// The value an export returns when it cannot do its job.
trait ErrorValue {
    const ERROR: Self;
}

impl ErrorValue for u32 {
    const ERROR: u32 = ERR;
}

impl ErrorValue for c_int {
    const ERROR: c_int = -1;
}

/// The one boundary every export runs in: a panic inside becomes the export's error value (it
/// never unwinds into C), and log lines for the application's callback are held for the whole call
/// and delivered after it let go of every internal lock (`log::held`), so a log callback may call
/// the library back.
fn boundary<R: ErrorValue>(name: &str, f: impl FnOnce() -> R) -> R {
    let held = crate::log::hold();
    let r = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        error!("{}: internal panic caught at the API boundary", name);
        R::ERROR
    });
    drop(held);
    r
}

/// Registers a log callback; messages below `level` are dropped. Returns 0, or -1 when `cb` is NULL.
#[no_mangle]
pub extern "C" fn os_transport_log_reg(level: c_int, cb: log_callback_t) -> c_int {
    boundary("os_transport_log_reg", || crate::log::register(level, cb))
}

/// Creates the process-wide instance and its worker threads.
///
/// # Safety
/// `ost_cfg` and `handle` are NULL or valid pointers.
#[no_mangle]
pub unsafe extern "C" fn os_transport_init(
    urma_ctx: *mut urma_context_t,
    ost_cfg: *mut os_transport_cfg_t,
    handle: *mut *mut c_void,
) -> u32 {
    let _ = urma_ctx; // stored by legacy, never used
                      // SAFETY: forwarded caller contract.
    boundary("os_transport_init", || unsafe {
        instance::init(ost_cfg, handle)
    })
}

/// Records the application's JFCE/JFC (informational).
#[no_mangle]
pub extern "C" fn os_transport_reg_jfc(
    jfce: *mut urma_jfce_t,
    jfc: *mut urma_jfc_t,
    handle: *mut c_void,
) -> u32 {
    boundary("os_transport_reg_jfc", || {
        instance::reg_jfc(jfce.cast(), jfc.cast(), handle)
    })
}

/// Starts a send of `len` bytes.
///
/// # Safety
/// Pointer arguments are NULL or valid for their types.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn os_transport_send(
    handle: *mut c_void,
    jetty_info: *mut urma_jetty_info_t,
    local_src: *mut ost_buffer_info_t,
    remote_dst: *mut ost_buffer_info_t,
    len: u32,
    server_key: u64,
    client_key: u64,
    ret_sync_handle: *mut *mut task_sync_t,
    urma_status: *mut urma_status_t,
) -> u32 {
    boundary("os_transport_send", || {
        // SAFETY: forwarded caller contract.
        unsafe {
            crate::send::send(
                handle,
                jetty_info,
                local_src,
                remote_dst,
                len,
                server_key,
                client_key,
                ret_sync_handle,
                urma_status,
            )
        }
    })
}

/// Registers the receive of `len` bytes for `client_key`.
///
/// # Safety
/// Pointer arguments are NULL or valid for their types.
#[no_mangle]
pub unsafe extern "C" fn os_transport_recv(
    handle: *mut c_void,
    host_src: *mut ost_buffer_info_t,
    device_dst: *mut ost_device_info_t,
    len: u32,
    client_key: u64,
    ret_sync_handle: *mut *mut task_sync_t,
    notify_callback: notify_callback_t,
) -> u32 {
    boundary("os_transport_recv", || {
        // SAFETY: forwarded caller contract.
        unsafe {
            crate::recv::recv(
                handle,
                host_src,
                device_dst,
                len,
                client_key,
                ret_sync_handle,
                notify_callback,
            )
        }
    })
}

/// Hands one polled completion record to the library.
///
/// # Safety
/// `cr_t` is NULL or points to a `urma_cr_t`.
#[no_mangle]
pub unsafe extern "C" fn os_transport_wake_up_task(
    handle: *mut c_void,
    cr_t: *mut c_void,
) -> c_int {
    boundary("os_transport_wake_up_task", || {
        if cr_t.is_null() {
            return -1;
        }
        let Some(inst) = instance::get(handle) else {
            return -1;
        };
        // SAFETY: the caller passes a urma_cr_t it polled (API contract); it is only read.
        let cr = unsafe { &*cr_t.cast::<urma_cr_t>() };
        crate::wake::wake_up(&inst, cr)
    })
}

/// Waits for a request and releases its sync.
///
/// # Safety
/// `urma_status` is NULL or a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn wait_and_free_sync(
    handle: *mut c_void,
    sync_handle: *mut task_sync_t,
    urma_status: *mut urma_status_t,
) -> u32 {
    // SAFETY: forwarded caller contract.
    boundary("wait_and_free_sync", || unsafe {
        wait_common(handle, sync_handle, -1, urma_status)
    })
}

/// As [`wait_and_free_sync`] with a timeout in milliseconds (< 0: forever); returns 1 on timeout.
///
/// # Safety
/// `urma_status` is NULL or a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn wait_and_free_sync_timeout(
    handle: *mut c_void,
    sync_handle: *mut task_sync_t,
    timeout_ms: i64,
    urma_status: *mut urma_status_t,
) -> u32 {
    // SAFETY: forwarded caller contract.
    boundary("wait_and_free_sync_timeout", || unsafe {
        wait_common(handle, sync_handle, timeout_ms, urma_status)
    })
}

unsafe fn wait_common(
    handle: *mut c_void,
    sync: *mut task_sync_t,
    timeout_ms: i64,
    status: *mut urma_status_t,
) -> u32 {
    if !status.is_null() {
        // SAFETY: valid out-pointer (caller contract).
        unsafe { *status = URMA_SUCCESS };
    }
    if handle.is_null() || sync.is_null() {
        return ERR;
    }
    let Some(inst) = instance::get(handle) else {
        error!("wait_and_free_sync: not initialized or bad handle");
        return ERR;
    };
    // SAFETY: forwarded caller contract.
    unsafe { crate::wait::wait(&inst, sync, timeout_ms, status) }
}

/// Cancels the queued tasks of `request_id`; takes over and releases `*sync_handle` if set.
///
/// # Safety
/// `sync_handle` is NULL or a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn os_transport_cancel_tasks(
    handle: *mut c_void,
    sync_handle: *mut *mut task_sync_t,
    request_id: u64,
) -> u32 {
    boundary("os_transport_cancel_tasks", || {
        let Some(inst) = instance::get(handle) else {
            error!("os_transport_cancel_tasks: not initialized or bad handle");
            return ERR;
        };
        // SAFETY: forwarded caller contract.
        unsafe { crate::wait::cancel(&inst, sync_handle, request_id) }
    })
}

/// Stops the workers and releases the instance; every outstanding sync completes as cancelled.
#[no_mangle]
pub extern "C" fn os_transport_destroy(handle: *mut c_void) -> u32 {
    boundary("os_transport_destroy", || instance::destroy(handle))
}
