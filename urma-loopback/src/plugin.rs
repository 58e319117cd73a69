//! The plugin face (cargo feature `plugin`): the loopback as a provider of the genuine URMA core,
//! `liburma-loopback.so` in the core's plugin directory (`<directory of liburma.so.0>/urma/`).
//!
//! The same engine as the standalone `liburma.so.0`; only the entry differs. The core loads the
//! plugin and runs its ELF constructor, which registers [`PROVIDER`]; the core's `urma_init` calls
//! [`provider_init`], which, in a process that asked for the loopback (`URMA_LOOPBACK=1`, see
//! [`enabled`]; otherwise it does nothing at all), makes the device `loopback0` and adds it to
//! the core's device list with `urma_register_sysfs_dev` (a driver-created device: no kernel entry, no character
//! device); `urma_create_context` reaches [`create_context`], whose context carries [`OPS`]; from
//! then on the core validates and counts every call and hands it to the operation in [`OPS`],
//! which is the standalone face's function of the same name. The core keeps what it does itself
//! (device lists, EID lists, `urma_get_rjetty`, `urma_get_seg_ctx`, the flat `urma_write` /
//! `urma_read` / `urma_send` / `urma_recv`, the notifier API).
//!
//! The URMA functions are not exported here (they would shadow nothing, the core being loaded
//! first, but a lookup in the plugin must not find a second `urma_poll_jfc`): the plugin exports
//! the control API (`urma_loopback_*`, found through `urma_loopback_ctl::plugin`) and the two
//! device-query functions `liburma-loopback-preload.so` answers the core's queries with.
//!
//! `docs/loopback.md` ("The two faces") and `docs/umdk-core.md` tell what the core does around
//! each call.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

use urma_loopback_ctl::plugin as names;
use urma_sys as u;
use urma_sys::provider::sysfs_dev::{DeviceSpec, Layout, NewDevice};
use urma_sys::provider::{
    urma_ops_t, urma_provider_ops_t, urma_register_provider_ops, urma_register_sysfs_dev,
    urma_unregister_provider_ops, OPS_NONE, PROVIDER_OPS_NONE,
};

use crate::api::{self, device, import, jetty, jfc, post, seg, DEV_NAME};
use crate::peer;
use crate::util::{guard, log_alert};

/// The per-context operations: every operation the loopback has, the standalone face's
/// functions themselves (same prototypes: the core calls them as the application would).
static OPS: urma_ops_t = urma_ops_t {
    name: c"loopback".as_ptr(),
    create_jfc: Some(jfc::urma_create_jfc),
    delete_jfc: Some(jfc::urma_delete_jfc),
    create_jfs: Some(jetty::urma_create_jfs),
    query_jfs: Some(jetty::urma_query_jfs),
    delete_jfs: Some(jetty::urma_delete_jfs),
    create_jfr: Some(jetty::urma_create_jfr),
    delete_jfr: Some(jetty::urma_delete_jfr),
    import_jfr: Some(import::urma_import_jfr),
    unimport_jfr: Some(import::urma_unimport_jfr),
    advise_jfr: Some(import::urma_advise_jfr),
    unadvise_jfr: Some(import::urma_unadvise_jfr),
    create_jetty: Some(jetty::urma_create_jetty),
    query_jetty: Some(jetty::urma_query_jetty),
    delete_jetty: Some(jetty::urma_delete_jetty),
    import_jetty: Some(import::urma_import_jetty),
    unimport_jetty: Some(import::urma_unimport_jetty),
    advise_jetty: Some(import::urma_advise_jetty),
    unadvise_jetty: Some(import::urma_unadvise_jetty),
    bind_jetty: Some(import::urma_bind_jetty),
    unbind_jetty: Some(import::urma_unbind_jetty),
    create_jfce: Some(jfc::urma_create_jfce),
    delete_jfce: Some(jfc::urma_delete_jfce),
    alloc_token_id: Some(seg::urma_alloc_token_id),
    free_token_id: Some(seg::urma_free_token_id),
    register_seg: Some(seg::urma_register_seg),
    unregister_seg: Some(seg::urma_unregister_seg),
    import_seg: Some(seg::urma_import_seg),
    unimport_seg: Some(seg::urma_unimport_seg),
    get_async_event: Some(device::urma_get_async_event),
    ack_async_event: Some(device::urma_ack_async_event),
    post_jfs_wr: Some(post::urma_post_jfs_wr),
    post_jfr_wr: Some(post::urma_post_jfr_wr),
    post_jetty_send_wr: Some(post::urma_post_jetty_send_wr),
    post_jetty_recv_wr: Some(post::urma_post_jetty_recv_wr),
    poll_jfc: Some(jfc::urma_poll_jfc),
    rearm_jfc: Some(jfc::urma_rearm_jfc),
    wait_jfc: Some(jfc::urma_wait_jfc),
    ack_jfc: Some(jfc::urma_ack_jfc),
    ..OPS_NONE
};

