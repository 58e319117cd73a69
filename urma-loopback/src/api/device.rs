//! `urma_init` / `urma_uninit`, the device and EID lists, device queries, contexts.

use super::*;

#[cfg(feature = "ctl")]
static ENV_ONCE: std::sync::Once = std::sync::Once::new();

// The genuine core implements this one itself in the plugin face.
#[cfg(not(feature = "plugin"))]
#[no_mangle]
pub unsafe extern "C" fn urma_init(conf: *mut u::urma_init_attr_t) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
        // SAFETY: conf is NULL or points to a caller-owned urma_init_attr_t (the prototype).
        unsafe { init(conf) };
        u::URMA_SUCCESS
    })
}

/// What `urma_init` does, in both faces (the plugin's `init` op gets the application's `conf`):
/// the control plane's environment once, the uasid asked for, one more initialisation.
///
/// # Safety
/// `conf` is NULL or points to a readable `urma_init_attr_t`.
pub(crate) unsafe fn init(conf: *const u::urma_init_attr_t) {
    #[cfg(feature = "ctl")]
    ENV_ONCE.call_once(crate::ctl::apply_env);
    if !conf.is_null() {
        // SAFETY: non-NULL conf is readable (the caller's promise).
        let uasid = unsafe { (*conf).uasid };
        reg::UASID.store(uasid, Ordering::Release);
    }
    reg::INIT_COUNT.fetch_add(1, Ordering::AcqRel);
}

/// What `urma_uninit` does, in both faces: one initialisation less; false if there was none.
pub(crate) fn uninit() -> bool {
    reg::INIT_COUNT
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| v.checked_sub(1))
        .is_ok()
}

// The genuine core implements this one itself in the plugin face.
#[cfg(not(feature = "plugin"))]
#[no_mangle]
pub extern "C" fn urma_uninit() -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
        if uninit() {
            u::URMA_SUCCESS
        } else {
            log_err("urma_uninit without urma_init");
            u::URMA_FAIL
        }
    })
}

// The genuine core implements this one itself in the plugin face.
#[cfg(not(feature = "plugin"))]
#[no_mangle]
pub unsafe extern "C" fn urma_register_log_func(func: u::urma_log_cb_t) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
        if func.is_none() {
            return u::URMA_EINVAL;
        }
        set_log_func(func);
        u::URMA_SUCCESS
    })
}

// The genuine core implements this one itself in the plugin face.
#[cfg(not(feature = "plugin"))]
#[no_mangle]
pub unsafe extern "C" fn urma_get_device_list(
    num_devices: *mut c_int,
) -> *mut *mut u::urma_device_t {
    entry(std::ptr::null_mut(), || {
        if num_devices.is_null() {
            return null("urma_get_device_list");
        }
        if !initialized() {
            // SAFETY: non-NULL out pointer.
            unsafe { *num_devices = 0 };
            return null("urma_get_device_list before urma_init");
        }
        // SAFETY: calloc of 2 pointers, checked.
        let list = unsafe { libc::calloc(2, std::mem::size_of::<*mut u::urma_device_t>()) }
            as *mut *mut u::urma_device_t;
        if list.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: list has 2 slots; slot 1 stays NULL (terminator).
        unsafe {
            *list = device_ptr();
            *num_devices = 1;
        }
        reg::insert(list as usize, Obj::DevList);
        list
    })
}

// The genuine core implements this one itself in the plugin face.
#[cfg(not(feature = "plugin"))]
#[no_mangle]
pub unsafe extern "C" fn urma_free_device_list(device_list: *mut *mut u::urma_device_t) {
    entry((), || {
        if device_list.is_null() {
            return;
        }
        if reg::with_reg_mut(|r| match r.objs.get(&(device_list as usize)) {
            Some(Obj::DevList) => r.objs.remove(&(device_list as usize)).is_some(),
            _ => false,
        }) {
            // SAFETY: the list was calloc'd by urma_get_device_list and is freed once.
            unsafe { libc::free(device_list as *mut libc::c_void) };
        } else {
            log_err("urma_free_device_list: unknown list");
        }
    })
}

