//! The real `liburma.so.0` and the plain forwarders.
//!
//! The real library is the file named by `URMA_INTERPOSE_REAL`, loaded once with
//! `dlopen(RTLD_NOW | RTLD_GLOBAL | RTLD_DEEPBIND)`:
//! * by path: a second object with the SONAME `liburma.so.0` (the loader only matches SONAMEs
//!   for names without a slash), so every `NEEDED liburma.so.0` keeps binding to the layer,
//!   which was loaded first;
//! * `RTLD_DEEPBIND`: the real library's calls of its own exported functions stay inside it
//!   (they are not traced twice, or routed back through the layer);
//! * `RTLD_GLOBAL`: symbols the layer does not define (a provider's own extensions such as the
//!   loopback's `urma_loopback_*`, or internals that a provider plug-in linked against
//!   `liburma.so.0` expects) are still found in the global scope, after the layer.
//!
//! Without `URMA_INTERPOSE_REAL`, or when it cannot be loaded, every URMA function fails (status
//! `URMA_FAIL`, NULL, -1) and the reason is printed once on stderr.

// The prototype lists spell void results as `-> ()` (one macro form for every function).
#![allow(clippy::unused_unit)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

use urma_sys::*;

/// The variable naming the real library.
pub const REAL_ENV: &str = "URMA_INTERPOSE_REAL";

macro_rules! urma_api {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        /// The real library's functions (`None`: the symbol is missing there).
        pub struct Real {
            $( pub $name: Option<unsafe extern "C" fn($($ty),*) -> $ret>, )*
        }

        impl Real {
            fn resolve(h: *mut c_void) -> Real {
                Real {
                    $( $name: {
                        let p = sym(h, concat!(stringify!($name), "\0"));
                        if p.is_null() {
                            None
                        } else {
                            // SAFETY: p is the real liburma's symbol of this name, whose
                            // prototype is the URMA API's (checked against the bindings below).
                            Some(unsafe {
                                std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($ty),*) -> $ret>(p)
                            })
                        }
                    }, )*
                }
            }
        }

        /// Compile-time check: every prototype above is the committed bindings' one for this
        /// architecture (the fn item only coerces to a pointer of exactly its own type).
        #[allow(dead_code)]
        fn prototypes_match_bindings() {
            $( let _: unsafe extern "C" fn($($ty),*) -> $ret = urma_sys::$name; )*
        }
    };
}

