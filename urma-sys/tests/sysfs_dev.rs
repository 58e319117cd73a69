//! `urma_sys::provider::sysfs_dev`: the builder fills what a provider owns; the check after
//! registration accepts what the core writes and refuses, with a reason, each thing missing;
//! core versions without a known layout are refused before anything is built.
//!
//! The core's registration is played here by [`FakeCore`], which does with a v0.0.3 structure
//! what `urma_register_sysfs_dev` of the genuine core does: match the driver by name, write the
//! driver and the device's ops, link the device at the head of its list.

use std::ffi::{c_void, CStr};
use std::path::Path;
use std::ptr;

use urma_sys::provider::sysfs_dev::{v0_0_3, DeviceSpec, ErrorKind, Layout, NewDevice, DEVICE_DIR};
use urma_sys::provider::{urma_provider_ops_t, OPS_NONE, PROVIDER_OPS_NONE};
use urma_sys::{
    urma_device_attr_t, urma_device_t, urma_ops_t, URMA_SYSFS_DEV_FLAG_DRIVER_CREATED,
    URMA_TRANSPORT_IP, URMA_TRANSPORT_UB,
};

static OPS: urma_provider_ops_t = urma_provider_ops_t {
    name: c"loopback".as_ptr(),
    ..PROVIDER_OPS_NONE
};

/// Another provider of the same name (a second registration the core would match first).
static OTHER_OPS: urma_provider_ops_t = urma_provider_ops_t {
    name: c"loopback".as_ptr(),
    ..PROVIDER_OPS_NONE
};

fn ops() -> *const urma_provider_ops_t {
    &OPS
}

fn dev_attr() -> urma_device_attr_t {
    let mut attr = urma_device_attr_t::default();
    attr.dev_cap.max_eid_cnt = 4;
    attr.dev_cap.max_jfc_depth = 65536;
    attr.port_cnt = 1;
    attr
}

fn spec<'a>(name: &'a str, sysfs_path: &'a Path, attr: &'a urma_device_attr_t) -> DeviceSpec<'a> {
    DeviceSpec {
        name,
        sysfs_path,
        driver_name: "loopback",
        transport_type: URMA_TRANSPORT_UB,
        dev_attr: attr,
        vendor_id: 0,
        device_id: 0,
    }
}

fn build(name: &str) -> NewDevice {
    let attr = dev_attr();
    NewDevice::build(
        Layout::V0_0_3,
        &spec(name, Path::new("/run/urma-loopback/loopback0"), &attr),
    )
    .expect("build")
}

fn c_str(chars: &[std::ffi::c_char]) -> &str {
    // SAFETY: the arrays the builder fills are NUL-terminated within their length.
    unsafe { CStr::from_ptr(chars.as_ptr()) }
        .to_str()
        .expect("UTF-8")
}

/// The core's registration of v0.0.3 structures, and its device list.
struct FakeCore {
    head: Box<v0_0_3::ub_list>,
    driver: Box<v0_0_3::urma_driver_t>,
    /// Leave the device unlinked (a core whose list node is elsewhere).
    skip_link: bool,
}

impl FakeCore {
    fn new(ops: *const urma_provider_ops_t) -> Self {
        let mut head = Box::new(v0_0_3::ub_list {
            prev: ptr::null_mut(),
            next: ptr::null_mut(),
        });
        let h: *mut v0_0_3::ub_list = &mut *head;
        head.prev = h;
        head.next = h;
        let driver = Box::new(v0_0_3::urma_driver_t {
            ops: ops.cast_mut(),
            node: v0_0_3::ub_list {
                prev: ptr::null_mut(),
                next: ptr::null_mut(),
            },
        });
        FakeCore {
            head,
            driver,
            skip_link: false,
        }
    }

    /// `urma_register_sysfs_dev`: 0, or -1 when the driver name does not match.
    fn register(&mut self, dev: &NewDevice) -> i32 {
        let sd = dev.as_ptr().cast::<v0_0_3::urma_sysfs_dev_t>();
        // SAFETY: `dev` holds a live v0.0.3 structure and its device; the names are
        // NUL-terminated; the driver's ops is a static table with a name.
        unsafe {
            let wanted = CStr::from_ptr((*self.driver.ops).name);
            if CStr::from_ptr((*sd).driver_name.as_ptr()) != wanted {
                return -1;
            }
            (*sd).driver = &mut *self.driver;
            (*(*sd).urma_device).ops = self.driver.ops;
            if !self.skip_link {
                let node: *mut v0_0_3::ub_list = &mut (*sd).node;
                let head: *mut v0_0_3::ub_list = &mut *self.head;
                (*node).next = (*head).next;
                (*node).prev = head;
                (*(*head).next).prev = node;
                (*head).next = node;
            }
        }
        0
    }