// The genuine core implements this one itself in the plugin face.
#[cfg(not(feature = "plugin"))]
#[no_mangle]
pub unsafe extern "C" fn urma_get_device_by_name(dev_name: *mut c_char) -> *mut u::urma_device_t {
    entry(std::ptr::null_mut(), || {
        if dev_name.is_null() || !initialized() {
            return null("urma_get_device_by_name");
        }
        // SAFETY: non-NULL NUL-terminated string per the prototype.
        let name = unsafe { CStr::from_ptr(dev_name) };
        if name.to_bytes() == DEV_NAME.as_bytes() {
            device_ptr()
        } else {
            null("urma_get_device_by_name: no such device")
        }
    })
}

// The genuine core implements this one itself in the plugin face.
#[cfg(not(feature = "plugin"))]
#[no_mangle]
pub unsafe extern "C" fn urma_get_eid_list(
    dev: *mut u::urma_device_t,
    cnt: *mut u32,
) -> *mut u::urma_eid_info_t {
    entry(std::ptr::null_mut(), || {
        if !dev_ok(dev) || cnt.is_null() {
            return null("urma_get_eid_list");
        }
        // SAFETY: calloc of one element, checked.
        let list = unsafe { libc::calloc(1, std::mem::size_of::<u::urma_eid_info_t>()) }
            as *mut u::urma_eid_info_t;
        if list.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: list has one zeroed element; cnt is non-NULL.
        unsafe {
            (*list).eid = eid();
            (*list).eid_index = 0;
            *cnt = 1;
        }
        reg::insert(list as usize, Obj::EidList);
        list
    })
}

// The genuine core implements this one itself in the plugin face.
#[cfg(not(feature = "plugin"))]
#[no_mangle]
pub unsafe extern "C" fn urma_free_eid_list(eid_list: *mut u::urma_eid_info_t) {
    entry((), || {
        if eid_list.is_null() {
            return;
        }
        if reg::with_reg_mut(|r| match r.objs.get(&(eid_list as usize)) {
            Some(Obj::EidList) => r.objs.remove(&(eid_list as usize)).is_some(),
            _ => false,
        }) {
            // SAFETY: calloc'd by urma_get_eid_list, freed once.
            unsafe { libc::free(eid_list as *mut libc::c_void) };
        } else {
            log_err("urma_free_eid_list: unknown list");
        }
    })
}

// The genuine core implements this one itself in the plugin face.
#[cfg(not(feature = "plugin"))]
#[no_mangle]
pub unsafe extern "C" fn urma_query_device(
    dev: *mut u::urma_device_t,
    dev_attr: *mut u::urma_device_attr_t,
) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
        if !dev_ok(dev) || dev_attr.is_null() {
            return einval("urma_query_device");
        }
        // SAFETY: dev_attr is non-NULL and points to a caller-owned urma_device_attr_t.
        unsafe { dev_attr.write(device_attr()) };
        u::URMA_SUCCESS
    })
}

/// loopback0's attributes: what `urma_query_device` returns, and in the plugin face what the
/// device is registered with and what the preload helper answers the core's query with.
pub(crate) fn device_attr() -> u::urma_device_attr_t {
    {
        let mut a: u::urma_device_attr_t = zeroed();
        // SAFETY: every member of the EID union is plain bytes of the same size.
        a.guid.raw = unsafe { eid().raw };
        let c = &mut a.dev_cap;
        c.feature.value = flags::DEVICE_FEATURE_JFC_PER_WR | flags::DEVICE_FEATURE_OUTORDER_COMP;
        c.max_jfc = 1 << 16;
        c.max_jfs = 1 << 16;
        c.max_jfr = 1 << 16;
        c.max_jetty = 1 << 16;
        c.max_jetty_grp = 0;
        c.max_jetty_in_jetty_grp = 0;
        c.max_jfc_depth = MAX_DEPTH;
        c.max_jfs_depth = MAX_DEPTH;
        c.max_jfr_depth = MAX_DEPTH;
        c.max_jfs_inline_len = 0;
        c.max_jfs_sge = MAX_SGE;
        c.max_jfs_rsge = MAX_SGE;
        c.max_jfr_sge = MAX_SGE;
        c.max_msg_size = MAX_MSG as u64;
        c.max_read_size = MAX_MSG;
        c.max_write_size = MAX_MSG;
        c.trans_mode = (u::URMA_TM_RM | u::URMA_TM_RC | u::URMA_TM_UM) as u16;
        c.ceq_cnt = 1;
        c.max_eid_cnt = 1;
        c.page_size_cap = 4096;
        a.port_cnt = 1;
        a.port_attr[0].max_mtu = u::URMA_MTU_4096;
        a.port_attr[0].state = u::URMA_PORT_ACTIVE;
        a.port_attr[0].active_mtu = u::URMA_MTU_4096;
        a
    }
}

