//! The catalogue's scenarios of init (twice, worker counts) and bad API inputs.

use crate::harness::ctx::{Delivery, ScenarioRun, Setup, Side};
use crate::harness::scenario::{Scenario, MIB};

/// The scenarios of init (twice, worker counts) and bad API inputs, in catalogue order.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::custom(
            "init-twice",
            "a second init while an instance is live; init again after destroy",
            Setup::default(),
            crate::steps!(sc_init_twice),
            &[],
        ),
        Scenario::custom(
            "init-workers-0",
            "init with worker_thread_num = 0, then calls with the NULL handle",
            Setup::default(),
            crate::steps!(sc_init_workers_0),
            &[],
        ),
        Scenario::custom(
            "init-workers-1025",
            "init with worker_thread_num = 1025 (above the Rust bound of 1024)",
            Setup::default(),
            crate::steps!(sc_init_workers_1025),
            &[],
        ),
        Scenario::custom(
            "bad-inputs",
            "NULL arguments, len 0, a recv without queues, before and after init",
            Setup::default(),
            crate::steps!(sc_bad_inputs),
            &[],
        ),
    ]
}

fn sc_init_twice(ctx: &mut ScenarioRun) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    ctx.init_raw(Side::Send, false, false, 2);
    ctx.destroy(Side::Send);
    ctx.destroy_null(Side::Send);
    if ctx.init(Side::Send, 1, 4) == 0 {
        ctx.start_pollers(Delivery::Pass);
        let (_, r) = ctx.recv(2 * MIB + 7, 0x1A, 0);
        let (_, s) = ctx.send(2 * MIB + 7, 0x1B, 0x1A, 0);
        if let Some(s) = s {
            ctx.wait(Side::Send, &s, Some(5000));
        }
        if let Some(r) = r {
            ctx.wait(Side::Recv, &r, Some(5000));
        }
        ctx.check_data("data ck=0x1a", 0, 2 * MIB as usize + 7);
    }
}

fn sc_init_workers_0(ctx: &mut ScenarioRun) {
    ctx.init(Side::Send, 0, 4);
    ctx.send_null("handle", 4 * MIB, 1, 2);
    ctx.recv_null("handle", 4 * MIB, 2);
    ctx.destroy_null(Side::Send);
    // The instance slot is free again.
    if ctx.init(Side::Send, 1, 4) == 0 {
        ctx.destroy(Side::Send);
    }
}

fn sc_init_workers_1025(ctx: &mut ScenarioRun) {
    ctx.init(Side::Send, 1025, 4);
}

fn sc_bad_inputs(ctx: &mut ScenarioRun) {
    // Before init.
    ctx.send(4 * MIB, 1, 2, 0);
    ctx.recv(4 * MIB, 3, 0);
    ctx.cancel(Side::Send, None, 1);
    ctx.destroy_null(Side::Send);
    ctx.init_raw(Side::Send, true, false, 2);
    ctx.init_raw(Side::Send, false, true, 2);
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    for w in [
        "handle",
        "jetty_info",
        "local_src",
        "remote_dst",
        "ret_sync",
    ] {
        ctx.send_null(w, 4 * MIB, 0x11, 0x12);
    }
    ctx.send(0, 0x13, 0x14, 0);
    ctx.send(14 * MIB + 1, 0x15, 0x16, 0);
    for w in [
        "handle",
        "host_src",
        "device_dst",
        "ret_sync",
        "callback",
        "no_queue",
    ] {
        ctx.recv_null(w, 4 * MIB, 0x17);
    }
    ctx.recv(0, 0x18, 0);
    ctx.recv(14 * MIB + 1, 0x19, 0);
    for w in ["handle", "sync"] {
        ctx.wait_null(w);
    }
    // SAFETY: NULL handle is part of the contract.
    let r = unsafe {
        (ctx.slib.lib.os_transport_reg_jfc)(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    ctx.rec.api(format!(
        "reg_jfc(NULL, NULL, NULL) = {}",
        crate::harness::ctx::r32(r)
    ));
    // SAFETY: NULL handle.
    let r = unsafe {
        (ctx.slib.lib.os_transport_cancel_tasks)(std::ptr::null_mut(), std::ptr::null_mut(), 1)
    };
    ctx.rec.api(format!(
        "cancel_tasks(NULL, NULL, 1) = {}",
        crate::harness::ctx::r32(r)
    ));
    ctx.destroy_null(Side::Send);
}