    /// `urma_uninit`: frees every listed device and its `urma_device_t`.
    fn uninit(&mut self) -> usize {
        let head: *mut v0_0_3::ub_list = &mut *self.head;
        let mut freed = 0;
        // SAFETY: the list holds nodes of calloc'd v0.0.3 structures linked by `register`.
        unsafe {
            while (*head).next != head {
                let node = (*head).next;
                (*head).next = (*node).next;
                let sd = node
                    .cast::<u8>()
                    .sub(std::mem::offset_of!(v0_0_3::urma_sysfs_dev_t, node))
                    .cast::<v0_0_3::urma_sysfs_dev_t>();
                libc::free((*sd).urma_device.cast());
                libc::free(sd.cast());
                freed += 1;
            }
            (*head).prev = head;
        }
        freed
    }
}

#[test]
fn build_fills_what_the_provider_owns() {
    let dev = build("loopback0");
    assert_eq!(dev.layout(), Layout::V0_0_3);
    // SAFETY: a freshly built v0.0.3 structure and its device, owned by `dev`.
    let (sd, d) = unsafe {
        (
            &*dev.as_ptr().cast::<v0_0_3::urma_sysfs_dev_t>(),
            &*dev.device(),
        )
    };
    assert_eq!(c_str(&sd.dev_name), "loopback0");
    assert_eq!(c_str(&sd.sysfs_path), "/run/urma-loopback/loopback0");
    assert_eq!(c_str(&sd.driver_name), "loopback");
    assert_eq!(sd.transport_type, URMA_TRANSPORT_UB);
    assert_eq!(sd.urma_device, dev.device());
    assert_eq!(sd.dev_attr.dev_cap.max_eid_cnt, 4);
    assert_eq!(sd.dev_attr.dev_cap.max_jfc_depth, 65536);
    assert_eq!(sd.dev_attr.port_cnt, 1);
    assert_eq!(sd.flag, URMA_SYSFS_DEV_FLAG_DRIVER_CREATED);
    assert!(sd.time_created.tv_sec > 0);
    // What the core writes is left zero.
    assert!(sd.driver.is_null() && sd.node.prev.is_null() && sd.node.next.is_null());

    assert_eq!(c_str(&d.name), "loopback0");
    assert_eq!(c_str(&d.path), format!("{DEVICE_DIR}/loopback0"));
    assert_eq!(d.type_, URMA_TRANSPORT_UB);
    assert_eq!(d.sysfs_dev, dev.as_ptr());
    assert!(d.ops.is_null());
}

#[test]
fn a_registered_device_passes_the_check_and_belongs_to_the_core() {
    let mut core = FakeCore::new(ops());
    let first = build("loopback0");
    let second = build("loopback1");
    assert_eq!(core.register(&first), 0);
    assert_eq!(core.register(&second), 0);
    let first_device: *mut urma_device_t = first.device();
    // SAFETY: `core.register` returned 0 for both; no other thread touches the fake list.
    let (a, b) = unsafe { (first.registered(ops()), second.registered(ops())) };
    assert_eq!(a.expect("first").as_ptr(), first_device);
    let b = b.expect("second");
    // SAFETY: the core's device, alive until its uninit.
    assert_eq!(unsafe { (*b.as_ptr()).ops }.cast_const(), ops());
    assert_eq!(core.uninit(), 2);
}

#[test]
fn the_check_refuses_an_unregistered_device() {
    let dev = build("loopback0");
    let owned = (dev.as_ptr(), dev.device());
    // SAFETY: deliberately breaking the precondition in the one way that is still sound: nothing
    // was registered, so every pointer the check reads is NULL.
    let err = unsafe { dev.registered(ops()) }.expect_err("not registered");
    assert_eq!(err.kind(), ErrorKind::NotAsRegistered);
    assert!(
        err.reason().contains("urma_sysfs_dev_t.driver is NULL"),
        "{err}"
    );
    assert!(err.reason().contains("core version 0.0.3"), "{err}");
    // The check hands the device over either way; here nobody else has it.
    // SAFETY: both came from calloc in `build` and nothing refers to them.
    unsafe {
        libc::free(owned.0.cast());
        libc::free(owned.1.cast());
    }
}

#[test]
fn the_check_refuses_a_device_the_core_gave_another_driver() {
    let mut core = FakeCore::new(&OTHER_OPS);
    let dev = build("loopback0");
    assert_eq!(core.register(&dev), 0);
    // SAFETY: registered with the fake core; only this thread uses it.
    let err = unsafe { dev.registered(ops()) }.expect_err("other driver");
    assert_eq!(err.kind(), ErrorKind::NotAsRegistered);
    assert!(
        err.reason().contains("urma_sysfs_dev_t.driver->ops is"),
        "{err}"
    );
    assert_eq!(core.uninit(), 1);
}

#[test]
fn the_check_refuses_an_unlinked_device() {
    let mut core = FakeCore::new(ops());
    core.skip_link = true;
    let dev = build("loopback0");
    let owned = (dev.as_ptr(), dev.device());
    assert_eq!(core.register(&dev), 0);
    // SAFETY: registered with the fake core (which wrote NULL links); only this thread uses it.
    let err = unsafe { dev.registered(ops()) }.expect_err("unlinked");
    println!("{err}");
    assert!(
        err.reason().contains("urma_sysfs_dev_t.node is not linked"),
        "{err}"
    );
    // SAFETY: unlinked, so the fake core does not free them; both came from calloc.
    unsafe {
        libc::free(owned.0.cast());
        libc::free(owned.1.cast());
    }
}

