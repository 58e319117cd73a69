//! The role process of `tests/plugin_safety.rs` (docs/loopback.md, "Security model"): loads the
//! URMA library `PS_LIB` by path (after the genuine core's `PS_COMMON`, if given), calls
//! `urma_init`, lists the devices and the EIDs of loopback0, prints one line
//! `PS devices=... eids=N threads=N euid=N secure=N ctl=N`, calls `urma_uninit` only if `PS_UNINIT`
//! is set, and ends by `_exit`, as a crash would. It links no URMA library, so a setuid-root copy
//! of it starts without a loader path (a setuid process ignores `LD_LIBRARY_PATH`).

#[path = "../../testkit/src/dl.rs"]
mod dl;

use std::ffi::{c_int, CStr};
use std::path::Path;

use urma_loopback_ctl::plugin;
use urma_sys::{urma_device_t, urma_eid_info_t, urma_init_attr_t, urma_status_t, URMA_SUCCESS};

#[path = "plugin_safety_env.rs"]
mod role_env;
use role_env::{COMMON, DEVICE, LIB, UNINIT};

fn main() {
    role();
}

/// Role: `urma_init`, the device list, the EID list of loopback0 if there is one; prints one
/// line `PS key=value ...`, then ends (with `urma_uninit` only if asked) by `_exit`.
fn role() -> ! {
    if let Some(common) = std::env::var_os(COMMON) {
        dl::open_global(Path::new(&common));
    }
    let lib = dl::open_global(Path::new(&std::env::var_os(LIB).expect("PS_LIB")));
    type Init = unsafe extern "C" fn(*mut urma_init_attr_t) -> urma_status_t;
    type Uninit = unsafe extern "C" fn() -> urma_status_t;
    type List = unsafe extern "C" fn(*mut c_int) -> *mut *mut urma_device_t;
    type FreeList = unsafe extern "C" fn(*mut *mut urma_device_t);
    type Eids = unsafe extern "C" fn(*mut urma_device_t, *mut u32) -> *mut urma_eid_info_t;
    type FreeEids = unsafe extern "C" fn(*mut urma_eid_info_t);
    // SAFETY: `lib` is a loaded URMA library; each type is the urma_api.h prototype of the
    // function of that name.
    let (init, uninit, list, free_list, eids, free_eids) = unsafe {
        (
            dl::symbol::<Init>(lib, "urma_init"),
            dl::symbol::<Uninit>(lib, "urma_uninit"),
            dl::symbol::<List>(lib, "urma_get_device_list"),
            dl::symbol::<FreeList>(lib, "urma_free_device_list"),
            dl::symbol::<Eids>(lib, "urma_get_eid_list"),
            dl::symbol::<FreeEids>(lib, "urma_free_eid_list"),
        )
    };
    let mut conf = urma_init_attr_t::default();
    // SAFETY: the first call, with a valid attribute structure.
    let rc = unsafe { init(&mut conf) };
    assert_eq!(rc, URMA_SUCCESS, "urma_init");
    let mut n: c_int = 0;
    // SAFETY: after a successful urma_init, with a writable count.
    let devs = unsafe { list(&mut n) };
    let mut names = Vec::new();
    let mut eid_cnt = 0;
    for i in 0..usize::try_from(n).unwrap_or(0) {
        // SAFETY: the core returned `n` device pointers, each a live device.
        let d = unsafe { *devs.add(i) };
        // SAFETY: a device's name is NUL-terminated within its array.
        let name = unsafe { CStr::from_ptr((*d).name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        if name == DEVICE {
            let mut cnt = 0u32;
            // SAFETY: a device of the library and a writable count.
            let l = unsafe { eids(d, &mut cnt) };
            if !l.is_null() {
                eid_cnt = cnt;
                // SAFETY: the list urma_get_eid_list returned.
                unsafe { free_eids(l) };
            }
        }
        names.push(name);
    }
    if !devs.is_null() {
        // SAFETY: the array urma_get_device_list returned.
        unsafe { free_list(devs) };
    }
    let threads = std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count());
    // Whether the library reads URMA_LOOPBACK_TRACE at all: the standalone face, or a plugin
    // built with the control API (cargo feature `ctl`; the installed one is built without).
    let ctl = plugin::loaded().is_none() || plugin::symbol("urma_loopback_trace_open").is_some();
    // SAFETY: geteuid and getauxval cannot fail.
    let (euid, secure) = unsafe { (libc::geteuid(), libc::getauxval(libc::AT_SECURE)) };
    println!(
        "PS devices={} eids={eid_cnt} threads={threads} euid={euid} secure={secure} ctl={}",
        names.join(","),
        u8::from(ctl)
    );
    if std::env::var_os(UNINIT).is_some() {
        // SAFETY: after urma_init, nothing of the library in use.
        let rc = unsafe { uninit() };
        assert_eq!(rc, URMA_SUCCESS, "urma_uninit");
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    // SAFETY: ends the process at once, as a crash would (no destructor, no atexit).
    unsafe { libc::_exit(0) }
}
