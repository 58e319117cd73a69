//! The 49 exported URMA functions (prototypes exactly as in `urma_api.h`).
//!
//! Every export runs behind a panic boundary ([`guard`]) and checks each handle against the
//! registry first: NULL, unknown or deleted handles give `URMA_EINVAL` (status functions),
//! NULL (pointer functions), -1 (int functions) or nothing (void functions).

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once};
use std::time::Duration;

use urma_sys as u;
use urma_sys::flags;

use crate::datapath;
use crate::knobs;
use crate::queues::{EvState, Jfc, Jfce, RecvQ};
use crate::registry::{
    self as reg, get_ctx, get_jetty, get_jfc, get_jfce, get_jfr, get_jfs, get_tjetty, get_token_id,
    initialized, next_id, next_name, CBox, Ctx, ISeg, Jetty, Jfr, Jfs, Kind, Obj, Seg, SendQ,
    TJetty, Target, TokenIdObj,
};
use crate::trace;
use crate::util::{guard, lock, log_err, set_log_func, zeroed};

/// Device name.
pub const DEV_NAME: &str = "loopback0";
/// Largest depth accepted for JFC/JFS/JFR/jetty queues.
pub const MAX_DEPTH: u32 = 1 << 20;
/// Largest SGE count per WR.
pub const MAX_SGE: u32 = 16;
/// Largest message.
pub const MAX_MSG: u32 = u32::MAX;

/// The single EID of loopback0: ::ffff:127.0.0.1.
pub fn eid() -> u::urma_eid_t {
    let mut e: u::urma_eid_t = zeroed();
    let raw = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1];
    e.raw = raw;
    e
}

struct Device(CBox<u::urma_device_t>);

fn device() -> &'static Device {
    static DEV: std::sync::OnceLock<Device> = std::sync::OnceLock::new();
    DEV.get_or_init(|| {
        let mut d: u::urma_device_t = zeroed();
        for (i, b) in DEV_NAME.bytes().enumerate() {
            d.name[i] = b as c_char;
        }
        let path = format!("/sys/class/ubcore/{DEV_NAME}");
        for (i, b) in path.bytes().enumerate() {
            d.path[i] = b as c_char;
        }
        d.type_ = u::URMA_TRANSPORT_UB;
        Device(CBox::new(d))
    })
}

fn dev_ok(dev: *const u::urma_device_t) -> bool {
    !dev.is_null() && std::ptr::eq(dev, device().0.ptr())
}

fn einval(what: &str) -> u::urma_status_t {
    log_err(&format!("{what}: invalid argument"));
    u::URMA_EINVAL
}

fn null<T>(what: &str) -> *mut T {
    log_err(&format!("{what}: invalid argument"));
    std::ptr::null_mut()
}

// ------------------------------------------------------------------ init / device

static ENV_ONCE: Once = Once::new();