#[test]
fn a_driver_name_the_core_does_not_match_is_not_registered() {
    let mut core = FakeCore::new(ops());
    let attr = dev_attr();
    let mut s = spec("loopback0", Path::new("/tmp"), &attr);
    s.driver_name = "rxe";
    s.transport_type = URMA_TRANSPORT_IP;
    let dev = NewDevice::build(Layout::V0_0_3, &s).expect("build");
    assert_eq!(core.register(&dev), -1);
    drop(dev); // frees both: the core did not take them
    assert_eq!(core.uninit(), 0);
}

#[test]
fn specs_that_do_not_fit_are_refused_with_a_reason() {
    let attr = dev_attr();
    let no_eids = urma_device_attr_t::default();
    let long_path = format!("/{}", "p".repeat(255));
    let long_name = "n".repeat(64);
    let cases: [(DeviceSpec<'_>, &str); 5] = [
        (spec("", Path::new("/tmp"), &attr), "device name is empty"),
        (
            spec(&long_name, Path::new("/tmp"), &attr),
            "is 64 bytes; at most 63 fit",
        ),
        (
            spec("loop\0back", Path::new("/tmp"), &attr),
            "contains a NUL byte",
        ),
        (
            spec("loopback0", Path::new(&long_path), &attr),
            "device sysfs_path",
        ),
        (
            spec("loopback0", Path::new("/tmp"), &no_eids),
            "max_eid_cnt is 0",
        ),
    ];
    for (s, reason) in cases {
        let err = NewDevice::build(Layout::V0_0_3, &s).expect_err(reason);
        assert_eq!(err.kind(), ErrorKind::InvalidSpec, "{err}");
        assert!(err.reason().contains(reason), "{err}");
    }
    // 63 bytes and a 255-byte path fit.
    let name = "n".repeat(63);
    let path = &long_path[..255];
    NewDevice::build(Layout::V0_0_3, &spec(&name, Path::new(path), &attr)).expect("fits");
}

#[test]
fn layouts_are_known_by_core_version_only() {
    assert_eq!(Layout::for_core_version("0.0.3"), Ok(Layout::V0_0_3));
    assert_eq!(Layout::V0_0_3.size(), 952);
    let err = Layout::for_core_version("0.0.4").expect_err("unknown");
    assert_eq!(err.kind(), ErrorKind::UnknownLayout);
    assert!(
        err.reason()
            .contains("no known layout for URMA core version 0.0.4 (known: 0.0.3)"),
        "{err}"
    );
}

#[test]
fn the_core_version_is_read_from_the_file_the_core_resolves_to() {
    let dir = std::env::temp_dir().join(format!("urma-sys-core-version-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("other")).expect("mkdir");
    std::fs::write(dir.join("liburma.so.0.0.3"), b"").expect("write");
    std::os::unix::fs::symlink("liburma.so.0.0.3", dir.join("liburma.so.0")).expect("symlink");
    std::fs::write(dir.join("other/liburma.so.0"), b"").expect("write");
    std::fs::write(dir.join("liburma.so.0.0.9"), b"").expect("write");

    assert_eq!(
        Layout::for_core_file(&dir.join("liburma.so.0")),
        Ok(Layout::V0_0_3)
    );
    let plain = Layout::for_core_file(&dir.join("other/liburma.so.0")).expect_err("no version");
    assert!(
        plain.reason().contains("cannot tell the URMA core version"),
        "{plain}"
    );
    let newer = Layout::for_core_file(&dir.join("liburma.so.0.0.9")).expect_err("unknown");
    assert!(newer.reason().contains("version 0.0.9"), "{newer}");
    let missing = Layout::for_core_file(&dir.join("absent")).expect_err("missing");
    assert_eq!(missing.kind(), ErrorKind::UnknownLayout);
    let _ = std::fs::remove_dir_all(&dir);

    // A symbol of another library: its file is found, and is no URMA core.
    let libc_symbol = libc::malloc as *const c_void;
    let err = Layout::for_loaded_core(libc_symbol).expect_err("libc is no core");
    assert!(err.reason().contains("libc"), "{err}");
    assert!(Layout::for_loaded_core(ptr::null()).is_err());
}

#[test]
fn empty_tables_have_every_slot_null() {
    static TABLE: urma_ops_t = urma_ops_t {
        name: c"loopback".as_ptr(),
        ..OPS_NONE
    };
    assert!(OPS_NONE.name.is_null());
    assert!(TABLE.create_jfc.is_none() && TABLE.poll_jfc.is_none() && TABLE.get_dmac.is_none());
    assert!(PROVIDER_OPS_NONE.init.is_none() && PROVIDER_OPS_NONE.match_table.is_null());
    assert_eq!(PROVIDER_OPS_NONE.attr.version, 0);
}
