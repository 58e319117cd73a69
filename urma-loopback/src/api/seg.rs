//! Segments (register, import) and token ids.

use super::*;

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_alloc_token_id(
    ctx: *mut u::urma_context_t,
) -> *mut u::urma_token_id_t {
    entry(std::ptr::null_mut(), || {
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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_free_token_id(token_id: *mut u::urma_token_id_t) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_register_seg(
    ctx: *mut u::urma_context_t,
    seg_cfg: *mut u::urma_seg_cfg_t,
) -> *mut u::urma_target_seg_t {
    entry(std::ptr::null_mut(), || {
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
        let seg = Arc::new(Seg::new(
            CBox::new(t),
            next_name(Kind::Seg),
            (cfg.va, cfg.len),
            access,
            (policy, cfg.token_value.token, token_id),
            c.clone(),
            token_obj.clone(),
            None,
        ));
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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_unregister_seg(
    target_seg: *mut u::urma_target_seg_t,
) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
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
        s.alive.store(false, Ordering::SeqCst);
        // A responder thread serving another process may be inside this segment right now.
        s.wait_unpinned();
        if let Some(o) = &s.token_obj {
            o.users.fetch_sub(1, Ordering::AcqRel);
        }
        s.ctx.users.fetch_sub(1, Ordering::AcqRel);
        u::URMA_SUCCESS
    })
}

/// Imports a segment: it must match a live registered segment by token id and VA (and not be
/// longer); the token must match unless the segment was registered with `URMA_TOKEN_NONE`.
#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_import_seg(
    ctx: *mut u::urma_context_t,
    seg: *mut u::urma_seg_t,
    token_value: *mut u::urma_token_t,
    addr: u64,
    flag: u::urma_import_seg_flag_t,
) -> *mut u::urma_target_seg_t {
    entry(std::ptr::null_mut(), || {
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
        if foreign(sd.ubva.uasid, &c) {
            return import_remote_seg(ctx, &c, &sd, token_value, addr);
        }
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

/// `urma_import_seg` of a segment registered in another process: the owner checks the token
/// and answers with the segment's attributes; the import's target is a stand-in [`Seg`] naming
/// the owner (which checks every access again).
fn import_remote_seg(
    ctx: *mut u::urma_context_t,
    c: &Arc<Ctx>,
    sd: &u::urma_seg_t,
    token_value: *mut u::urma_token_t,
    addr: u64,
) -> *mut u::urma_target_seg_t {
    let token = given_token(token_value);
    let Some(r) = crate::xproc::import_seg(sd.ubva.uasid, sd.token_id, sd.ubva.va, sd.len, token)
    else {
        return null("urma_import_seg: no such segment in that process, or token mismatch");
    };
    let name = next_name(Kind::ISeg);
    let mut t: u::urma_target_seg_t = zeroed();
    t.seg = *sd;
    t.seg.len = r.len;
    // SAFETY: plain u32 attribute union.
    let attr = unsafe { sd.attr.value };
    t.seg.attr.value = attr;
    t.mva = if addr != 0 { addr } else { sd.ubva.va };
    t.urma_ctx = ctx;
    let stand_in = Arc::new(Seg::new(
        CBox::new(t),
        name.clone(),
        (sd.ubva.va, r.len),
        r.access,
        (r.token_policy, token.unwrap_or(0), sd.token_id),
        c.clone(),
        None,
        Some(r.peer),
    ));
    let cb = CBox::new(t);
    // SAFETY: our own fresh allocation.
    unsafe { (*cb.ptr()).handle = cb.key() as u64 };
    let is = Arc::new(ISeg {
        c: cb,
        name,
        target: stand_in,
        token: token.unwrap_or(0),
        ctx: c.clone(),
    });
    c.users.fetch_add(1, Ordering::AcqRel);
    let p = is.c.ptr();
    reg::insert(p as usize, Obj::ISeg(is));
    p
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_unimport_seg(tseg: *mut u::urma_target_seg_t) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
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