#[no_mangle]
pub unsafe extern "C" fn urma_init(conf: *mut u::urma_init_attr_t) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        ENV_ONCE.call_once(crate::ctl::apply_env);
        if !conf.is_null() {
            // SAFETY: non-NULL conf points to a caller-owned urma_init_attr_t.
            let uasid = unsafe { (*conf).uasid };
            reg::UASID.store(uasid, Ordering::Release);
        }
        reg::INIT_COUNT.fetch_add(1, Ordering::AcqRel);
        u::URMA_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn urma_uninit() -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let r =
            reg::INIT_COUNT.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| v.checked_sub(1));
        if r.is_ok() {
            u::URMA_SUCCESS
        } else {
            log_err("urma_uninit without urma_init");
            u::URMA_FAIL
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_register_log_func(func: u::urma_log_cb_t) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        if func.is_none() {
            return u::URMA_EINVAL;
        }
        set_log_func(func);
        u::URMA_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_get_device_list(
    num_devices: *mut c_int,
) -> *mut *mut u::urma_device_t {
    guard(std::ptr::null_mut(), || {
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
            *list = device().0.ptr();
            *num_devices = 1;
        }
        reg::insert(list as usize, Obj::DevList);
        list
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_free_device_list(device_list: *mut *mut u::urma_device_t) {
    guard((), || {
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

#[no_mangle]
pub unsafe extern "C" fn urma_get_device_by_name(dev_name: *mut c_char) -> *mut u::urma_device_t {
    guard(std::ptr::null_mut(), || {
        if dev_name.is_null() || !initialized() {
            return null("urma_get_device_by_name");
        }
        // SAFETY: non-NULL NUL-terminated string per the prototype.
        let name = unsafe { CStr::from_ptr(dev_name) };
        if name.to_bytes() == DEV_NAME.as_bytes() {
            device().0.ptr()
        } else {
            null("urma_get_device_by_name: no such device")
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_get_eid_list(
    dev: *mut u::urma_device_t,
    cnt: *mut u32,
) -> *mut u::urma_eid_info_t {
    guard(std::ptr::null_mut(), || {
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

#[no_mangle]
pub unsafe extern "C" fn urma_free_eid_list(eid_list: *mut u::urma_eid_info_t) {
    guard((), || {
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

#[no_mangle]
pub unsafe extern "C" fn urma_query_device(
    dev: *mut u::urma_device_t,
    dev_attr: *mut u::urma_device_attr_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        if !dev_ok(dev) || dev_attr.is_null() {
            return einval("urma_query_device");
        }
        let mut a: u::urma_device_attr_t = zeroed();
        a.guid.raw = eid().raw;
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
        // SAFETY: dev_attr is non-NULL and points to a caller-owned urma_device_attr_t.
        unsafe { dev_attr.write(a) };
        u::URMA_SUCCESS
    })
}

// ------------------------------------------------------------------ context

#[no_mangle]
pub unsafe extern "C" fn urma_create_context(
    dev: *mut u::urma_device_t,
    eid_index: u32,
) -> *mut u::urma_context_t {
    guard(std::ptr::null_mut(), || {
        if !initialized() || !dev_ok(dev) || eid_index != 0 {
            return null("urma_create_context");
        }
        let mut c: u::urma_context_t = zeroed();
        c.dev = dev;
        c.dev_fd = -1;
        c.async_fd = -1;
        c.eid = eid();
        c.eid_index = 0;
        c.uasid = reg::UASID.load(Ordering::Acquire);
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
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_delete_context(ctx: *mut u::urma_context_t) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let Some(c) = get_ctx(ctx) else {
            return einval("urma_delete_context");
        };
        if c.users.load(Ordering::Acquire) > 0 {
            log_err("urma_delete_context: objects still alive on this context");
            return u::URMA_FAIL;
        }
        reg::remove(c.c.key());
        lock(&ASYNC).retain(|e| e.ctx != c.c.key());
        u::URMA_SUCCESS
    })
}

// ------------------------------------------------------------------ async events

struct AsyncEv {
    ctx: usize,
    ty: u32,
    element: usize,
}

static ASYNC: Mutex<VecDeque<AsyncEv>> = Mutex::new(VecDeque::new());

/// Queues an async event for `urma_get_async_event` (used on JFC overflow).
pub fn queue_async_event(ctx: &Ctx, ty: u32, element: usize) {
    lock(&ASYNC).push_back(AsyncEv {
        ctx: ctx.c.key(),
        ty,
        element,
    });
}

/// Non-blocking: returns the oldest queued event of `ctx`, or `URMA_EAGAIN` when none is queued
/// (the loopback has no async fd to block on).
#[no_mangle]
pub unsafe extern "C" fn urma_get_async_event(
    ctx: *mut u::urma_context_t,
    event: *mut u::urma_async_event_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        if get_ctx(ctx).is_none() || event.is_null() {
            return einval("urma_get_async_event");
        }
        let ev = {
            let mut q = lock(&ASYNC);
            let pos = q.iter().position(|e| e.ctx == ctx as usize);
            pos.and_then(|i| q.remove(i))
        };
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

#[no_mangle]
pub unsafe extern "C" fn urma_ack_async_event(event: *mut u::urma_async_event_t) {
    guard((), || {
        if event.is_null() {
            log_err("urma_ack_async_event: NULL event");
        }
    })
}

// ------------------------------------------------------------------ JFCE / JFC

#[no_mangle]
pub unsafe extern "C" fn urma_create_jfce(ctx: *mut u::urma_context_t) -> *mut u::urma_jfce_t {
    guard(std::ptr::null_mut(), || {
        let Some(c) = get_ctx(ctx) else {
            return null("urma_create_jfce");
        };
        let Some(fd) = Jfce::new_fd() else {
            return null("urma_create_jfce: eventfd");
        };
        let mut j: u::urma_jfce_t = zeroed();
        j.urma_ctx = ctx;
        j.fd = fd;
        let jfce = Arc::new(Jfce {
            c: CBox::new(j),
            name: next_name(Kind::Jfce),
            efd: fd,
            pending: Mutex::new(VecDeque::new()),
            users: AtomicU64::new(0),
            ctx: c.clone(),
        });
        c.users.fetch_add(1, Ordering::AcqRel);
        let p = jfce.c.ptr();
        reg::insert(p as usize, Obj::Jfce(jfce));
        p
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_delete_jfce(jfce: *mut u::urma_jfce_t) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let Some(j) = get_jfce(jfce) else {
            return einval("urma_delete_jfce");
        };
        if j.users.load(Ordering::Acquire) > 0 {
            log_err("urma_delete_jfce: JFCs still use this JFCE");
            return u::URMA_FAIL;
        }
        reg::remove(j.c.key());
        j.ctx.users.fetch_sub(1, Ordering::AcqRel);
        u::URMA_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_create_jfc(
    ctx: *mut u::urma_context_t,
    jfc_cfg: *mut u::urma_jfc_cfg_t,
) -> *mut u::urma_jfc_t {
    guard(std::ptr::null_mut(), || {
        let Some(c) = get_ctx(ctx) else {
            return null("urma_create_jfc");
        };
        if jfc_cfg.is_null() {
            return null("urma_create_jfc: NULL cfg");
        }
        // SAFETY: non-NULL caller-owned cfg.
        let cfg = unsafe { *jfc_cfg };
        if cfg.depth == 0 || cfg.depth > MAX_DEPTH {
            return null("urma_create_jfc: bad depth");
        }
        let jfce = if cfg.jfce.is_null() {
            None
        } else {
            match get_jfce(cfg.jfce) {
                Some(j) => Some(j),
                None => return null("urma_create_jfc: unknown jfce"),
            }
        };
        let id = next_id(Kind::Jfc);
        let mut j: u::urma_jfc_t = zeroed();
        j.urma_ctx = ctx;
        j.jfc_id.eid = c.eid;
        j.jfc_id.uasid = c.uasid;
        j.jfc_id.id = id;
        j.jfc_cfg = cfg;
        j.handle = id as u64;
        // SAFETY: the flag union is a plain u32.
        let non_blocking = unsafe { cfg.flag.value } & flags::JFC_FLAG_NON_BLOCKING != 0;
        let jfc = Arc::new(Jfc {
            c: CBox::new(j),
            name: next_name(Kind::Jfc),
            id,
            depth: cfg.depth,
            non_blocking,
            jfce: jfce.clone(),
            q: Mutex::new(VecDeque::new()),
            queued: AtomicUsize::new(0),
            armed_hint: AtomicBool::new(false),
            overflow: AtomicU64::new(0),
            ev: Mutex::new(EvState::default()),
            ev_cv: Condvar::new(),
            users: AtomicU64::new(0),
            alive: AtomicBool::new(true),
            ctx: c.clone(),
        });
        if let Some(e) = &jfce {
            e.users.fetch_add(1, Ordering::AcqRel);
        }
        c.users.fetch_add(1, Ordering::AcqRel);
        let p = jfc.c.ptr();
        reg::insert(p as usize, Obj::Jfc(jfc));
        p
    })
}

/// Deletes a JFC. Fails with `URMA_FAIL` while JFS/JFR/jetties still use it. While completion
/// events returned by `urma_wait_jfc` are unacknowledged it returns `URMA_EAGAIN` at once when
/// `jfc_cfg.flag.bs.non_blocking` is set, and otherwise waits for the acks for at most the delete
/// timeout (default 2000 ms, `urma_loopback_set_delete_timeout`) before returning `URMA_EAGAIN`
/// (the JFC then stays alive and the call may be retried).
#[no_mangle]
pub unsafe extern "C" fn urma_delete_jfc(jfc: *mut u::urma_jfc_t) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let Some(j) = get_jfc(jfc) else {
            return einval("urma_delete_jfc");
        };
        if j.users.load(Ordering::Acquire) > 0 {
            log_err("urma_delete_jfc: JFS/JFR/jetty still use this JFC");
            return u::URMA_FAIL;
        }
        if j.unacked() {
            if j.non_blocking {
                return u::URMA_EAGAIN;
            }
            let t = knobs::DELETE_TIMEOUT_MS.load(Ordering::Acquire);
            if !j.wait_acked(Duration::from_millis(t)) {
                log_err("urma_delete_jfc: completion events still unacked");
                return u::URMA_EAGAIN;
            }
        }
        if reg::remove(j.c.key()).is_none() {
            return einval("urma_delete_jfc");
        }
        j.alive.store(false, Ordering::Release);
        if let Some(e) = &j.jfce {
            e.purge(j.c.key());
            e.users.fetch_sub(1, Ordering::AcqRel);
        }
        j.ctx.users.fetch_sub(1, Ordering::AcqRel);
        u::URMA_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_poll_jfc(
    jfc: *mut u::urma_jfc_t,
    cr_cnt: c_int,
    cr: *mut u::urma_cr_t,
) -> c_int {
    guard(-1, || {
        reg::with_jfc(jfc, |j| {
            let Some(j) = j else {
                log_err("urma_poll_jfc: invalid jfc");
                return -1;
            };
            if cr_cnt < 0 || (cr_cnt > 0 && cr.is_null()) {
                return -1;
            }
            if cr_cnt == 0 {
                return 0;
            }
            // SAFETY: cr has room for cr_cnt CRs (caller contract).
            unsafe { datapath::poll(j, cr_cnt as usize, cr) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_rearm_jfc(
    jfc: *mut u::urma_jfc_t,
    solicited_only: bool,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let Some(j) = get_jfc(jfc) else {
            return einval("urma_rearm_jfc");
        };
        j.rearm(solicited_only);
        u::URMA_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_wait_jfc(
    jfce: *mut u::urma_jfce_t,
    jfc_cnt: u32,
    time_out: c_int,
    jfc: *mut *mut u::urma_jfc_t,
) -> c_int {
    guard(-1, || {
        let Some(e) = get_jfce(jfce) else {
            log_err("urma_wait_jfc: invalid jfce");
            return -1;
        };
        if jfc.is_null() || jfc_cnt == 0 {
            return -1;
        }
        let got = e.wait(jfc_cnt as usize, time_out);
        for (i, j) in got.iter().enumerate() {
            // SAFETY: i < jfc_cnt; jfc has room for jfc_cnt handles.
            unsafe { *jfc.add(i) = j.c.ptr() };
        }
        got.len() as c_int
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_ack_jfc(
    jfc: *mut *mut u::urma_jfc_t,
    nevents: *mut u32,
    jfc_cnt: u32,
) {
    guard((), || {
        if jfc.is_null() || nevents.is_null() {
            log_err("urma_ack_jfc: NULL array");
            return;
        }
        for i in 0..jfc_cnt as usize {
            // SAFETY: both arrays have jfc_cnt entries (caller contract).
            let (p, n) = unsafe { (*jfc.add(i), *nevents.add(i)) };
            if p.is_null() || n == 0 {
                continue;
            }
            match get_jfc(p) {
                Some(j) => j.ack(n),
                None => log_err("urma_ack_jfc: invalid jfc"),
            }
        }
    })
}

// ------------------------------------------------------------------ JFS / JFR / jetty

fn sge_limit(v: u8) -> Option<u32> {
    match v as u32 {
        0 => Some(MAX_SGE),
        n if n <= MAX_SGE => Some(n),
        _ => None,
    }
}

/// Allocates a jetty/JFS/JFR id (one id space for the three kinds, so `cr.remote_id.id` is
/// unambiguous); `want` != 0 asks for that id. Ids are never reused within a process.
fn alloc_qid(want: u32) -> Option<u32> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    static USED: Mutex<Option<std::collections::HashSet<u32>>> = Mutex::new(None);
    let mut g = lock(&USED);
    let used = g.get_or_insert_with(Default::default);
    if want != 0 {
        return used.insert(want).then_some(want);
    }
    loop {
        let id = NEXT.fetch_add(1, Ordering::Relaxed) as u32;
        if id != 0 && used.insert(id) {
            return Some(id);
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn urma_create_jfs(
    ctx: *mut u::urma_context_t,
    jfs_cfg: *mut u::urma_jfs_cfg_t,
) -> *mut u::urma_jfs_t {
    guard(std::ptr::null_mut(), || {
        let Some(c) = get_ctx(ctx) else {
            return null("urma_create_jfs");
        };
        if jfs_cfg.is_null() {
            return null("urma_create_jfs: NULL cfg");
        }
        // SAFETY: non-NULL caller-owned cfg.
        let cfg = unsafe { *jfs_cfg };
        let Some(jfc) = get_jfc(cfg.jfc) else {
            return null("urma_create_jfs: invalid jfc");
        };
        let Some(max_sge) = sge_limit(cfg.max_sge) else {
            return null("urma_create_jfs: max_sge");
        };
        if cfg.depth == 0 || cfg.depth > MAX_DEPTH {
            return null("urma_create_jfs: bad depth");
        }
        let Some(id) = alloc_qid(0) else {
            return null("urma_create_jfs: id");
        };
        let mut j: u::urma_jfs_t = zeroed();
        j.urma_ctx = ctx;
        j.jfs_id.eid = c.eid;
        j.jfs_id.uasid = c.uasid;
        j.jfs_id.id = id;
        j.jfs_cfg = cfg;
        j.handle = id as u64;
        let cb = CBox::new(j);
        let name = next_name(Kind::Jfs);
        trace::name_qid(id, &name);
        let jfs = Arc::new(Jfs {
            sq: SendQ {
                name,
                id,
                is_jetty: false,
                jfc: jfc.clone(),
                max_sge,
                obj_addr: cb.key(),
                eid: c.eid,
                uasid: c.uasid,
            },
            c: cb,
            ctx: c.clone(),
            advised: Mutex::new(Vec::new()),
        });
        jfc.users.fetch_add(1, Ordering::AcqRel);
        c.users.fetch_add(1, Ordering::AcqRel);
        let p = jfs.c.ptr();
        reg::insert(p as usize, Obj::Jfs(jfs));
        p
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_delete_jfs(jfs: *mut u::urma_jfs_t) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let Some(j) = get_jfs(jfs) else {
            return einval("urma_delete_jfs");
        };
        if reg::remove(j.c.key()).is_none() {
            return einval("urma_delete_jfs");
        }
        j.sq.jfc.users.fetch_sub(1, Ordering::AcqRel);
        j.ctx.users.fetch_sub(1, Ordering::AcqRel);
        u::URMA_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_query_jfs(
    jfs: *mut u::urma_jfs_t,
    cfg: *mut u::urma_jfs_cfg_t,
    attr: *mut u::urma_jfs_attr_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let Some(j) = get_jfs(jfs) else {
            return einval("urma_query_jfs");
        };
        if cfg.is_null() || attr.is_null() {
            return einval("urma_query_jfs");
        }
        // SAFETY: j.c is our live urma_jfs_t; cfg/attr are non-NULL caller-owned.
        unsafe {
            cfg.write((*j.c.ptr()).jfs_cfg);
            let mut a: u::urma_jfs_attr_t = zeroed();
            a.state = u::URMA_JETTY_STATE_READY;
            attr.write(a);
        }
        u::URMA_SUCCESS
    })
}

fn make_rq(name: &str, cfg: &u::urma_jfr_cfg_t) -> Option<Arc<RecvQ>> {
    let jfc = get_jfc(cfg.jfc)?;
    let max_sge = sge_limit(cfg.max_sge)?;
    if cfg.depth == 0 || cfg.depth > MAX_DEPTH {
        return None;
    }
    Some(Arc::new(RecvQ {
        name: name.to_string(),
        depth: cfg.depth,
        max_sge,
        jfc,
        q: Mutex::new(Default::default()),
    }))
}

fn token_policy_of_jfr(cfg: &u::urma_jfr_cfg_t) -> u32 {
    // SAFETY: plain u32 flag union.
    (unsafe { cfg.flag.value } & flags::JFR_FLAG_TOKEN_POLICY) >> flags::JFR_FLAG_TOKEN_POLICY_SHIFT
}

#[no_mangle]
pub unsafe extern "C" fn urma_create_jfr(
    ctx: *mut u::urma_context_t,
    jfr_cfg: *mut u::urma_jfr_cfg_t,
) -> *mut u::urma_jfr_t {
    guard(std::ptr::null_mut(), || {
        let Some(c) = get_ctx(ctx) else {
            return null("urma_create_jfr");
        };
        if jfr_cfg.is_null() {
            return null("urma_create_jfr: NULL cfg");
        }
        // SAFETY: non-NULL caller-owned cfg.
        let cfg = unsafe { *jfr_cfg };
        let name = next_name(Kind::Jfr);
        let Some(rq) = make_rq(&name, &cfg) else {
            return null("urma_create_jfr: bad cfg");
        };
        let Some(id) = alloc_qid(cfg.id) else {
            return null("urma_create_jfr: id in use");
        };
        trace::name_qid(id, &name);
        let mut j: u::urma_jfr_t = zeroed();
        j.urma_ctx = ctx;
        j.jfr_id.eid = c.eid;
        j.jfr_id.uasid = c.uasid;
        j.jfr_id.id = id;
        j.jfr_cfg = cfg;
        j.jfr_cfg.id = id;
        j.handle = id as u64;
        let token = if token_policy_of_jfr(&cfg) == u::URMA_TOKEN_NONE {
            None
        } else {
            Some(cfg.token_value.token)
        };
        let jfr = Arc::new(Jfr {
            c: CBox::new(j),
            name,
            id,
            rq: rq.clone(),
            token: token.unwrap_or(0),
            token_checked: token.is_some(),
            alive: AtomicBool::new(true),
            ctx: c.clone(),
            users: AtomicU64::new(0),
        });
        rq.jfc.users.fetch_add(1, Ordering::AcqRel);
        c.users.fetch_add(1, Ordering::AcqRel);
        let p = jfr.c.ptr();
        reg::with_reg_mut(|r| {
            r.objs.insert(p as usize, Obj::Jfr(jfr.clone()));
            r.jfr_by_id.insert(id, jfr.clone());
        });
        p
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_delete_jfr(jfr: *mut u::urma_jfr_t) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let Some(j) = get_jfr(jfr) else {
            return einval("urma_delete_jfr");
        };
        if j.users.load(Ordering::Acquire) > 0 {
            log_err("urma_delete_jfr: jetties still share this JFR");
            return u::URMA_FAIL;
        }
        let removed = reg::with_reg_mut(|r| {
            let ok = r.objs.remove(&j.c.key()).is_some();
            if ok {
                r.jfr_by_id.remove(&j.id);
            }
            ok
        });
        if !removed {
            return einval("urma_delete_jfr");
        }
        j.alive.store(false, Ordering::Release);
        j.rq.jfc.users.fetch_sub(1, Ordering::AcqRel);
        j.ctx.users.fetch_sub(1, Ordering::AcqRel);
        u::URMA_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_create_jetty(
    ctx: *mut u::urma_context_t,
    jetty_cfg: *mut u::urma_jetty_cfg_t,
) -> *mut u::urma_jetty_t {
    guard(std::ptr::null_mut(), || {
        let Some(c) = get_ctx(ctx) else {
            return null("urma_create_jetty");
        };
        if jetty_cfg.is_null() {
            return null("urma_create_jetty: NULL cfg");
        }
        // SAFETY: non-NULL caller-owned cfg.
        let mut cfg = unsafe { *jetty_cfg };
        let Some(sjfc) = get_jfc(cfg.jfs_cfg.jfc) else {
            return null("urma_create_jetty: invalid jfs_cfg.jfc");
        };
        let Some(max_sge) = sge_limit(cfg.jfs_cfg.max_sge) else {
            return null("urma_create_jetty: max_sge");
        };
        if cfg.jfs_cfg.depth == 0 || cfg.jfs_cfg.depth > MAX_DEPTH {
            return null("urma_create_jetty: bad depth");
        }
        // SAFETY: plain u32 flag union.
        let share = unsafe { cfg.flag.value } & flags::JETTY_FLAG_SHARE_JFR != 0;
        let name = next_name(Kind::Jetty);
        let (rq, shared, token, own_cfg) = if share {
            // SAFETY: `shared` is the active member when share_jfr is set.
            let sh = unsafe { cfg.__bindgen_anon_1.shared };
            let Some(jfr) = get_jfr(sh.jfr) else {
                return null("urma_create_jetty: invalid shared.jfr");
            };
            if !sh.jfc.is_null() && get_jfc(sh.jfc).is_none() {
                return null("urma_create_jetty: invalid shared.jfc");
            }
            let tok = jfr.token_checked.then_some(jfr.token);
            (jfr.rq.clone(), Some(jfr), tok, None)
        } else {
            // SAFETY: `jfr_cfg` is the active member when share_jfr is clear.
            let p = unsafe { cfg.__bindgen_anon_1.jfr_cfg };
            if p.is_null() {
                return null("urma_create_jetty: NULL jfr_cfg");
            }
            // SAFETY: non-NULL caller-owned jfr cfg.
            let jc = unsafe { *p };
            let Some(rq) = make_rq(&name, &jc) else {
                return null("urma_create_jetty: bad jfr_cfg");
            };
            let tok =
                (token_policy_of_jfr(&jc) != u::URMA_TOKEN_NONE).then_some(jc.token_value.token);
            // Keep our own copy of the jfr cfg so the C object never points at caller memory.
            (rq, None, tok, Some(CBox::new(jc)))
        };
        let Some(id) = alloc_qid(cfg.id) else {
            return null("urma_create_jetty: id in use");
        };
        trace::name_qid(id, &name);
        if let Some(oc) = &own_cfg {
            cfg.__bindgen_anon_1.jfr_cfg = oc.ptr();
        }
        cfg.id = id;
        let mut j: u::urma_jetty_t = zeroed();
        j.urma_ctx = ctx;
        j.jetty_id.eid = c.eid;
        j.jetty_id.uasid = c.uasid;
        j.jetty_id.id = id;
        j.jetty_cfg = cfg;
        j.handle = id as u64;
        let cb = CBox::new(j);
        let jetty = Arc::new(Jetty {
            sq: SendQ {
                name,
                id,
                is_jetty: true,
                jfc: sjfc.clone(),
                max_sge,
                obj_addr: cb.key(),
                eid: c.eid,
                uasid: c.uasid,
            },
            c: cb,
            rq: rq.clone(),
            shared_jfr: shared.clone(),
            own_jfr_cfg: own_cfg,
            token: token.unwrap_or(0),
            token_checked: token.is_some(),
            alive: AtomicBool::new(true),
            ctx: c.clone(),
            advised: Mutex::new(Vec::new()),
            bound: Mutex::new(None),
        });
        sjfc.users.fetch_add(1, Ordering::AcqRel);
        if let Some(j) = &shared {
            j.users.fetch_add(1, Ordering::AcqRel);
        } else {
            rq.jfc.users.fetch_add(1, Ordering::AcqRel);
        }
        c.users.fetch_add(1, Ordering::AcqRel);
        let p = jetty.c.ptr();
        reg::with_reg_mut(|r| {
            r.objs.insert(p as usize, Obj::Jetty(jetty.clone()));
            r.jetty_by_id.insert(id, jetty.clone());
        });
        p
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_delete_jetty(jetty: *mut u::urma_jetty_t) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let Some(j) = get_jetty(jetty) else {
            return einval("urma_delete_jetty");
        };
        let removed = reg::with_reg_mut(|r| {
            let ok = r.objs.remove(&j.c.key()).is_some();
            if ok {
                r.jetty_by_id.remove(&j.sq.id);
            }
            ok
        });
        if !removed {
            return einval("urma_delete_jetty");
        }
        j.alive.store(false, Ordering::Release);
        j.sq.jfc.users.fetch_sub(1, Ordering::AcqRel);
        match &j.shared_jfr {
            Some(s) => {
                s.users.fetch_sub(1, Ordering::AcqRel);
            }
            None => {
                j.rq.jfc.users.fetch_sub(1, Ordering::AcqRel);
            }
        }
        j.ctx.users.fetch_sub(1, Ordering::AcqRel);
        u::URMA_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_query_jetty(
    jetty: *mut u::urma_jetty_t,
    cfg: *mut u::urma_jetty_cfg_t,
    attr: *mut u::urma_jetty_attr_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let Some(j) = get_jetty(jetty) else {
            return einval("urma_query_jetty");
        };
        if cfg.is_null() || attr.is_null() {
            return einval("urma_query_jetty");
        }
        // SAFETY: j.c is our live urma_jetty_t; cfg/attr are non-NULL caller-owned.
        unsafe {
            cfg.write((*j.c.ptr()).jetty_cfg);
            let mut a: u::urma_jetty_attr_t = zeroed();
            a.state = u::URMA_JETTY_STATE_READY;
            attr.write(a);
        }
        u::URMA_SUCCESS
    })
}

// ------------------------------------------------------------------ import / advise / bind

#[allow(clippy::too_many_arguments)]
fn make_tjetty(
    ctx: *mut u::urma_context_t,
    c: &Arc<Ctx>,
    target: Target,
    id: u::urma_jetty_id_t,
    trans_mode: u32,
    flag: u32,
    tp_type: u32,
    policy: u32,
    ty: u32,
) -> *mut u::urma_target_jetty_t {
    let mut t: u::urma_target_jetty_t = zeroed();
    t.urma_ctx = ctx;
    t.id = id;
    t.trans_mode = trans_mode;
    t.type_ = ty;
    t.flag.value = flag;
    t.policy = policy;
    t.tp_type = tp_type;
    t.tp.tpn = 0;
    let cb = CBox::new(t);
    // SAFETY: writing the handle into our own fresh allocation.
    unsafe { (*cb.ptr()).handle = cb.key() as u64 };
    let tj = Arc::new(TJetty {
        c: cb,
        name: next_name(Kind::TJetty),
        target,
        ctx: c.clone(),
    });
    c.users.fetch_add(1, Ordering::AcqRel);
    let p = tj.c.ptr();
    reg::insert(p as usize, Obj::TJetty(tj));
    p
}

fn token_ok(checked: bool, expected: u32, given: *mut u::urma_token_t) -> bool {
    if !checked {
        return true;
    }
    if given.is_null() {
        return false;
    }
    // SAFETY: non-NULL caller-owned token.
    unsafe { (*given).token == expected }
}

#[no_mangle]
pub unsafe extern "C" fn urma_import_jetty(
    ctx: *mut u::urma_context_t,
    rjetty: *mut u::urma_rjetty_t,
    token_value: *mut u::urma_token_t,
) -> *mut u::urma_target_jetty_t {
    guard(std::ptr::null_mut(), || {
        let Some(c) = get_ctx(ctx) else {
            return null("urma_import_jetty");
        };
        if rjetty.is_null() {
            return null("urma_import_jetty: NULL rjetty");
        }
        // SAFETY: non-NULL caller-owned rjetty.
        let rj = unsafe { *rjetty };
        let id = rj.jetty_id.id;
        let target = if rj.type_ == u::URMA_JFR {
            reg::with_reg(|r| r.jfr_by_id.get(&id).cloned()).map(|j| {
                let ok = token_ok(j.token_checked, j.token, token_value);
                (Target::Jfr(j), ok)
            })
        } else {
            reg::with_reg(|r| r.jetty_by_id.get(&id).cloned()).map(|j| {
                let ok = token_ok(j.token_checked, j.token, token_value);
                (Target::Jetty(j), ok)
            })
        };
        let Some((target, ok)) = target else {
            return null("urma_import_jetty: no such jetty");
        };
        if !ok {
            return null("urma_import_jetty: token mismatch");
        }
        make_tjetty(
            ctx,
            &c,
            target,
            rj.jetty_id,
            rj.trans_mode,
            rj.flag.value,
            rj.tp_type,
            rj.policy,
            rj.type_,
        )
    })
}

fn unimport(t: *mut u::urma_target_jetty_t, what: &str) -> u::urma_status_t {
    let Some(tj) = get_tjetty(t) else {
        return einval(what);
    };
    if reg::remove(tj.c.key()).is_none() {
        return einval(what);
    }
    tj.ctx.users.fetch_sub(1, Ordering::AcqRel);
    u::URMA_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn urma_unimport_jetty(
    tjetty: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || unimport(tjetty, "urma_unimport_jetty"))
}

#[no_mangle]
pub unsafe extern "C" fn urma_import_jfr(
    ctx: *mut u::urma_context_t,
    rjfr: *mut u::urma_rjfr_t,
    token_value: *mut u::urma_token_t,
) -> *mut u::urma_target_jetty_t {
    guard(std::ptr::null_mut(), || {
        let Some(c) = get_ctx(ctx) else {
            return null("urma_import_jfr");
        };
        if rjfr.is_null() {
            return null("urma_import_jfr: NULL rjfr");
        }
        // SAFETY: non-NULL caller-owned rjfr.
        let rj = unsafe { *rjfr };
        let Some(j) = reg::with_reg(|r| r.jfr_by_id.get(&rj.jfr_id.id).cloned()) else {
            return null("urma_import_jfr: no such jfr");
        };
        if !token_ok(j.token_checked, j.token, token_value) {
            return null("urma_import_jfr: token mismatch");
        }
        make_tjetty(
            ctx,
            &c,
            Target::Jfr(j),
            rj.jfr_id,
            rj.trans_mode,
            rj.flag.value,
            rj.tp_type,
            0,
            u::URMA_JFR,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_unimport_jfr(
    target_jfr: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || unimport(target_jfr, "urma_unimport_jfr"))
}

fn advise(list: &Mutex<Vec<usize>>, t: usize, on: bool) -> u::urma_status_t {
    let mut l = lock(list);
    let pos = l.iter().position(|&x| x == t);
    match (on, pos) {
        (true, None) => {
            l.push(t);
            u::URMA_SUCCESS
        }
        (true, Some(_)) => u::URMA_EEXIST,
        (false, Some(i)) => {
            l.remove(i);
            u::URMA_SUCCESS
        }
        (false, None) => u::URMA_EINVAL,
    }
}

#[no_mangle]
pub unsafe extern "C" fn urma_advise_jfr(
    jfs: *mut u::urma_jfs_t,
    tjfr: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || match (get_jfs(jfs), get_tjetty(tjfr)) {
        (Some(j), Some(t)) => advise(&j.advised, t.c.key(), true),
        _ => einval("urma_advise_jfr"),
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_unadvise_jfr(
    jfs: *mut u::urma_jfs_t,
    tjfr: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || match (get_jfs(jfs), get_tjetty(tjfr)) {
        (Some(j), Some(t)) => advise(&j.advised, t.c.key(), false),
        _ => einval("urma_unadvise_jfr"),
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_advise_jetty(
    jetty: *mut u::urma_jetty_t,
    tjetty: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        match (get_jetty(jetty), get_tjetty(tjetty)) {
            (Some(j), Some(t)) => advise(&j.advised, t.c.key(), true),
            _ => einval("urma_advise_jetty"),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_unadvise_jetty(
    jetty: *mut u::urma_jetty_t,
    tjetty: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        match (get_jetty(jetty), get_tjetty(tjetty)) {
            (Some(j), Some(t)) => advise(&j.advised, t.c.key(), false),
            _ => einval("urma_unadvise_jetty"),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_bind_jetty(
    jetty: *mut u::urma_jetty_t,
    tjetty: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let (Some(j), Some(_t)) = (get_jetty(jetty), get_tjetty(tjetty)) else {
            return einval("urma_bind_jetty");
        };
        let mut b = lock(&j.bound);
        if b.is_some() {
            return u::URMA_EEXIST;
        }
        *b = Some(tjetty as usize);
        // SAFETY: j.c is our live urma_jetty_t; written under the bound mutex.
        unsafe { (*j.c.ptr()).remote_jetty = tjetty };
        u::URMA_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_unbind_jetty(jetty: *mut u::urma_jetty_t) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let Some(j) = get_jetty(jetty) else {
            return einval("urma_unbind_jetty");
        };
        let mut b = lock(&j.bound);
        if b.take().is_none() {
            return u::URMA_EINVAL;
        }
        // SAFETY: j.c is our live urma_jetty_t; written under the bound mutex.
        unsafe { (*j.c.ptr()).remote_jetty = std::ptr::null_mut() };
        u::URMA_SUCCESS
    })
}

// ------------------------------------------------------------------ segments / token ids

#[no_mangle]
pub unsafe extern "C" fn urma_alloc_token_id(
    ctx: *mut u::urma_context_t,
) -> *mut u::urma_token_id_t {
    guard(std::ptr::null_mut(), || {
        let Some(c) = get_ctx(ctx) else {
            return null("urma_alloc_token_id");
        };
        let id = next_id(Kind::TokenId);
        let mut t: u::urma_token_id_t = zeroed();
        t.urma_ctx = ctx;
        t.token_id = id;
        t.handle = id as u64;
        let o = Arc::new(TokenIdObj {
            c: CBox::new(t),
            id,
            ctx: c.clone(),
            users: AtomicU64::new(0),
        });
        next_name(Kind::TokenId);
        c.users.fetch_add(1, Ordering::AcqRel);
        let p = o.c.ptr();
        reg::insert(p as usize, Obj::TokenId(o));
        p
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_free_token_id(token_id: *mut u::urma_token_id_t) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let Some(t) = get_token_id(token_id) else {
            return einval("urma_free_token_id");
        };
        if t.users.load(Ordering::Acquire) > 0 {
            log_err("urma_free_token_id: segments still use this token id");
            return u::URMA_FAIL;
        }
        reg::remove(t.c.key());
        t.ctx.users.fetch_sub(1, Ordering::AcqRel);
        u::URMA_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_register_seg(
    ctx: *mut u::urma_context_t,
    seg_cfg: *mut u::urma_seg_cfg_t,
) -> *mut u::urma_target_seg_t {
    guard(std::ptr::null_mut(), || {
        let Some(c) = get_ctx(ctx) else {
            return null("urma_register_seg");
        };
        if seg_cfg.is_null() {
            return null("urma_register_seg: NULL cfg");
        }
        // SAFETY: non-NULL caller-owned cfg.
        let cfg = unsafe { *seg_cfg };
        if cfg.va == 0 || cfg.len == 0 || cfg.va.checked_add(cfg.len).is_none() {
            return null("urma_register_seg: bad range");
        }
        // SAFETY: plain u32 flag union.
        let fl = unsafe { cfg.flag.value };
        let policy =
            (fl & flags::REG_SEG_FLAG_TOKEN_POLICY) >> flags::REG_SEG_FLAG_TOKEN_POLICY_SHIFT;
        let access = (fl & flags::REG_SEG_FLAG_ACCESS) >> flags::REG_SEG_FLAG_ACCESS_SHIFT;
        let token_obj = if fl & flags::REG_SEG_FLAG_TOKEN_ID_VALID != 0 {
            match get_token_id(cfg.token_id) {
                Some(t) => Some(t),
                None => return null("urma_register_seg: invalid token_id"),
            }
        } else {
            None
        };
        let token_id = match &token_obj {
            Some(t) => t.id,
            None => next_id(Kind::TokenId),
        };
        let mut t: u::urma_target_seg_t = zeroed();
        t.seg.ubva.eid = c.eid;
        t.seg.ubva.uasid = c.uasid;
        t.seg.ubva.va = cfg.va;
        t.seg.len = cfg.len;
        let mut attr = policy | (access << flags::SEG_ATTR_ACCESS_SHIFT);
        if token_obj.is_some() {
            attr |= flags::SEG_ATTR_USER_TOKEN_ID;
        }
        t.seg.attr.value = attr;
        t.seg.token_id = token_id;
        t.user_ctx = cfg.user_ctx;
        t.mva = cfg.va;
        t.urma_ctx = ctx;
        t.token_id = token_obj
            .as_ref()
            .map(|o| o.c.ptr())
            .unwrap_or(std::ptr::null_mut());
        t.handle = token_id as u64;
        let seg = Arc::new(Seg {
            c: CBox::new(t),
            name: next_name(Kind::Seg),
            va: cfg.va,
            len: cfg.len,
            access,
            token_policy: policy,
            token: cfg.token_value.token,
            token_id,
            alive: AtomicBool::new(true),
            ctx: c.clone(),
            token_obj: token_obj.clone(),
        });
        if let Some(o) = &token_obj {
            o.users.fetch_add(1, Ordering::AcqRel);
        }
        c.users.fetch_add(1, Ordering::AcqRel);
        let p = seg.c.ptr();
        reg::with_reg_mut(|r| {
            r.objs.insert(p as usize, Obj::Seg(seg.clone()));
            r.segs_by_token_id
                .entry(token_id)
                .or_default()
                .push(seg.clone());
        });
        p
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_unregister_seg(
    target_seg: *mut u::urma_target_seg_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let removed = reg::with_reg_mut(|r| match r.objs.get(&(target_seg as usize)) {
            Some(Obj::Seg(s)) => {
                let s = s.clone();
                r.objs.remove(&(target_seg as usize));
                if let Some(v) = r.segs_by_token_id.get_mut(&s.token_id) {
                    v.retain(|x| !Arc::ptr_eq(x, &s));
                    if v.is_empty() {
                        r.segs_by_token_id.remove(&s.token_id);
                    }
                }
                Some(s)
            }
            _ => None,
        });
        let Some(s) = removed else {
            return einval("urma_unregister_seg");
        };
        s.alive.store(false, Ordering::Release);
        if let Some(o) = &s.token_obj {
            o.users.fetch_sub(1, Ordering::AcqRel);
        }
        s.ctx.users.fetch_sub(1, Ordering::AcqRel);
        u::URMA_SUCCESS
    })
}

/// Imports a segment: it must match a live registered segment by token id and VA (and not be
/// longer); the token must match unless the segment was registered with `URMA_TOKEN_NONE`.
#[no_mangle]
pub unsafe extern "C" fn urma_import_seg(
    ctx: *mut u::urma_context_t,
    seg: *mut u::urma_seg_t,
    token_value: *mut u::urma_token_t,
    addr: u64,
    flag: u::urma_import_seg_flag_t,
) -> *mut u::urma_target_seg_t {
    guard(std::ptr::null_mut(), || {
        let Some(c) = get_ctx(ctx) else {
            return null("urma_import_seg");
        };
        if seg.is_null() {
            return null("urma_import_seg: NULL seg");
        }
        // SAFETY: non-NULL caller-owned urma_seg_t.
        let sd = unsafe { *seg };
        let va = sd.ubva.va;
        let tid = sd.token_id;
        let target = reg::with_reg(|r| {
            r.segs_by_token_id
                .get(&tid)
                .and_then(|v| v.iter().find(|s| s.va == va && sd.len <= s.len).cloned())
        });
        let Some(target) = target else {
            return null("urma_import_seg: no such segment");
        };
        let checked = target.token_policy != u::URMA_TOKEN_NONE;
        if !token_ok(checked, target.token, token_value) {
            return null("urma_import_seg: token mismatch");
        }
        let given_token = if token_value.is_null() {
            0
        } else {
            // SAFETY: non-NULL caller-owned token.
            unsafe { (*token_value).token }
        };
        let _ = flag;
        // SAFETY: target.c is a live registered urma_target_seg_t.
        let mut t: u::urma_target_seg_t = unsafe { *target.c.ptr() };
        t.user_ctx = 0;
        t.mva = if addr != 0 { addr } else { target.va };
        t.urma_ctx = ctx;
        t.token_id = std::ptr::null_mut();
        let cb = CBox::new(t);
        // SAFETY: our own fresh allocation.
        unsafe { (*cb.ptr()).handle = cb.key() as u64 };
        let is = Arc::new(ISeg {
            c: cb,
            name: next_name(Kind::ISeg),
            target,
            token: given_token,
            ctx: c.clone(),
        });
        c.users.fetch_add(1, Ordering::AcqRel);
        let p = is.c.ptr();
        reg::insert(p as usize, Obj::ISeg(is));
        p
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_unimport_seg(tseg: *mut u::urma_target_seg_t) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        let removed = reg::with_reg_mut(|r| match r.objs.get(&(tseg as usize)) {
            Some(Obj::ISeg(s)) => {
                let s = s.clone();
                r.objs.remove(&(tseg as usize));
                Some(s)
            }
            _ => None,
        });
        let Some(s) = removed else {
            return einval("urma_unimport_seg");
        };
        s.ctx.users.fetch_sub(1, Ordering::AcqRel);
        u::URMA_SUCCESS
    })
}

// ------------------------------------------------------------------ data path

#[no_mangle]
pub unsafe extern "C" fn urma_post_jfs_wr(
    jfs: *mut u::urma_jfs_t,
    wr: *mut u::urma_jfs_wr_t,
    bad_wr: *mut *mut u::urma_jfs_wr_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        if wr.is_null() || bad_wr.is_null() {
            return einval("urma_post_jfs_wr");
        }
        reg::with_jfs(jfs, |j| {
            let Some(j) = j else {
                // SAFETY: bad_wr is non-NULL.
                unsafe { *bad_wr = wr };
                return einval("urma_post_jfs_wr: invalid jfs");
            };
            // SAFETY: wr chain and bad_wr from the caller.
            unsafe { datapath::post_send_chain(&j.sq, wr, bad_wr) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_post_jetty_send_wr(
    jetty: *mut u::urma_jetty_t,
    wr: *mut u::urma_jfs_wr_t,
    bad_wr: *mut *mut u::urma_jfs_wr_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        if wr.is_null() || bad_wr.is_null() {
            return einval("urma_post_jetty_send_wr");
        }
        reg::with_jetty(jetty, |j| {
            let Some(j) = j else {
                // SAFETY: bad_wr is non-NULL.
                unsafe { *bad_wr = wr };
                return einval("urma_post_jetty_send_wr: invalid jetty");
            };
            // SAFETY: wr chain and bad_wr from the caller.
            unsafe { datapath::post_send_chain(&j.sq, wr, bad_wr) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_post_jetty_recv_wr(
    jetty: *mut u::urma_jetty_t,
    wr: *mut u::urma_jfr_wr_t,
    bad_wr: *mut *mut u::urma_jfr_wr_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        if wr.is_null() || bad_wr.is_null() {
            return einval("urma_post_jetty_recv_wr");
        }
        reg::with_jetty(jetty, |j| {
            let Some(j) = j else {
                // SAFETY: bad_wr is non-NULL.
                unsafe { *bad_wr = wr };
                return einval("urma_post_jetty_recv_wr: invalid jetty");
            };
            // SAFETY: wr chain and bad_wr from the caller.
            unsafe { datapath::post_recv_chain(&j.rq, wr, bad_wr) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn urma_post_jfr_wr(
    jfr: *mut u::urma_jfr_t,
    wr: *mut u::urma_jfr_wr_t,
    bad_wr: *mut *mut u::urma_jfr_wr_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        if wr.is_null() || bad_wr.is_null() {
            return einval("urma_post_jfr_wr");
        }
        reg::with_jfr(jfr, |j| {
            let Some(j) = j else {
                // SAFETY: bad_wr is non-NULL.
                unsafe { *bad_wr = wr };
                return einval("urma_post_jfr_wr: invalid jfr");
            };
            // SAFETY: wr chain and bad_wr from the caller.
            unsafe { datapath::post_recv_chain(&j.rq, wr, bad_wr) }
        })
    })
}