// ------------------------------------------------------------------ context

// The genuine core implements this one itself in the plugin face.
#[cfg(not(feature = "plugin"))]
#[no_mangle]
pub unsafe extern "C" fn urma_create_context(
    dev: *mut u::urma_device_t,
    eid_index: u32,
) -> *mut u::urma_context_t {
    entry(std::ptr::null_mut(), || {
        new_context(dev, eid_index, std::ptr::null_mut())
    })
}

/// A context of loopback0 with the per-context ops table `ops` (NULL in the standalone face,
/// where the library's exports are the operations), or NULL.
pub(crate) fn new_context(
    dev: *mut u::urma_device_t,
    eid_index: u32,
    ops: *mut u::urma_ops_t,
) -> *mut u::urma_context_t {
    {
        if !initialized() || !dev_ok(dev) || eid_index != 0 {
            return null("urma_create_context");
        }
        let mut c: u::urma_context_t = zeroed();
        c.dev = dev;
        c.ops = ops;
        c.dev_fd = -1;
        c.async_fd = -1;
        c.eid = eid();
        c.eid_index = 0;
        // The host-unique uasid of this process (its multi-process slot), or, when the process
        // cannot join the host, the one given to urma_init as before.
        let want = reg::UASID.load(Ordering::Acquire);
        c.uasid = crate::xproc::join(want).unwrap_or(want);
        let ctx = Arc::new(Ctx {
            c: CBox::new(c),
            uasid: c.uasid,
            eid: eid(),
            users: AtomicU64::new(0),
        });
        let p = ctx.c.ptr();
        next_name(Kind::Ctx);
        reg::insert(p as usize, Obj::Ctx(ctx));
        p
    }
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_delete_context(ctx: *mut u::urma_context_t) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
        let Some(c) = get_ctx(ctx) else {
            return einval("urma_delete_context");
        };
        if c.users.load(Ordering::Acquire) > 0 {
            log_err("urma_delete_context: objects still alive on this context");
            return u::URMA_FAIL;
        }
        reg::remove(c.c.key());
        crate::events::forget_context(c.c.key());
        u::URMA_SUCCESS
    })
}

// ------------------------------------------------------------------ async events

/// Non-blocking: returns the oldest queued event of `ctx`, or `URMA_EAGAIN` when none is queued
/// (the loopback has no async fd to block on).
#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_get_async_event(
    ctx: *mut u::urma_context_t,
    event: *mut u::urma_async_event_t,
) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
        if get_ctx(ctx).is_none() || event.is_null() {
            return einval("urma_get_async_event");
        }
        let ev = crate::events::take(ctx as usize);
        let Some(ev) = ev else { return u::URMA_EAGAIN };
        let mut e: u::urma_async_event_t = zeroed();
        e.urma_ctx = ctx;
        e.element.jfc = ev.element as *mut u::urma_jfc_t;
        e.event_type = ev.ty;
        // SAFETY: event is non-NULL and caller-owned.
        unsafe { event.write(e) };
        u::URMA_SUCCESS
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_ack_async_event(event: *mut u::urma_async_event_t) {
    entry((), || {
        if event.is_null() {
            log_err("urma_ack_async_event: NULL event");
        }
    })
}