urma_api! {
    urma_init(conf: *mut urma_init_attr_t) -> urma_status_t;
    urma_uninit() -> urma_status_t;
    urma_get_device_list(num_devices: *mut c_int) -> *mut *mut urma_device_t;
    urma_free_device_list(device_list: *mut *mut urma_device_t) -> ();
    urma_get_device_by_name(dev_name: *mut c_char) -> *mut urma_device_t;
    urma_get_eid_list(dev: *mut urma_device_t, cnt: *mut u32) -> *mut urma_eid_info_t;
    urma_free_eid_list(eid_list: *mut urma_eid_info_t) -> ();
    urma_query_device(dev: *mut urma_device_t, dev_attr: *mut urma_device_attr_t) -> urma_status_t;
    urma_create_context(dev: *mut urma_device_t, eid_index: u32) -> *mut urma_context_t;
    urma_delete_context(ctx: *mut urma_context_t) -> urma_status_t;
    urma_create_jfce(ctx: *mut urma_context_t) -> *mut urma_jfce_t;
    urma_delete_jfce(jfce: *mut urma_jfce_t) -> urma_status_t;
    urma_create_jfc(ctx: *mut urma_context_t, jfc_cfg: *mut urma_jfc_cfg_t) -> *mut urma_jfc_t;
    urma_delete_jfc(jfc: *mut urma_jfc_t) -> urma_status_t;
    urma_create_jfs(ctx: *mut urma_context_t, jfs_cfg: *mut urma_jfs_cfg_t) -> *mut urma_jfs_t;
    urma_delete_jfs(jfs: *mut urma_jfs_t) -> urma_status_t;
    urma_query_jfs(jfs: *mut urma_jfs_t, cfg: *mut urma_jfs_cfg_t, attr: *mut urma_jfs_attr_t) -> urma_status_t;
    urma_create_jfr(ctx: *mut urma_context_t, jfr_cfg: *mut urma_jfr_cfg_t) -> *mut urma_jfr_t;
    urma_delete_jfr(jfr: *mut urma_jfr_t) -> urma_status_t;
    urma_create_jetty(ctx: *mut urma_context_t, jetty_cfg: *mut urma_jetty_cfg_t) -> *mut urma_jetty_t;
    urma_delete_jetty(jetty: *mut urma_jetty_t) -> urma_status_t;
    urma_query_jetty(jetty: *mut urma_jetty_t, cfg: *mut urma_jetty_cfg_t, attr: *mut urma_jetty_attr_t) -> urma_status_t;
    urma_import_jetty(ctx: *mut urma_context_t, rjetty: *mut urma_rjetty_t, token_value: *mut urma_token_t) -> *mut urma_target_jetty_t;
    urma_unimport_jetty(tjetty: *mut urma_target_jetty_t) -> urma_status_t;
    urma_import_jfr(ctx: *mut urma_context_t, rjfr: *mut urma_rjfr_t, token_value: *mut urma_token_t) -> *mut urma_target_jetty_t;
    urma_unimport_jfr(target_jfr: *mut urma_target_jetty_t) -> urma_status_t;
    urma_advise_jfr(jfs: *mut urma_jfs_t, tjfr: *mut urma_target_jetty_t) -> urma_status_t;
    urma_unadvise_jfr(jfs: *mut urma_jfs_t, tjfr: *mut urma_target_jetty_t) -> urma_status_t;
    urma_advise_jetty(jetty: *mut urma_jetty_t, tjetty: *mut urma_target_jetty_t) -> urma_status_t;
    urma_unadvise_jetty(jetty: *mut urma_jetty_t, tjetty: *mut urma_target_jetty_t) -> urma_status_t;
    urma_bind_jetty(jetty: *mut urma_jetty_t, tjetty: *mut urma_target_jetty_t) -> urma_status_t;
    urma_unbind_jetty(jetty: *mut urma_jetty_t) -> urma_status_t;
    urma_alloc_token_id(ctx: *mut urma_context_t) -> *mut urma_token_id_t;
    urma_free_token_id(token_id: *mut urma_token_id_t) -> urma_status_t;
    urma_register_seg(ctx: *mut urma_context_t, seg_cfg: *mut urma_seg_cfg_t) -> *mut urma_target_seg_t;
    urma_unregister_seg(target_seg: *mut urma_target_seg_t) -> urma_status_t;
    urma_import_seg(ctx: *mut urma_context_t, seg: *mut urma_seg_t, token_value: *mut urma_token_t, addr: u64, flag: urma_import_seg_flag_t) -> *mut urma_target_seg_t;
    urma_unimport_seg(tseg: *mut urma_target_seg_t) -> urma_status_t;
    urma_post_jfs_wr(jfs: *mut urma_jfs_t, wr: *mut urma_jfs_wr_t, bad_wr: *mut *mut urma_jfs_wr_t) -> urma_status_t;
    urma_post_jfr_wr(jfr: *mut urma_jfr_t, wr: *mut urma_jfr_wr_t, bad_wr: *mut *mut urma_jfr_wr_t) -> urma_status_t;
    urma_post_jetty_send_wr(jetty: *mut urma_jetty_t, wr: *mut urma_jfs_wr_t, bad_wr: *mut *mut urma_jfs_wr_t) -> urma_status_t;
    urma_post_jetty_recv_wr(jetty: *mut urma_jetty_t, wr: *mut urma_jfr_wr_t, bad_wr: *mut *mut urma_jfr_wr_t) -> urma_status_t;
    urma_poll_jfc(jfc: *mut urma_jfc_t, cr_cnt: c_int, cr: *mut urma_cr_t) -> c_int;
    urma_rearm_jfc(jfc: *mut urma_jfc_t, solicited_only: bool) -> urma_status_t;
    urma_wait_jfc(jfce: *mut urma_jfce_t, jfc_cnt: u32, time_out: c_int, jfc: *mut *mut urma_jfc_t) -> c_int;
    urma_ack_jfc(jfc: *mut *mut urma_jfc_t, nevents: *mut u32, jfc_cnt: u32) -> ();
    urma_get_async_event(ctx: *mut urma_context_t, event: *mut urma_async_event_t) -> urma_status_t;
    urma_ack_async_event(event: *mut urma_async_event_t) -> ();
    urma_register_log_func(func: urma_log_cb_t) -> urma_status_t;
}

fn sym(h: *mut c_void, name: &str) -> *mut c_void {
    // SAFETY: h is a live dlopen handle; name is NUL-terminated (concat! above).
    unsafe { libc::dlsym(h, name.as_ptr() as *const c_char) }
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a valid C string owned by libc.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dl error".into()
    } else {
        // SAFETY: non-NULL, NUL-terminated.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn load() -> Result<Real, String> {
    let path = std::env::var(REAL_ENV).map_err(|_| {
        format!("{REAL_ENV} is not set: it must name the real liburma.so.0 (a path)")
    })?;
    if !path.contains('/') {
        return Err(format!(
            "{REAL_ENV}={path}: give a path (with a '/'); a bare name would find the layer itself"
        ));
    }
    let c = CString::new(path.clone()).map_err(|_| format!("{REAL_ENV}: NUL in the path"))?;
    // SAFETY: c is a valid C string; the flags are valid dlopen flags.
    let h = unsafe {
        libc::dlopen(
            c.as_ptr(),
            libc::RTLD_NOW | libc::RTLD_GLOBAL | libc::RTLD_DEEPBIND,
        )
    };
    if h.is_null() {
        return Err(format!("{REAL_ENV}={path}: dlopen: {}", dlerror()));
    }
    let real = Real::resolve(h);
    // The layer's own forwarder found in the loaded library: that library is the layer.
    let own = urma_init as *const c_void;
    if real.urma_init.map(|f| f as *const c_void) == Some(own) {
        return Err(format!(
            "{REAL_ENV}={path} is the interposition layer itself, not a provider library"
        ));
    }
    Ok(real)
}

