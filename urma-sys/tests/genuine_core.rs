//! With a genuine URMA core (the system's UMDK, or one built from `UMDK_SRC`, both through
//! `ost_build_support::umdk`): it registers a device made by `urma_sys::provider::sysfs_dev`, and
//! the check after registration accepts what it wrote.
//!
//! The test plays a provider without being a plugin: it loads the core (`dlopen`, global) through
//! a view of its own (`umdk::Umdk::with_plugin_dir_in`), puts an empty library in that view's
//! plugin directory (`urma_init` fails unless one loads), registers its ops table with
//! `urma_register_provider_ops`, and from its `init` op picks the layout of the loaded core,
//! builds the device and registers it with `urma_register_sysfs_dev`. Then the core's own calls
//! find it: `urma_get_device_by_name` walks the list through the structure's links,
//! `urma_get_eid_list` reads the EID file under its sysfs path as its
//! `dev_attr.dev_cap.max_eid_cnt` allows, and `urma_uninit` frees both allocations.
//!
//! Native x86_64 or aarch64 only (not under emulation). Skipped with a message under emulation
//! or when there is no core to take (no system UMDK and no `UMDK_SRC`, or no cmake or make to
//! build it).

use std::ffi::{c_char, c_int, c_void, CString};
use std::path::PathBuf;

use ost_build_support::{cprog, umdk};
use std::ptr::{self, NonNull};
use std::sync::{Mutex, OnceLock};

use urma_sys::provider::sysfs_dev::{DeviceSpec, Layout, NewDevice};
use urma_sys::provider::{urma_provider_ops_t, PROVIDER_OPS_NONE};
use urma_sys::{
    urma_device_attr_t, urma_device_t, urma_eid_info_t, urma_init_attr_t, urma_status_t,
    urma_sysfs_dev, URMA_FAIL, URMA_SUCCESS, URMA_TRANSPORT_UB,
};

#[path = "../../testkit/src/dl.rs"]
mod dl;
#[path = "../../testkit/src/paths.rs"]
mod paths;
#[path = "../../testkit/src/target.rs"]
mod target;

const DEVICE: &str = "loopback0";

/// The core's functions this test calls, looked up with `dlsym`.
struct Core {
    register_provider_ops: unsafe extern "C" fn(*mut urma_provider_ops_t) -> c_int,
    unregister_provider_ops: unsafe extern "C" fn(*mut urma_provider_ops_t) -> c_int,
    register_sysfs_dev: unsafe extern "C" fn(*mut urma_sysfs_dev) -> c_int,
    init: unsafe extern "C" fn(*mut urma_init_attr_t) -> urma_status_t,
    uninit: unsafe extern "C" fn() -> urma_status_t,
    get_device_by_name: unsafe extern "C" fn(*mut c_char) -> *mut urma_device_t,
    get_eid_list: unsafe extern "C" fn(*mut urma_device_t, *mut u32) -> *mut urma_eid_info_t,
    free_eid_list: unsafe extern "C" fn(*mut urma_eid_info_t),
}

static CORE: OnceLock<Core> = OnceLock::new();

/// The sysfs directory the device is made with.
static SYSFS_DIR: OnceLock<PathBuf> = OnceLock::new();

/// What the `init` op saw: the device the core took, or why not.
static INIT_OUTCOME: Mutex<Option<Result<usize, String>>> = Mutex::new(None);

static OPS: urma_provider_ops_t = urma_provider_ops_t {
    name: c"loopback".as_ptr(),
    init: Some(provider_init),
    uninit: Some(provider_uninit),
    ..PROVIDER_OPS_NONE
};

fn ops() -> *mut urma_provider_ops_t {
    ptr::from_ref(&OPS).cast_mut()
}

unsafe extern "C" fn provider_init(_conf: *mut urma_init_attr_t) -> urma_status_t {
    let outcome = register_device();
    let ok = outcome.is_ok();
    *INIT_OUTCOME.lock().expect("lock") = Some(outcome.map(|d| d.as_ptr() as usize));
    if ok {
        URMA_SUCCESS
    } else {
        URMA_FAIL
    }
}

unsafe extern "C" fn provider_uninit() -> urma_status_t {
    URMA_SUCCESS
}

/// What a plugin's `init` does: the layout of the loaded core, a device of that layout, the
/// core's registration, the check of what it wrote.
fn register_device() -> Result<NonNull<urma_device_t>, String> {
    let core = CORE.get().expect("core loaded");
    let register = core.register_sysfs_dev;
    let layout = Layout::for_loaded_core(register as *const c_void).map_err(|e| e.to_string())?;
    let mut attr = urma_device_attr_t::default();
    attr.dev_cap.max_eid_cnt = 2;
    let sysfs = SYSFS_DIR.get().expect("sysfs dir");
    let spec = DeviceSpec {
        name: DEVICE,
        sysfs_path: sysfs,
        driver_name: "loopback",
        transport_type: URMA_TRANSPORT_UB,
        dev_attr: &attr,
        vendor_id: 0,
        device_id: 0,
    };

    // A driver name no provider has: the core refuses it and the device is freed here.
    let stray = NewDevice::build(
        layout,
        &DeviceSpec {
            driver_name: "no-such-provider",
            ..spec
        },
    )
    .map_err(|e| e.to_string())?;
    // SAFETY: a complete structure of the core's layout, from calloc.
    if unsafe { register(stray.as_ptr()) } != -1 {
        return Err("the core registered a device no provider claims".to_string());
    }
    drop(stray);

    let dev = NewDevice::build(layout, &spec).map_err(|e| e.to_string())?;
    // SAFETY: as above.
    let rc = unsafe { register(dev.as_ptr()) };
    if rc != 0 {
        return Err(format!("urma_register_sysfs_dev returned {rc}"));
    }
    // SAFETY: registration returned 0; the core calls the init ops one at a time.
    unsafe { dev.registered(ptr::from_ref(&OPS)) }.map_err(|e| e.to_string())
}

