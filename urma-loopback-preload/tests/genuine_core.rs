//! The helper under the genuine URMA core with the loopback plugin: `urma_query_device` and
//! `urma_get_eid_list` of `loopback0` give what the plugin's own functions give, and the
//! descriptor behaves as the helper documents. Without the helper `urma_query_device` fails
//! (negative control: the helper is what answers).
//!
//! Each part runs in a child process of this binary (`harness = false`: `main` re-executes
//! itself), which loads the core by path (`dlopen`, global) from a view of it whose plugin
//! directory holds only the plugin (`ost_build_support::umdk`), with `LD_PRELOAD` naming the
//! helper (`<profile>/liburma_loopback_preload.so`) or not.
//!
//! Needs a genuine core (the system's, or `UMDK_SRC`) and the plugin: `URMA_LOOPBACK_PLUGIN`
//! names its file (`cargo xtask test-umdk` builds it and sets it). Skipped with a message when
//! either is missing, or under emulation.

use std::ffi::{c_char, c_int, CStr};
use std::mem::size_of;
use std::path::{Path, PathBuf};

use ost_build_support::umdk::{self, Umdk};
use testkit::loopback_ctl::plugin;
use testkit::{dl, paths, target};
use urma_sys::uburma::{self, urma_cmd_hdr_t, QUERY_DEVICE_OUT};
use urma_sys::{
    urma_device_attr_t, urma_device_t, urma_eid_info_t, urma_init_attr_t, urma_status_t, URMA_FAIL,
    URMA_SUCCESS,
};

const ROLE: &str = "URMA_PRELOAD_TEST_ROLE";
const CORE: &str = "URMA_PRELOAD_TEST_CORE";
const DEVICE: &CStr = c"loopback0";

/// The core's functions the children call, looked up with `dlsym`.
struct Core {
    init: unsafe extern "C" fn(*mut urma_init_attr_t) -> urma_status_t,
    uninit: unsafe extern "C" fn() -> urma_status_t,
    get_device_by_name: unsafe extern "C" fn(*mut c_char) -> *mut urma_device_t,
    query_device:
        unsafe extern "C" fn(*mut urma_device_t, *mut urma_device_attr_t) -> urma_status_t,
    get_eid_list: unsafe extern "C" fn(*mut urma_device_t, *mut u32) -> *mut urma_eid_info_t,
    free_eid_list: unsafe extern "C" fn(*mut urma_eid_info_t),
}

/// Loads the core named by `$URMA_PRELOAD_TEST_CORE`, initialises it and finds `loopback0`.
fn open_core() -> (Core, *mut urma_device_t) {
    let path = PathBuf::from(std::env::var_os(CORE).expect("core path"));
    let lib = dl::open_global(&path);
    // SAFETY: `lib` is the loaded core; each field's type is the urma_api.h prototype of the
    // function of that name.
    let core = unsafe {
        Core {
            init: dl::symbol(lib, "urma_init"),
            uninit: dl::symbol(lib, "urma_uninit"),
            get_device_by_name: dl::symbol(lib, "urma_get_device_by_name"),
            query_device: dl::symbol(lib, "urma_query_device"),
            get_eid_list: dl::symbol(lib, "urma_get_eid_list"),
            free_eid_list: dl::symbol(lib, "urma_free_eid_list"),
        }
    };
    let mut conf = urma_init_attr_t::default();
    // SAFETY: the application's first call, with a valid attribute structure.
    assert_eq!(unsafe { (core.init)(&mut conf) }, URMA_SUCCESS, "urma_init");
    let mut name = DEVICE.to_bytes_with_nul().to_vec();
    // SAFETY: after a successful urma_init; a NUL-terminated, writable name.
    let dev = unsafe { (core.get_device_by_name)(name.as_mut_ptr().cast()) };
    assert!(!dev.is_null(), "urma_get_device_by_name(loopback0)");
    (core, dev)
}