/// The real library, loaded on first use (normally by the load-time constructor).
pub fn real() -> Option<&'static Real> {
    static REAL: OnceLock<Result<Real, String>> = OnceLock::new();
    REAL.get_or_init(|| {
        let r = load();
        if let Err(e) = &r {
            crate::say!("urma-interpose: {e}; every URMA call fails");
        }
        r
    })
    .as_ref()
    .ok()
}

/// Reports a function missing from the real library (once per name is enough for a user to act;
/// calls are rare enough on that path that printing each time is acceptable).
pub fn missing(name: &str) {
    if real().is_some() {
        crate::say!("urma-interpose: {name} is missing from the real library");
    }
}

/// Calls the real function `$name` with the arguments, or returns `$fail` from the enclosing
/// closure when it is not available.
macro_rules! call_real {
    ($name:ident, $fail:expr $(, $a:expr)*) => {
        match $crate::real::real().and_then(|r| r.$name) {
            // SAFETY: the real library's function of this name and prototype, called with the
            // caller's arguments (the caller's contract is the real function's).
            Some(f) => unsafe { f($($a),*) },
            None => {
                $crate::real::missing(stringify!($name));
                return $fail;
            }
        }
    };
}
pub(crate) use call_real;

macro_rules! forward {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty = $fail:expr ; )*) => { $(
        /// Forwarded unchanged to the real library.
        ///
        /// # Safety
        /// The URMA API contract of this function.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            crate::guard($fail, || call_real!($name, $fail $(, $arg)*))
        }
    )* };
}

const NULL_DEVS: *mut *mut urma_device_t = std::ptr::null_mut();

forward! {
    urma_init(conf: *mut urma_init_attr_t) -> urma_status_t = URMA_FAIL;
    urma_uninit() -> urma_status_t = URMA_FAIL;
    urma_get_device_list(num_devices: *mut c_int) -> *mut *mut urma_device_t = NULL_DEVS;
    urma_free_device_list(device_list: *mut *mut urma_device_t) -> () = ();
    urma_get_device_by_name(dev_name: *mut c_char) -> *mut urma_device_t = std::ptr::null_mut();
    urma_get_eid_list(dev: *mut urma_device_t, cnt: *mut u32) -> *mut urma_eid_info_t = std::ptr::null_mut();
    urma_free_eid_list(eid_list: *mut urma_eid_info_t) -> () = ();
    urma_query_device(dev: *mut urma_device_t, dev_attr: *mut urma_device_attr_t) -> urma_status_t = URMA_FAIL;
    urma_create_context(dev: *mut urma_device_t, eid_index: u32) -> *mut urma_context_t = std::ptr::null_mut();
    urma_delete_context(ctx: *mut urma_context_t) -> urma_status_t = URMA_FAIL;
    urma_create_jfce(ctx: *mut urma_context_t) -> *mut urma_jfce_t = std::ptr::null_mut();
    urma_delete_jfce(jfce: *mut urma_jfce_t) -> urma_status_t = URMA_FAIL;
    urma_query_jfs(jfs: *mut urma_jfs_t, cfg: *mut urma_jfs_cfg_t, attr: *mut urma_jfs_attr_t) -> urma_status_t = URMA_FAIL;
    urma_query_jetty(jetty: *mut urma_jetty_t, cfg: *mut urma_jetty_cfg_t, attr: *mut urma_jetty_attr_t) -> urma_status_t = URMA_FAIL;
    urma_advise_jfr(jfs: *mut urma_jfs_t, tjfr: *mut urma_target_jetty_t) -> urma_status_t = URMA_FAIL;
    urma_unadvise_jfr(jfs: *mut urma_jfs_t, tjfr: *mut urma_target_jetty_t) -> urma_status_t = URMA_FAIL;
    urma_advise_jetty(jetty: *mut urma_jetty_t, tjetty: *mut urma_target_jetty_t) -> urma_status_t = URMA_FAIL;
    urma_unadvise_jetty(jetty: *mut urma_jetty_t, tjetty: *mut urma_target_jetty_t) -> urma_status_t = URMA_FAIL;
    urma_bind_jetty(jetty: *mut urma_jetty_t, tjetty: *mut urma_target_jetty_t) -> urma_status_t = URMA_FAIL;
    urma_unbind_jetty(jetty: *mut urma_jetty_t) -> urma_status_t = URMA_FAIL;
    urma_alloc_token_id(ctx: *mut urma_context_t) -> *mut urma_token_id_t = std::ptr::null_mut();
    urma_free_token_id(token_id: *mut urma_token_id_t) -> urma_status_t = URMA_FAIL;
    urma_rearm_jfc(jfc: *mut urma_jfc_t, solicited_only: bool) -> urma_status_t = URMA_FAIL;
    urma_get_async_event(ctx: *mut urma_context_t, event: *mut urma_async_event_t) -> urma_status_t = URMA_FAIL;
    urma_ack_async_event(event: *mut urma_async_event_t) -> () = ();
    urma_register_log_func(func: urma_log_cb_t) -> urma_status_t = URMA_FAIL;
}
