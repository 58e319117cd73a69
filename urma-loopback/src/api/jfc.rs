//! Completion side: JFCEs (event channels) and JFCs (create, delete, poll, rearm, wait, ack).

use super::*;

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_create_jfce(ctx: *mut u::urma_context_t) -> *mut u::urma_jfce_t {
    entry(std::ptr::null_mut(), || {
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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_delete_jfce(jfce: *mut u::urma_jfce_t) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_create_jfc(
    ctx: *mut u::urma_context_t,
    jfc_cfg: *mut u::urma_jfc_cfg_t,
) -> *mut u::urma_jfc_t {
    entry(std::ptr::null_mut(), || {
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
#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_delete_jfc(jfc: *mut u::urma_jfc_t) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_poll_jfc(
    jfc: *mut u::urma_jfc_t,
    cr_cnt: c_int,
    cr: *mut u::urma_cr_t,
) -> c_int {
    entry_hot(-1, || {
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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_rearm_jfc(
    jfc: *mut u::urma_jfc_t,
    solicited_only: bool,
) -> u::urma_status_t {
    entry_hot(u::URMA_FAIL, || {
        let Some(j) = get_jfc(jfc) else {
            return einval("urma_rearm_jfc");
        };
        j.rearm(solicited_only);
        u::URMA_SUCCESS
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_wait_jfc(
    jfce: *mut u::urma_jfce_t,
    jfc_cnt: u32,
    time_out: c_int,
    jfc: *mut *mut u::urma_jfc_t,
) -> c_int {
    entry_hot(-1, || {
        let Some(e) = get_jfce(jfce) else {
            log_err("urma_wait_jfc: invalid jfce");
            return -1;
        };
        if jfc.is_null() || jfc_cnt == 0 {
            return -1;
        }
        let got = e.wait(jfc_cnt as usize, time_out, &datapath::RNR_HOOKS);
        for (i, j) in got.iter().enumerate() {
            // SAFETY: i < jfc_cnt; jfc has room for jfc_cnt handles.
            unsafe { *jfc.add(i) = j.c.ptr() };
        }
        got.len() as c_int
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_ack_jfc(
    jfc: *mut *mut u::urma_jfc_t,
    nevents: *mut u32,
    jfc_cnt: u32,
) {
    entry_hot((), || {
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
