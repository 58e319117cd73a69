//! Queues: JFS, JFR and jetty (create, delete, query).

use super::*;

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
    static USED: Mutex<Option<std::collections::HashSet<u32>>, { rank::JETTY_IDS }> =
        Mutex::new(None);
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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_create_jfs(
    ctx: *mut u::urma_context_t,
    jfs_cfg: *mut u::urma_jfs_cfg_t,
) -> *mut u::urma_jfs_t {
    entry(std::ptr::null_mut(), || {
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
        if !trans_mode_ok(cfg.trans_mode) {
            return null("urma_create_jfs: trans_mode is not RM, RC or UM");
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
            sq: Arc::new(SendQ {
                name,
                id,
                is_jetty: false,
                jfc: jfc.clone(),
                max_sge,
                obj_addr: cb.key(),
                eid: c.eid,
                uasid: c.uasid,
                order: Default::default(),
            }),
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

/// Before a JFS/jetty goes: its WRs outstanding at another process get their CRs first (at
/// most the delete timeout; a dead peer's fail at once).
fn wait_remote_wrs(sq: &SendQ) {
    let ms = knobs::DELETE_TIMEOUT_MS.load(Ordering::Acquire);
    if !sq.order.wait_idle(Duration::from_millis(ms)) {
        log_err("delete: WRs still outstanding at another process; their CRs may come later");
    }
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_delete_jfs(jfs: *mut u::urma_jfs_t) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
        let Some(j) = get_jfs(jfs) else {
            return einval("urma_delete_jfs");
        };
        wait_remote_wrs(&j.sq);
        if reg::remove(j.c.key()).is_none() {
            return einval("urma_delete_jfs");
        }
        j.sq.jfc.users.fetch_sub(1, Ordering::AcqRel);
        j.ctx.users.fetch_sub(1, Ordering::AcqRel);
        u::URMA_SUCCESS
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_query_jfs(
    jfs: *mut u::urma_jfs_t,
    cfg: *mut u::urma_jfs_cfg_t,
    attr: *mut u::urma_jfs_attr_t,
) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
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

/// Whether a queue's transport mode is one of RM, RC and UM (the URMA core refuses any other,
/// 0 included, before a provider sees the queue).
fn trans_mode_ok(m: u::urma_transport_mode_t) -> bool {
    m == u::URMA_TM_RM || m == u::URMA_TM_RC || m == u::URMA_TM_UM
}

fn make_rq(name: &str, cfg: &u::urma_jfr_cfg_t) -> Option<Arc<RecvQ>> {
    let jfc = get_jfc(cfg.jfc)?;
    let max_sge = sge_limit(cfg.max_sge)?;
    if cfg.depth == 0 || cfg.depth > MAX_DEPTH || !trans_mode_ok(cfg.trans_mode) {
        return None;
    }
    Some(Arc::new(RecvQ {
        name: name.to_string(),
        depth: cfg.depth,
        max_sge,
        jfc,
        q: Mutex::new(Default::default()),
        posted: Condvar::new(),
        waiters: AtomicU32::new(0),
    }))
}

fn token_policy_of_jfr(cfg: &u::urma_jfr_cfg_t) -> u32 {
    // SAFETY: plain u32 flag union.
    (unsafe { cfg.flag.value } & flags::JFR_FLAG_TOKEN_POLICY) >> flags::JFR_FLAG_TOKEN_POLICY_SHIFT
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_create_jfr(
    ctx: *mut u::urma_context_t,
    jfr_cfg: *mut u::urma_jfr_cfg_t,
) -> *mut u::urma_jfr_t {
    entry(std::ptr::null_mut(), || {
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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_delete_jfr(jfr: *mut u::urma_jfr_t) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_create_jetty(
    ctx: *mut u::urma_context_t,
    jetty_cfg: *mut u::urma_jetty_cfg_t,
) -> *mut u::urma_jetty_t {
    entry(std::ptr::null_mut(), || {
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
        if !trans_mode_ok(cfg.jfs_cfg.trans_mode) {
            return null("urma_create_jetty: trans_mode is not RM, RC or UM");
        }
        // SAFETY: plain u32 flag union.
        let share = unsafe { cfg.flag.value } & flags::JETTY_FLAG_SHARE_JFR != 0;
        let name = next_name(Kind::Jetty);
        // loopback0 is a UB device: as the URMA core does for one, refuse a jetty whose receive
        // queue is not a shared JFR (the plugin face gets none, the core refused it already).
        if !share {
            return null(
                "urma_create_jetty: a jetty of a UB device must share a JFR (jetty_cfg.flag.bs.share_jfr)",
            );
        }
        // SAFETY: `shared` is the active member when share_jfr is set.
        let sh = unsafe { cfg.__bindgen_anon_1.shared };
        let Some(jfr) = get_jfr(sh.jfr) else {
            return null("urma_create_jetty: invalid shared.jfr");
        };
        if !sh.jfc.is_null() && get_jfc(sh.jfc).is_none() {
            return null("urma_create_jetty: invalid shared.jfc");
        }
        let token = jfr.token_checked.then_some(jfr.token);
        let rq = jfr.rq.clone();
        let Some(id) = alloc_qid(cfg.id) else {
            return null("urma_create_jetty: id in use");
        };
        trace::name_qid(id, &name);
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
            sq: Arc::new(SendQ {
                name,
                id,
                is_jetty: true,
                jfc: sjfc.clone(),
                max_sge,
                obj_addr: cb.key(),
                eid: c.eid,
                uasid: c.uasid,
                order: Default::default(),
            }),
            c: cb,
            rq: rq.clone(),
            shared_jfr: jfr.clone(),
            token: token.unwrap_or(0),
            token_checked: token.is_some(),
            alive: AtomicBool::new(true),
            ctx: c.clone(),
            advised: Mutex::new(Vec::new()),
            bound: Mutex::new(None),
        });
        sjfc.users.fetch_add(1, Ordering::AcqRel);
        jfr.users.fetch_add(1, Ordering::AcqRel);
        c.users.fetch_add(1, Ordering::AcqRel);
        let p = jetty.c.ptr();
        reg::with_reg_mut(|r| {
            r.objs.insert(p as usize, Obj::Jetty(jetty.clone()));
            r.jetty_by_id.insert(id, jetty.clone());
        });
        p
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_delete_jetty(jetty: *mut u::urma_jetty_t) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
        let Some(j) = get_jetty(jetty) else {
            return einval("urma_delete_jetty");
        };
        wait_remote_wrs(&j.sq);
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
        j.shared_jfr.users.fetch_sub(1, Ordering::AcqRel);
        j.ctx.users.fetch_sub(1, Ordering::AcqRel);
        u::URMA_SUCCESS
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_query_jetty(
    jetty: *mut u::urma_jetty_t,
    cfg: *mut u::urma_jetty_cfg_t,
    attr: *mut u::urma_jetty_attr_t,
) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
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
