//! Imports of jetties and JFRs, advise / bind.

use super::*;

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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_import_jetty(
    ctx: *mut u::urma_context_t,
    rjetty: *mut u::urma_rjetty_t,
    token_value: *mut u::urma_token_t,
) -> *mut u::urma_target_jetty_t {
    entry(std::ptr::null_mut(), || {
        let Some(c) = get_ctx(ctx) else {
            return null("urma_import_jetty");
        };
        if rjetty.is_null() {
            return null("urma_import_jetty: NULL rjetty");
        }
        // SAFETY: non-NULL caller-owned rjetty.
        let rj = unsafe { *rjetty };
        // SAFETY: the flag union's members are one 32-bit word; any bit pattern is a valid value.
        let flag = unsafe { rj.flag.value };
        let id = rj.jetty_id.id;
        let target = if foreign(rj.jetty_id.uasid, &c) {
            let jfr = rj.type_ == u::URMA_JFR;
            crate::xproc::import_queue(rj.jetty_id.uasid, id, jfr, given_token(token_value))
                .map(|t| (t, true))
        } else if rj.type_ == u::URMA_JFR {
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
            flag,
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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_unimport_jetty(
    tjetty: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    entry(u::URMA_FAIL, || unimport(tjetty, "urma_unimport_jetty"))
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_import_jfr(
    ctx: *mut u::urma_context_t,
    rjfr: *mut u::urma_rjfr_t,
    token_value: *mut u::urma_token_t,
) -> *mut u::urma_target_jetty_t {
    entry(std::ptr::null_mut(), || {
        let Some(c) = get_ctx(ctx) else {
            return null("urma_import_jfr");
        };
        if rjfr.is_null() {
            return null("urma_import_jfr: NULL rjfr");
        }
        // SAFETY: non-NULL caller-owned rjfr.
        let rj = unsafe { *rjfr };
        // SAFETY: the flag union's members are one 32-bit word; any bit pattern is a valid value.
        let flag = unsafe { rj.flag.value };
        if foreign(rj.jfr_id.uasid, &c) {
            let t = rj.jfr_id;
            let Some(target) =
                crate::xproc::import_queue(t.uasid, t.id, true, given_token(token_value))
            else {
                return null("urma_import_jfr: no such jfr in that process, or token mismatch");
            };
            return make_tjetty(
                ctx,
                &c,
                target,
                rj.jfr_id,
                rj.trans_mode,
                flag,
                rj.tp_type,
                0,
                u::URMA_JFR,
            );
        }
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
            flag,
            rj.tp_type,
            0,
            u::URMA_JFR,
        )
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_unimport_jfr(
    target_jfr: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    entry(u::URMA_FAIL, || unimport(target_jfr, "urma_unimport_jfr"))
}

fn advise(list: &Mutex<Vec<usize>, { rank::ADVISE }>, t: usize, on: bool) -> u::urma_status_t {
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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_advise_jfr(
    jfs: *mut u::urma_jfs_t,
    tjfr: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    entry(u::URMA_FAIL, || match (get_jfs(jfs), get_tjetty(tjfr)) {
        (Some(j), Some(t)) => advise(&j.advised, t.c.key(), true),
        _ => einval("urma_advise_jfr"),
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_unadvise_jfr(
    jfs: *mut u::urma_jfs_t,
    tjfr: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    entry(u::URMA_FAIL, || match (get_jfs(jfs), get_tjetty(tjfr)) {
        (Some(j), Some(t)) => advise(&j.advised, t.c.key(), false),
        _ => einval("urma_unadvise_jfr"),
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_advise_jetty(
    jetty: *mut u::urma_jetty_t,
    tjetty: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
        match (get_jetty(jetty), get_tjetty(tjetty)) {
            (Some(j), Some(t)) => advise(&j.advised, t.c.key(), true),
            _ => einval("urma_advise_jetty"),
        }
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_unadvise_jetty(
    jetty: *mut u::urma_jetty_t,
    tjetty: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
        match (get_jetty(jetty), get_tjetty(tjetty)) {
            (Some(j), Some(t)) => advise(&j.advised, t.c.key(), false),
            _ => einval("urma_unadvise_jetty"),
        }
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_bind_jetty(
    jetty: *mut u::urma_jetty_t,
    tjetty: *mut u::urma_target_jetty_t,
) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
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

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_unbind_jetty(jetty: *mut u::urma_jetty_t) -> u::urma_status_t {
    entry(u::URMA_FAIL, || {
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