fn bytes_of<T>(v: &T) -> &[u8] {
    // SAFETY: the bytes of a live value, for comparison.
    unsafe { std::slice::from_raw_parts(std::ptr::from_ref(v).cast::<u8>(), size_of::<T>()) }
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Child, with the helper: the core's answers are the plugin's.
fn with_helper() {
    let (core, dev) = open_core();
    let mut got = urma_device_attr_t::default();
    // SAFETY: a device of the core and a writable attribute structure.
    let rc = unsafe { (core.query_device)(dev, &mut got) };
    assert_eq!(rc, URMA_SUCCESS, "urma_query_device with the helper");

    let query = plugin::symbol(plugin::QUERY_DEVICE).expect("the plugin's query function");
    // SAFETY: the plugin exports it with this type.
    let query: plugin::QueryDeviceFn = unsafe { std::mem::transmute(query) };
    let mut want = urma_device_attr_t::default();
    // SAFETY: a device name and a writable structure.
    assert_eq!(unsafe { query(DEVICE.as_ptr(), &mut want) }, 0);
    assert!(
        want.dev_cap.max_jfc > 0 && want.dev_cap.max_jfc_depth > 0 && want.dev_cap.max_eid_cnt > 0,
        "the plugin's attributes are too empty to tell anything"
    );
    for f in &QUERY_DEVICE_OUT {
        for k in 0..f.count {
            let at = f.offset + k * f.stride;
            assert_eq!(
                bytes_of(&got)[at..at + f.size],
                bytes_of(&want)[at..at + f.size],
                "{} (element {k}): urma_query_device differs from the plugin",
                f.name
            );
        }
    }
    println!(
        "urma_query_device(loopback0) == the plugin's attributes in all {} fields (max_jfc {}, \
         max_jfc_depth {}, max_eid_cnt {}, port_cnt {})",
        QUERY_DEVICE_OUT.len(),
        want.dev_cap.max_jfc,
        want.dev_cap.max_jfc_depth,
        want.dev_cap.max_eid_cnt,
        want.port_cnt
    );

    let eids = plugin::symbol(plugin::EID_LIST).expect("the plugin's EID function");
    // SAFETY: the plugin exports it with this type.
    let eids: plugin::EidListFn = unsafe { std::mem::transmute(eids) };
    let max = want.dev_cap.max_eid_cnt;
    // SAFETY: all-zero bytes are a valid urma_eid_info_t.
    let mut list = vec![unsafe { std::mem::zeroed::<urma_eid_info_t>() }; max as usize];
    let mut cnt = 0u32;
    // SAFETY: room for `max` entries.
    let rc = unsafe { eids(DEVICE.as_ptr(), list.as_mut_ptr(), max, &mut cnt) };
    assert_eq!(rc, 0);
    assert!(cnt > 0, "the plugin has no EID");
    let mut n = 0u32;
    // SAFETY: a device of the core.
    let core_list = unsafe { (core.get_eid_list)(dev, &mut n) };
    assert!(!core_list.is_null(), "urma_get_eid_list");
    assert_eq!(n, cnt, "EID count");
    for (i, want) in list.iter().take(n as usize).enumerate() {
        // SAFETY: the core returned `n` entries.
        let e = unsafe { &*core_list.add(i) };
        // The fields (the padding after eid_index is nobody's).
        // SAFETY: every view of the EID union is plain bytes.
        let (got_eid, want_eid) = unsafe { (e.eid.raw, want.eid.raw) };
        assert_eq!(
            (got_eid, e.eid_index),
            (want_eid, want.eid_index),
            "EID entry {i}"
        );
    }
    // SAFETY: the list urma_get_eid_list returned.
    unsafe { (core.free_eid_list)(core_list) };
    println!("urma_get_eid_list(loopback0) == the plugin's {n} EID(s)");

    descriptor_behaviour();
    // SAFETY: the last call.
    unsafe { (core.uninit)() };
}

/// The virtual descriptor through the C library's functions (which the helper interposes).
fn descriptor_behaviour() {
    let path = c"/dev/uburma/loopback0";
    // SAFETY: a NUL-terminated path; realpath allocates the result (freed below).
    let r = unsafe { libc::realpath(path.as_ptr(), std::ptr::null_mut()) };
    assert!(!r.is_null(), "realpath of the device path");
    // SAFETY: realpath's NUL-terminated result, freed once.
    unsafe {
        assert_eq!(CStr::from_ptr(r), path);
        libc::free(r.cast());
    }
    // SAFETY: as above; a device the plugin does not have is not virtual.
    let none = unsafe { libc::realpath(c"/dev/uburma/loopback9".as_ptr(), std::ptr::null_mut()) };
    assert!(
        none.is_null() && errno() == libc::ENOENT,
        "another device is not virtual"
    );

    // SAFETY: a NUL-terminated path and valid flags.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR) };
    assert!(fd >= 0, "open of the device path: errno {}", errno());
    let mut winsize = [0u16; 4];
    // SAFETY: a request with a writable argument of its size.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, winsize.as_mut_ptr()) };
    assert!(
        rc == -1 && errno() == libc::ENOTTY,
        "another request: ENOTTY"
    );
    let hdr = urma_cmd_hdr_t {
        command: 1,
        args_len: 0,
        args_addr: 0,
    };
    // SAFETY: URMA_CMD with a header (of a command the helper does not answer).
    let rc = unsafe { libc::ioctl(fd, uburma::URMA_CMD as libc::c_ulong, &hdr) };
    assert!(
        rc == -1 && errno() == libc::ENOTTY,
        "another command: ENOTTY"
    );
    let bad = urma_cmd_hdr_t {
        command: uburma::URMA_CMD_QUERY_DEV_ATTR,
        args_len: 17,
        args_addr: 0,
    };
    // SAFETY: a malformed header the helper refuses before reading anything else.
    let rc = unsafe { libc::ioctl(fd, uburma::URMA_CMD as libc::c_ulong, &bad) };
    assert!(
        rc == -1 && errno() == libc::EINVAL,
        "a malformed query: EINVAL"
    );
    // The number reused for another file without the helper's close (dup2 of a pipe onto
    // it): the pipe's ioctls reach the kernel.
    let mut pipe = [0 as c_int; 2];
    // SAFETY: pipe writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: five bytes from a live buffer into the pipe's write end.
    let wrote = unsafe { libc::write(pipe[1], b"hello".as_ptr().cast(), 5) };
    assert_eq!(wrote, 5);
    // SAFETY: dup2 of the pipe's read end onto the device descriptor (which it closes).
    assert_eq!(unsafe { libc::dup2(pipe[0], fd) }, fd);
    let mut queued: c_int = -1;
    // SAFETY: FIONREAD with a writable int.
    let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut queued) };
    assert!(
        rc == 0 && queued == 5,
        "FIONREAD on a pipe dup2'd onto the device's number: rc {rc}, {queued} bytes, errno {}",
        errno()
    );
    // SAFETY: the pipe's descriptors, closed once.
    unsafe {
        libc::close(pipe[0]);
        libc::close(pipe[1]);
    }
    // SAFETY: the descriptor (now the pipe's copy).
    assert_eq!(unsafe { libc::close(fd) }, 0);
    // SAFETY: the closed number: the C library's ioctl sees it.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, winsize.as_mut_ptr()) };
    assert!(
        rc == -1 && errno() == libc::EBADF,
        "after close: the C library's EBADF"
    );
    println!("the device descriptor: realpath, open, ENOTTY for other requests, EINVAL for a malformed query, a pipe dup2'd onto it reaches the kernel, close");
}

