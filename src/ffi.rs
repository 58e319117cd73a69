//! The ten C exports: the door between C and the library. Each export runs in one panic boundary
//! ([`boundary`]: it returns the function's error value, ERR or -1, if anything inside panics),
//! resets its out-parameters, turns every C pointer into a typed Rust value (an [`Out`] for an
//! out-parameter, a reference for an input, the validated instance for the handle) in the order
//! docs/abi.md "Return codes" fixes, and then calls a safe function of typed arguments. Every
//! `unsafe` of the C boundary is here; the rest of the library never dereferences a C pointer it
//! was given. The caller's URMA objects become typed handles here (`crate::urma`, whose
//! constructors only this module calls); the library only passes them back to liburma. At the end
//! of the file, a compile-time check that the exports have the prototypes of
//! `os_transport_abi::exports`.

use crate::abi::{
    log_callback_t, notify_callback_t, os_transport_cfg_t, ost_buffer_info_t, ost_device_info_t,
    task_sync_t, urma_jetty_info_t, Out, ERR,
};
use crate::instance::{self, InstRef};
use crate::log::{error, info};
use crate::recv::RecvArgs;
use crate::send::SendArgs;
use crate::urma::{Buffer, Jetty, Jfr, Jfs, RecvQueue, SendQueue, TargetJetty, TargetSeg};
use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};
use urma_sys::{urma_context_t, urma_cr_t, urma_jfc_t, urma_jfce_t, urma_status_t, URMA_SUCCESS};

/// The value an export returns when it cannot do its job.
pub(crate) trait ErrorValue {
    const ERROR: Self;
}

impl ErrorValue for u32 {
    const ERROR: u32 = ERR;
}

impl ErrorValue for c_int {
    const ERROR: c_int = -1;
}

impl ErrorValue for () {
    const ERROR: () = ();
}

impl ErrorValue for *mut c_void {
    const ERROR: *mut c_void = std::ptr::null_mut();
}

/// The one boundary every export runs in: a panic inside becomes the export's error value (it
/// never unwinds into C), and log lines for the application's callback are held for the whole call
/// and delivered after it let go of every internal lock (`log::held`), so a log callback may call
/// the library back.
pub(crate) fn boundary<R: ErrorValue>(name: &str, f: impl FnOnce() -> R) -> R {
    let held = crate::log::hold();
    let r = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        error!("{}: internal panic caught at the API boundary", name);
        R::ERROR
    });
    drop(held);
    r
}

/// An out-parameter of the caller: `None` when NULL.
///
/// # Safety
/// `p` is NULL or valid for writes of a `T`, suitably aligned, for the rest of the export (it may
/// point to uninitialised memory: an [`Out`] is never read).
unsafe fn out<'a, T>(p: *mut T) -> Option<Out<'a, T>> {
    // SAFETY: per this function's contract; `MaybeUninit<T>` has the layout of `T`.
    unsafe { p.cast::<MaybeUninit<T>>().as_mut() }.map(Out::new)
}

/// An input struct of the caller: `None` when NULL.
///
/// # Safety
/// `p` is NULL or points to an initialised `T`, suitably aligned, that the caller does not change
/// during the export.
unsafe fn in_ref<'a, T>(p: *const T) -> Option<&'a T> {
    // SAFETY: per this function's contract.
    unsafe { p.as_ref() }
}

/// The queue a send posts on: `jetty_info->jfs`, else `jetty_info->jetty`; `None` when both are
/// NULL.
///
/// # Safety
/// The non-NULL queue pointers of `ji` name live URMA objects of the caller, kept alive while a
/// request posts on them.
unsafe fn send_queue(ji: &urma_jetty_info_t) -> Option<SendQueue> {
    // SAFETY: per this function's contract.
    match unsafe { Jfs::new(ji.jfs) } {
        Some(q) => Some(SendQueue::Jfs(q)),
        // SAFETY: per this function's contract.
        None => unsafe { Jetty::new(ji.jetty) }.map(SendQueue::Jetty),
    }
}