/// The provider: its name is the device's driver name, by which the core matches the two.
static PROVIDER: urma_provider_ops_t = urma_provider_ops_t {
    name: c"loopback".as_ptr(),
    attr: u::urma_provider_attr_t {
        version: 1,
        transport_type: api::TRANSPORT,
    },
    init: Some(provider_init),
    uninit: Some(provider_uninit),
    create_context: Some(create_context),
    delete_context: Some(device::urma_delete_context),
    ..PROVIDER_OPS_NONE
};

const _: () = {
    // The provider name in the tables is the one the control plane's lookup and the docs use.
    let a = b"loopback";
    let b = names::PROVIDER_NAME.as_bytes();
    assert!(a.len() == b.len());
    let mut i = 0;
    while i < a.len() {
        assert!(a[i] == b[i]);
        i += 1;
    }
};

fn provider_ptr() -> *mut urma_provider_ops_t {
    ptr::from_ref(&PROVIDER).cast_mut()
}

fn ops_ptr() -> *mut urma_ops_t {
    ptr::from_ref(&OPS).cast_mut()
}

/// Whether this process made loopback0 (the plugin was enabled at `urma_init`).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Whether the process asked for the loopback: `URMA_LOOPBACK=1` ([`names::ENABLE_VAR`], read
/// through [`crate::util::env`], so never in a privileged process). Anything else leaves the
/// plugin inert; a value other than `0` or `1` is reported.
fn enabled() -> bool {
    match crate::util::env(names::ENABLE_VAR).as_deref() {
        Some("1") => true,
        None | Some("" | "0") => false,
        Some(v) => {
            log_alert(&format!(
                "{}={v}: not 0 or 1, the loopback stays off",
                names::ENABLE_VAR
            ));
            false
        }
    }
}

/// Registers the provider with the core while the core loads the plugin (ELF constructor).
extern "C" fn on_load() {
    guard((), || {
        // SAFETY: PROVIDER is a static table with a name, valid for the life of the plugin; the
        // destructor unregisters it before the plugin is unloaded.
        if unsafe { urma_register_provider_ops(provider_ptr()) } != 0 {
            log_alert("the URMA core refused to register the loopback provider");
        }
    })
}

/// Unregisters the provider when the plugin is unloaded (the core's `urma_uninit` unloads its
/// plugins without emptying its driver list, and a later `urma_init` would call a dangling
/// `init`).
extern "C" fn on_unload() {
    guard((), || {
        // SAFETY: the table registered by `on_load` (a table never registered is refused).
        unsafe { urma_unregister_provider_ops(provider_ptr()) };
    })
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

#[used]
#[link_section = ".fini_array"]
static ON_UNLOAD: extern "C" fn() = on_unload;

unsafe extern "C" fn provider_init(conf: *mut u::urma_init_attr_t) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        // Not asked for: nothing at all (the core keeps the driver, which has no device).
        if !enabled() {
            return u::URMA_SUCCESS;
        }
        // SAFETY: the core passes the application's urma_init argument: NULL or readable.
        unsafe { device::init(conf) };
        match register_device() {
            Ok(d) => {
                api::REGISTERED_DEVICE.store(d, Ordering::Release);
                ACTIVE.store(true, Ordering::Release);
                u::URMA_SUCCESS
            }
            Err(e) => {
                device::uninit();
                log_alert(&format!("loopback provider: no device {DEV_NAME}: {e}"));
                u::URMA_FAIL
            }
        }
    })
}

unsafe extern "C" fn provider_uninit() -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        if !ACTIVE.swap(false, Ordering::AcqRel) {
            return u::URMA_SUCCESS;
        }
        // The core frees the device right after this call.
        api::REGISTERED_DEVICE.store(ptr::null_mut(), Ordering::Release);
        if device::uninit() {
            u::URMA_SUCCESS
        } else {
            u::URMA_FAIL
        }
    })
}