/// Child, without the helper: the query fails as without a kernel.
fn without_helper() {
    let (core, dev) = open_core();
    let mut got = urma_device_attr_t::default();
    // SAFETY: a device of the core and a writable attribute structure.
    let rc = unsafe { (core.query_device)(dev, &mut got) };
    assert_eq!(rc, URMA_FAIL, "urma_query_device without the helper");
    println!("without the helper urma_query_device fails ({rc})");
    // SAFETY: the last call.
    unsafe { (core.uninit)() };
}

/// A view of the core whose plugin directory holds the plugin only: a copy, since the core
/// loads a plugin by its resolved path and the plugin is found by its file name.
fn view(umdk: &Umdk, plugin_file: &Path) -> Umdk {
    let dir = paths::profile_dir().join("urma-loopback-preload-test");
    let view = umdk
        .with_plugin_dir_in(&dir.join("core"))
        .unwrap_or_else(|e| panic!("{e}"));
    let installed = view.plugin_dir.join(plugin::FILE_NAME);
    let _ = std::fs::remove_file(&installed);
    std::fs::copy(plugin_file, &installed).expect("copy the plugin");
    view
}

fn main() {
    match std::env::var(ROLE).as_deref() {
        Ok("with") => return with_helper(),
        Ok("without") => return without_helper(),
        _ => {}
    }
    if target::emulated() {
        println!("under emulation: skipped the helper under the genuine core");
        return;
    }
    let Some(plugin_file) = target::plugin_under_test() else {
        println!(
            "URMA_LOOPBACK_PLUGIN not set: skipped the helper under the genuine core (cargo \
             xtask test-umdk builds the plugin and runs this test)"
        );
        return;
    };
    let umdk = match umdk::get(&paths::target_dir().join("umdk")) {
        Ok(u) => u,
        Err(why) => {
            println!("{why}: skipped the helper under the genuine core");
            return;
        }
    };
    let helper = paths::profile_dir().join("liburma_loopback_preload.so");
    assert!(helper.is_file(), "{} not built", helper.display());
    let view = view(&umdk, &plugin_file);
    let run = |role: &str, preload: Option<&Path>| {
        let mut c = target::command(std::env::current_exe().expect("exe"));
        c.env(ROLE, role)
            .env(CORE, view.core())
            .env(
                "LD_LIBRARY_PATH",
                std::env::join_paths(view.library_dirs()).expect("dirs"),
            )
            .env(plugin::ENABLE_VAR, "1")
            .env_remove("LD_PRELOAD");
        if let Some(p) = preload {
            c.env("LD_PRELOAD", p);
        }
        print!("{}", target::run(&mut c));
    };
    run("with", Some(&helper));
    run("without", None);
}