/// A buffer of the caller: its address and its segment.
///
/// # Safety
/// `b.tseg` is NULL or names a live segment of the caller, kept alive while a request uses it.
unsafe fn buffer(b: &ost_buffer_info_t) -> Buffer {
    Buffer {
        addr: b.addr,
        // SAFETY: per this function's contract.
        tseg: unsafe { TargetSeg::new(b.tseg) },
    }
}

/// The receive queue of `device_dst`: its jetty, else (divergence D6) its JFR; `None` when it has
/// neither.
///
/// # Safety
/// The non-NULL queue pointers of `dev` name live URMA objects of the caller, kept alive while
/// the library posts recv WRs on them.
unsafe fn recv_queue(dev: &ost_device_info_t) -> Option<RecvQueue> {
    // SAFETY: per this function's contract.
    match unsafe { Jetty::new(dev.jetty) } {
        Some(j) => Some(RecvQueue::Jetty(j)),
        // SAFETY: per this function's contract.
        None => unsafe { Jfr::new(dev.jfr) }.map(RecvQueue::Jfr),
    }
}

/// The instance named by `handle`, or `None` with the one log line of `export` for an unknown
/// handle (NULL, stale, forged: handles are compared by value, never dereferenced).
fn instance_of(handle: *mut c_void, export: &str) -> Option<InstRef> {
    let inst = instance::get(handle);
    if inst.is_none() {
        error!("{}: not initialized or bad handle", export);
    }
    inst
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
    boundary("os_transport_init", || {
        info!("os_transport_init called");
        // SAFETY: the header documents `ost_cfg` as the caller's configuration, read during the
        // call only, and `handle` as the caller's `void *` variable that receives the handle.
        let (cfg, handle) = unsafe { (in_ref(ost_cfg), out(handle)) };
        let (Some(cfg), Some(handle)) = (cfg, handle) else {
            error!("os_transport_init: cfg or handle is NULL");
            return ERR;
        };
        instance::init(cfg, handle, crate::wake::on_wake)
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
        let Some(inst) = instance_of(handle, "os_transport_reg_jfc") else {
            return ERR;
        };
        instance::reg_jfc(&inst, jfce.cast(), jfc.cast())
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
        // SAFETY: `ret_sync_handle` and `urma_status` are the caller's `task_sync_t *` and
        // `urma_status_t` variables (header: out-parameters, written before any check).
        let (mut ret, mut status) = unsafe { (out(ret_sync_handle), out(urma_status)) };
        if let Some(r) = ret.as_mut() {
            r.set(std::ptr::null_mut());
        }
        if let Some(s) = status.as_mut() {
            s.set(URMA_SUCCESS);
        }
        // SAFETY: the three structs are the caller's descriptions of the jetty and both buffers,
        // read during the call only (the URMA pointers inside are copied, not dereferenced).
        let (ji, src, dst) = unsafe { (in_ref(jetty_info), in_ref(local_src), in_ref(remote_dst)) };
        let (false, Some(jetty_info), Some(local_src), Some(remote_dst), Some(ret), true) =
            (handle.is_null(), ji, src, dst, ret, len != 0)
        else {
            error!("os_transport_send: invalid argument (NULL pointer or len 0)");
            return ERR;
        };
        let Some(inst) = instance_of(handle, "os_transport_send") else {
            return ERR;
        };
        // SAFETY: the header documents the URMA objects named by `jetty_info`, `local_src` and
        // `remote_dst` as the caller's queue, target jetty and segments of this transfer, alive
        // while it is in flight.
        let args = unsafe {
            SendArgs {
                queue: send_queue(jetty_info),
                tjetty: TargetJetty::new(jetty_info.tjetty),
                src: buffer(local_src),
                dst: buffer(remote_dst),
                len,
                sk: server_key,
                ck: client_key,
            }
        };
        crate::send::send(&inst, args, ret, status)
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
        // SAFETY: `ret_sync_handle` is the caller's `task_sync_t *` variable (header:
        // out-parameter, written before any check).
        let mut ret = unsafe { out(ret_sync_handle) };
        if let Some(r) = ret.as_mut() {
            r.set(std::ptr::null_mut());
        }
        // SAFETY: `host_src` and `device_dst` are the caller's descriptions of the staging buffer
        // and of the receive queue, read during the call only.
        let (src, dev) = unsafe { (in_ref(host_src), in_ref(device_dst)) };
        let (false, Some(host_src), Some(dev), Some(ret), true, true) = (
            handle.is_null(),
            src,
            dev,
            ret,
            notify_callback.is_some(),
            len != 0,
        ) else {
            error!("os_transport_recv: invalid argument (NULL pointer or len 0)");
            return ERR;
        };
        // SAFETY: the header documents `device_dst`'s jetty and JFR as the caller's receive
        // queues, alive while the library receives on them.
        let Some(queue) = (unsafe { recv_queue(dev) }) else {
            error!("os_transport_recv: device_dst has neither jetty nor jfr");
            return ERR;
        };
        let Some(inst) = instance_of(handle, "os_transport_recv") else {
            return ERR;
        };
        let args = RecvArgs {
            // SAFETY: the header documents `host_src->tseg` as the caller's segment of the
            // staging buffer, alive while the receive is in flight.
            tseg: unsafe { TargetSeg::new(host_src.tseg) },
            queue,
            len,
            ck: client_key,
            cb: notify_callback,
        };
        crate::recv::recv(&inst, args, ret)
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
        // SAFETY: the header documents `cr_t` as a `urma_cr_t` the caller polled from its JFC,
        // read during the call only.
        let Some(cr) = (unsafe { in_ref(cr_t.cast::<urma_cr_t>()) }) else {
            return -1;
        };
        let Some(inst) = instance::get(handle) else {
            return -1;
        };
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
    boundary("wait_and_free_sync", || {
        // SAFETY: `urma_status` is the caller's `urma_status_t` variable (header: out-parameter).
        let status = unsafe { out(urma_status) };
        wait_common(handle, sync_handle, -1, status)
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
    boundary("wait_and_free_sync_timeout", || {
        // SAFETY: `urma_status` is the caller's `urma_status_t` variable (header: out-parameter).
        let status = unsafe { out(urma_status) };
        wait_common(handle, sync_handle, timeout_ms, status)
    })
}

/// Both waits after the conversion of `urma_status` (`sync` is a token, never dereferenced).
fn wait_common(
    handle: *mut c_void,
    sync: *mut task_sync_t,
    timeout_ms: i64,
    mut status: Option<Out<'_, urma_status_t>>,
) -> u32 {
    if let Some(s) = status.as_mut() {
        s.set(URMA_SUCCESS);
    }
    if handle.is_null() || sync.is_null() {
        return ERR;
    }
    let Some(inst) = instance_of(handle, "wait_and_free_sync") else {
        return ERR;
    };
    crate::wait::wait(&inst, sync, timeout_ms, status)
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
        let Some(inst) = instance_of(handle, "os_transport_cancel_tasks") else {
            return ERR;
        };
        // SAFETY: the header documents `sync_handle` as NULL or the caller's `task_sync_t *`
        // variable, initialised (read for the sync to take over) and set to NULL when taken.
        let sync_handle = unsafe { sync_handle.as_mut() };
        crate::wait::cancel(&inst, sync_handle, request_id)
    })
}

/// Stops the workers and releases the instance; every outstanding sync completes as cancelled.
#[no_mangle]
pub extern "C" fn os_transport_destroy(handle: *mut c_void) -> u32 {
    boundary("os_transport_destroy", || instance::destroy(handle))
}

/// The exports have exactly the prototypes that programs which load them with `dlsym` use
/// (`os_transport_abi::exports`): a difference does not compile.
const _: () = {
    use os_transport_abi::exports::*;
    let _: os_transport_log_reg_fn = os_transport_log_reg;
    let _: os_transport_init_fn = os_transport_init;
    let _: os_transport_reg_jfc_fn = os_transport_reg_jfc;
    let _: os_transport_send_fn = os_transport_send;
    let _: os_transport_recv_fn = os_transport_recv;
    let _: os_transport_wake_up_task_fn = os_transport_wake_up_task;
    let _: wait_and_free_sync_fn = wait_and_free_sync;
    let _: wait_and_free_sync_timeout_fn = wait_and_free_sync_timeout;
    let _: os_transport_cancel_tasks_fn = os_transport_cancel_tasks;
    let _: os_transport_destroy_fn = os_transport_destroy;
};