/// The directory given to the core as loopback0's sysfs path: `<registry directory>/loopback0`
/// holding `eids/eid0` (the EID in text, as the core parses it), so that `urma_get_eid_list`
/// works without the preload helper. The core reads it whenever `urma_get_eid_list` falls back
/// to it (its ioctl unanswered), not only at registration, so it must outlive registration: it
/// is one directory per user in the registry directory ([`peer::Dir::open`]: made 0700, checked
/// to be the user's), shared by all the user's processes (the EID is the host's, the same for
/// all) and kept, so that a process ending without `urma_uninit` leaves nothing of its own.
fn sysfs_dir() -> Result<PathBuf, String> {
    let registry = peer::dir_path();
    peer::Dir::open(registry.clone())?;
    let dir = registry.join(DEV_NAME);
    let eids = dir.join("eids");
    let file = eids.join("eid0");
    // SAFETY: every member of the EID union is plain bytes of the same size.
    let text = format!("{}\n", std::net::Ipv6Addr::from(unsafe { api::eid().raw }));
    if std::fs::read_to_string(&file).ok().as_deref() == Some(text.as_str()) {
        return Ok(dir);
    }
    // Written beside and renamed over: a reader in another process sees the whole EID or none.
    let tmp = eids.join(format!(".eid0.{}", std::process::id()));
    std::fs::create_dir_all(&eids)
        .and_then(|_| std::fs::write(&tmp, &text))
        .and_then(|_| std::fs::rename(&tmp, &file))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("{}: {e}", file.display())
        })?;
    Ok(dir)
}

/// loopback0 made and registered with the core, checked after registration.
fn register_device() -> Result<*mut u::urma_device_t, String> {
    let layout = Layout::for_loaded_core(urma_register_sysfs_dev as *const c_void)
        .map_err(|e| e.to_string())?;
    let dir = sysfs_dir()?;
    let attr = device::device_attr();
    let spec = DeviceSpec {
        name: DEV_NAME,
        sysfs_path: &dir,
        driver_name: names::PROVIDER_NAME,
        transport_type: api::TRANSPORT,
        dev_attr: &attr,
        vendor_id: 0,
        device_id: 0,
    };
    let dev = NewDevice::build(layout, &spec).map_err(|e| e.to_string())?;
    // SAFETY: a complete structure of the loaded core's layout, from calloc; the core keeps it.
    let rc = unsafe { urma_register_sysfs_dev(dev.as_ptr()) };
    if rc != 0 {
        return Err(format!(
            "urma_register_sysfs_dev returned {rc} (a device of that name exists already?)"
        ));
    }
    // SAFETY: registration returned 0; the core calls the providers' init ops one at a time.
    unsafe { dev.registered(provider_ptr()) }
        .map(|d| d.as_ptr())
        .map_err(|e| e.to_string())
}

/// `create_context` of the provider: the core opened no device for a driver-created device
/// (`dev_fd` is -1) and overwrites the context's `dev_fd`, `eid_index`, `eid` (zero), `ref` and
/// `aggr_mode` after the call; the loopback keeps the EID itself and restores it on later calls
/// ([`crate::registry::get_ctx`]).
unsafe extern "C" fn create_context(
    dev: *mut u::urma_device_t,
    eid_index: u32,
    _dev_fd: c_int,
) -> *mut u::urma_context_t {
    api::entry(ptr::null_mut(), || {
        device::new_context(dev, eid_index, ops_ptr())
    })
}

/// Whether `name` is loopback0's name.
fn is_ours(name: *const c_char) -> bool {
    // SAFETY: a non-NULL name is a NUL-terminated string (the prototype).
    !name.is_null() && unsafe { CStr::from_ptr(name) }.to_bytes() == DEV_NAME.as_bytes()
}

/// Answers the core's device-attribute query for loopback0 (see `urma_loopback_ctl::plugin`).
#[no_mangle]
pub unsafe extern "C" fn urma_loopback_plugin_query_device(
    dev_name: *const c_char,
    attr: *mut u::urma_device_attr_t,
) -> c_int {
    guard(-1, || {
        if !is_ours(dev_name) || attr.is_null() {
            return -1;
        }
        // SAFETY: attr is non-NULL and points to a caller-owned urma_device_attr_t.
        unsafe { attr.write(device::device_attr()) };
        0
    })
}

/// Answers the core's EID-list query for loopback0 (see `urma_loopback_ctl::plugin`).
#[no_mangle]
pub unsafe extern "C" fn urma_loopback_plugin_eid_list(
    dev_name: *const c_char,
    list: *mut u::urma_eid_info_t,
    max: u32,
    cnt: *mut u32,
) -> c_int {
    guard(-1, || {
        if !is_ours(dev_name) || cnt.is_null() || (max > 0 && list.is_null()) {
            return -1;
        }
        let n = max.min(1);
        if n == 1 {
            // SAFETY: list holds at least one caller-owned entry (max >= 1, non-NULL).
            unsafe {
                list.write(u::urma_eid_info_t {
                    eid: api::eid(),
                    eid_index: 0,
                })
            };
        }
        // SAFETY: cnt is non-NULL and caller-owned.
        unsafe { cnt.write(n) };
        0
    })
}

const _: () = {
    // Each of the two exports has the type the control plane's binding declares for it.
    let _: names::QueryDeviceFn = urma_loopback_plugin_query_device;
    let _: names::EidListFn = urma_loopback_plugin_eid_list;
};