#[test]
fn the_genuine_core_registers_a_built_device_and_passes_the_check() {
    if target::emulated() {
        println!("under emulation: skipped the registration with the genuine URMA core");
        return;
    }
    let started = std::time::Instant::now();
    let umdk = match umdk::get(&paths::target_dir().join("umdk")) {
        Ok(u) => u,
        Err(why) => {
            println!("{why}: skipped the registration with the genuine URMA core");
            return;
        }
    };
    println!(
        "the genuine core ({:?}) ready in {:.1?}",
        umdk.origin,
        started.elapsed()
    );
    let work = paths::profile_dir().join("urma-sys-genuine-core");
    // A view of the core with a plugin directory of this test's own.
    let umdk = umdk
        .with_plugin_dir_in(&work.join("core"))
        .unwrap_or_else(|e| panic!("{e}"));

    // urma_init fails unless some plugin in the plugin directory loads: an empty one.
    let plugins = &umdk.plugin_dir;
    let empty = work.join("empty_plugin.c");
    std::fs::write(
        &empty,
        "/* registers nothing */\nint urma_sys_empty_plugin;\n",
    )
    .expect("write");
    cprog::Build::new(cprog::Flavour::Plain, plugins.join("liburma-sys-empty.so"))
        .shared(None)
        .source(&empty)
        .run();
    let sysfs = work.join(format!("sysfs-{}", std::process::id()));
    std::fs::create_dir_all(sysfs.join("eids")).expect("sysfs dir");
    std::fs::write(sysfs.join("eids/eid0"), "fe80::1\n").expect("eid");
    SYSFS_DIR.set(sysfs.clone()).expect("once");

    // The core's dependency first, so that the loader finds it by its SONAME.
    dl::open_global(&umdk.common());
    let lib = dl::open_global(&umdk.core());
    // SAFETY: `lib` is the loaded core; each field's type is the prototype of urma_provider.h /
    // urma_api.h for the function of that name.
    let core = unsafe {
        Core {
            register_provider_ops: dl::symbol(lib, "urma_register_provider_ops"),
            unregister_provider_ops: dl::symbol(lib, "urma_unregister_provider_ops"),
            register_sysfs_dev: dl::symbol(lib, "urma_register_sysfs_dev"),
            init: dl::symbol(lib, "urma_init"),
            uninit: dl::symbol(lib, "urma_uninit"),
            get_device_by_name: dl::symbol(lib, "urma_get_device_by_name"),
            get_eid_list: dl::symbol(lib, "urma_get_eid_list"),
            free_eid_list: dl::symbol(lib, "urma_free_eid_list"),
        }
    };
    let core = CORE.get_or_init(|| core);

    // SAFETY: the calls of a provider and an application, in the order the core expects; OPS is
    // a static the core only reads; the device name is a NUL-terminated, writable buffer.
    unsafe {
        assert_eq!((core.register_provider_ops)(ops()), 0);
        assert_eq!((core.init)(ptr::null_mut()), URMA_SUCCESS, "urma_init");
        let outcome = INIT_OUTCOME.lock().expect("lock").take().expect("init ran");
        let device = outcome.unwrap_or_else(|e| panic!("init: {e}")) as *mut urma_device_t;
        println!("registered {DEVICE} with the genuine core; the check after registration passed");

        let mut name = CString::new(DEVICE).expect("name").into_bytes_with_nul();
        let found = (core.get_device_by_name)(name.as_mut_ptr().cast());
        assert_eq!(found, device, "urma_get_device_by_name");

        let mut cnt = 0u32;
        let eids = (core.get_eid_list)(device, &mut cnt);
        assert!(!eids.is_null(), "urma_get_eid_list");
        assert_eq!(cnt, 1);
        let mut fe80_1 = [0u8; 16];
        fe80_1[0] = 0xfe;
        fe80_1[1] = 0x80;
        fe80_1[15] = 1;
        assert_eq!(
            (*eids).eid.raw,
            fe80_1,
            "EID read from <sysfs_path>/eids/eid0"
        );
        (core.free_eid_list)(eids);
        println!("urma_get_device_by_name and urma_get_eid_list see it");

        assert_eq!((core.uninit)(), URMA_SUCCESS, "urma_uninit");
        assert_eq!((core.unregister_provider_ops)(ops()), 0);
    }
    let _ = std::fs::remove_dir_all(&sysfs);
}
