//! The exported functions (see the crate documentation), what they share, and the plugin as
//! the [`answer::Device`] of the answers.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

use urma_loopback_ctl::plugin;

use crate::{answer, vfd};
use urma_sys::{urma_device_attr_t, urma_eid_info_t};

/// Runs `f` behind a panic boundary: a panic never unwinds into C; `default` is returned instead
/// (with `errno` set to `EIO`).
fn guard<R>(default: R, f: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            set_errno(libc::EIO);
            default
        }
    }
}

fn set_errno(e: c_int) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

/// A function of the plugin, looked up once it is found (not before: the plugin may be loaded
/// after the first call).
struct PluginFn {
    name: &'static str,
    addr: AtomicUsize,
}

impl PluginFn {
    const fn new(name: &'static str) -> PluginFn {
        PluginFn {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    fn get(&self) -> Option<*mut c_void> {
        let a = self.addr.load(Ordering::Acquire);
        if a != 0 {
            return Some(a as *mut c_void);
        }
        let p = plugin::symbol(self.name)?;
        self.addr.store(p as usize, Ordering::Release);
        Some(p)
    }
}

static QUERY_DEVICE: PluginFn = PluginFn::new(plugin::QUERY_DEVICE);
static EID_LIST: PluginFn = PluginFn::new(plugin::EID_LIST);

/// The devices of the loopback plugin, through its two functions.
struct Plugin;

impl answer::Device for Plugin {
    fn attributes(&self, name: &CStr) -> Option<urma_device_attr_t> {
        let f = QUERY_DEVICE.get()?;
        // SAFETY: the plugin exports this symbol with the type plugin::QueryDeviceFn.
        let f: plugin::QueryDeviceFn = unsafe { std::mem::transmute(f) };
        let mut attr = urma_device_attr_t::default();
        // SAFETY: a NUL-terminated name and a writable structure of the type it fills.
        (unsafe { f(name.as_ptr(), &mut attr) } == 0).then_some(attr)
    }

    fn eids(&self, name: &CStr, list: &mut [urma_eid_info_t]) -> Option<usize> {
        let f = EID_LIST.get()?;
        // SAFETY: the plugin exports this symbol with the type plugin::EidListFn.
        let f: plugin::EidListFn = unsafe { std::mem::transmute(f) };
        let max = u32::try_from(list.len()).unwrap_or(u32::MAX);
        let mut cnt = 0u32;
        // SAFETY: `list` has room for `max` entries; `cnt` is writable.
        let rc = unsafe { f(name.as_ptr(), list.as_mut_ptr(), max, &mut cnt) };
        (rc == 0).then_some((cnt as usize).min(list.len()))
    }
}

/// The device `path` names when it is `/dev/uburma/<dev>` of a device of the plugin.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
unsafe fn plugin_device<'a>(path: *const c_char) -> Option<&'a CStr> {
    if path.is_null() {
        return None;
    }
    // SAFETY: NUL-terminated per the contract; the caller keeps it for 'a.
    let path: &'a CStr = unsafe { CStr::from_ptr(path) };
    let name = vfd::device_in_path(path)?;
    answer::Device::attributes(&Plugin, name).map(|_| name)
}

/// The C library's `name` (the next definition after this library), looked up once.
macro_rules! next {
    ($name:literal, $ty:ty) => {{
        static ADDR: AtomicUsize = AtomicUsize::new(0);
        let mut a = ADDR.load(Ordering::Relaxed);
        if a == 0 {
            // SAFETY: dlsym with a NUL-terminated name.
            a = unsafe { libc::dlsym(libc::RTLD_NEXT, concat!($name, "\0").as_ptr().cast()) }
                as usize;
            ADDR.store(a, Ordering::Relaxed);
        }
        // SAFETY: the C library's function of that name has the type $ty (or it is missing).
        (a != 0).then(|| unsafe { std::mem::transmute::<usize, $ty>(a) })
    }};
}

type RealpathFn = unsafe extern "C" fn(*const c_char, *mut c_char) -> *mut c_char;
type OpenFn = unsafe extern "C" fn(*const c_char, c_int, libc::mode_t) -> c_int;
type CloseFn = unsafe extern "C" fn(c_int) -> c_int;
type IoctlFn = unsafe extern "C" fn(c_int, libc::c_ulong, *mut c_void) -> c_int;

/// Opens a virtual descriptor for `dev` with the C library's `open`: one on `/dev/null`.
fn open_virtual(real: OpenFn, dev: &CStr) -> c_int {
    // SAFETY: a NUL-terminated path and valid flags.
    let fd = unsafe { real(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
    if fd >= 0 && !vfd::add(fd, dev) {
        if let Some(close) = next!("close", CloseFn) {
            // SAFETY: the descriptor just opened here.
            unsafe { close(fd) };
        }
        set_errno(libc::EMFILE);
        return -1;
    }
    fd
}

fn open_common(
    real: Option<OpenFn>,
    path: *const c_char,
    flags: c_int,
    mode: libc::mode_t,
) -> c_int {
    let Some(real) = real else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: `path` is the caller's NUL-terminated path (or NULL).
    match unsafe { plugin_device(path) } {
        Some(dev) => open_virtual(real, dev),
        // SAFETY: the caller's arguments, unchanged.
        None => unsafe { real(path, flags, mode) },
    }
}

/// `realpath`: see the crate documentation.
///
/// # Safety
/// The C library's contract.
#[no_mangle]
pub unsafe extern "C" fn realpath(path: *const c_char, resolved: *mut c_char) -> *mut c_char {
    guard(std::ptr::null_mut(), || {
        let Some(real) = next!("realpath", RealpathFn) else {
            set_errno(libc::ENOSYS);
            return std::ptr::null_mut();
        };
        // SAFETY: the caller's NUL-terminated path (or NULL).
        match unsafe { plugin_device(path) } {
            // The path is its own resolution; `resolved` has room for PATH_MAX bytes, or the
            // copy is the caller's to free.
            Some(_) if resolved.is_null() => {
                // SAFETY: a NUL-terminated string; strdup allocates with malloc.
                unsafe { libc::strdup(path) }
            }
            Some(_) => {
                // SAFETY: the path is shorter than PATH_MAX (checked by device_in_path).
                unsafe { libc::strcpy(resolved, path) }
            }
            // SAFETY: the caller's arguments, unchanged.
            None => unsafe { real(path, resolved) },
        }
    })
}

/// `open`: see the crate documentation.
///
/// # Safety
/// The C library's contract.
#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
    guard(-1, || open_common(next!("open", OpenFn), path, flags, mode))
}

/// `open64`: as [`open`].
///
/// # Safety
/// The C library's contract.
#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
    guard(-1, || {
        open_common(next!("open64", OpenFn), path, flags, mode)
    })
}

/// `close`: a virtual descriptor is forgotten, then closed.
///
/// # Safety
/// The C library's contract.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    guard(-1, || {
        vfd::remove(fd);
        match next!("close", CloseFn) {
            // SAFETY: the caller's descriptor.
            Some(real) => unsafe { real(fd) },
            None => {
                set_errno(libc::ENOSYS);
                -1
            }
        }
    })
}

/// `ioctl`: on a virtual descriptor, the two commands of the core answered, anything else
/// `ENOTTY`; otherwise the C library's.
///
/// # Safety
/// The C library's contract.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: libc::c_ulong, arg: *mut c_void) -> c_int {
    guard(-1, || {
        let Some(name) = vfd::device_of(fd) else {
            return match next!("ioctl", IoctlFn) {
                // SAFETY: the caller's arguments, unchanged.
                Some(real) => unsafe { real(fd, request, arg) },
                None => {
                    set_errno(libc::ENOSYS);
                    -1
                }
            };
        };
        if request != urma_sys::uburma::URMA_CMD as libc::c_ulong {
            set_errno(libc::ENOTTY);
            return -1;
        }
        let Ok(dev) = CStr::from_bytes_until_nul(&name) else {
            set_errno(libc::ENODEV);
            return -1;
        };
        // SAFETY: the core's header and the attribute array it points to (the ioctl contract
        // of URMA_CMD, which the kernel driver would read likewise).
        match unsafe { answer::answer(arg.cast(), dev, &Plugin) } {
            Ok(()) => 0,
            Err(r) => {
                set_errno(r.errno());
                -1
            }
        }
    })
}
