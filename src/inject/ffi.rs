//! The ten `os_transport_inject_*` exports of the inject flavour, with the original prototypes,
//! each in the library's one panic boundary. A NULL name or message is refused (-1, or nothing
//! done) where the original dereferences it.

use crate::ffi::{boundary, ErrorValue};
use std::ffi::{c_char, c_int, c_void, CStr};

/// `execute` and `get_count` answer 0 (nothing fired, no slots) when they cannot do their job.
struct Zero<T>(T);

impl ErrorValue for Zero<c_int> {
    const ERROR: Self = Zero(0);
}

impl ErrorValue for Zero<u32> {
    const ERROR: Self = Zero(0);
}

/// The bytes of a C string argument, `None` when NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that stays unchanged during the call.
unsafe fn name<'a>(p: *const c_char) -> Option<&'a [u8]> {
    // SAFETY: per this function's contract.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// Attaches to the host's registry (creating it if absent); the mapping, or NULL.
#[no_mangle]
pub extern "C" fn os_transport_inject_init() -> *mut c_void {
    boundary("os_transport_inject_init", || {
        os_transport_inject::attach().map_or(std::ptr::null_mut(), |m| m.as_ptr().cast())
    })
}

/// Arms `name` to sleep `ms` milliseconds each time it fires. 0, or -1.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn os_transport_inject_set_sleep(name: *const c_char, ms: u32) -> c_int {
    boundary("os_transport_inject_set_sleep", || {
        // SAFETY: the caller's point name (contract above).
        unsafe { self::name(name) }.map_or(-1, |n| os_transport_inject::set_sleep(n, ms))
    })
}

/// Arms `name` to return `error_code`. 0, or -1.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn os_transport_inject_set_return_error(
    name: *const c_char,
    error_code: c_int,
) -> c_int {
    boundary("os_transport_inject_set_return_error", || {
        // SAFETY: the caller's point name (contract above).
        unsafe { self::name(name) }
            .map_or(-1, |n| os_transport_inject::set_return_error(n, error_code))
    })
}

/// Arms `name` to print `message`. 0, or -1.
///
/// # Safety
/// `name` and `message` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn os_transport_inject_set_print(
    name: *const c_char,
    message: *const c_char,
) -> c_int {
    boundary("os_transport_inject_set_print", || {
        // SAFETY: the caller's point name and message (contract above).
        match unsafe { (self::name(name), self::name(message)) } {
            (Some(n), Some(m)) => os_transport_inject::set_print(n, m),
            _ => -1,
        }
    })
}

/// Percent (<= 100) or count (> 100: that minus 100 firings) mode of an existing point. 0, or -1.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn os_transport_inject_set_frequency(
    name: *const c_char,
    percent_or_count: u32,
) -> c_int {
    boundary("os_transport_inject_set_frequency", || {
        // SAFETY: the caller's point name (contract above).
        unsafe { self::name(name) }.map_or(-1, |n| {
            os_transport_inject::set_frequency(n, percent_or_count)
        })
    })
}

/// Disables `name`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn os_transport_inject_clear(name: *const c_char) {
    boundary("os_transport_inject_clear", || {
        // SAFETY: the caller's point name (contract above).
        if let Some(n) = unsafe { self::name(name) } {
            os_transport_inject::clear(n);
        }
    })
}

/// Disables every point.
#[no_mangle]
pub extern "C" fn os_transport_inject_clear_all() {
    boundary(
        "os_transport_inject_clear_all",
        os_transport_inject::clear_all,
    )
}

/// Passes `name`: 1 when an error fires (its value in `*out_return_value` if that is not NULL),
/// else 0.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out_return_value` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn os_transport_inject_execute(
    name: *const c_char,
    out_return_value: *mut c_int,
) -> c_int {
    boundary("os_transport_inject_execute", || {
        // SAFETY: the caller's point name (contract above).
        let Some(v) = unsafe { self::name(name) }.and_then(os_transport_inject::execute) else {
            return Zero(0);
        };
        // SAFETY: NULL or the caller's int (contract above).
        if let Some(out) = unsafe { out_return_value.as_mut() } {
            *out = v;
        }
        Zero(1)
    })
    .0
}

/// Forgets this process's mapping and unlinks the registry's name.
#[no_mangle]
pub extern "C" fn os_transport_inject_cleanup() {
    boundary("os_transport_inject_cleanup", os_transport_inject::cleanup)
}

/// Slots used in the registry (0 if it cannot be attached).
#[no_mangle]
pub extern "C" fn os_transport_inject_get_count() -> u32 {
    boundary("os_transport_inject_get_count", || {
        Zero(os_transport_inject::get_count())
    })
    .0
}
