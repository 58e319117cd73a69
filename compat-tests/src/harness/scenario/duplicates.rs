//! The catalogue's scenarios of duplicated completions and completions for no request.

use std::time::Duration;

use crate::harness::aspect::{note_line, Aspect};
use crate::harness::ctx::{Delivery, Order, ScenarioRun, Setup, Side};
use crate::harness::scenario::{one, setup_for, Flow, Scenario, Xfer, MIB};

/// The scenarios of duplicated completions and completions for no request, in catalogue order.
pub fn scenarios() -> Vec<Scenario> {
    vec![
    Scenario::flow(
        "dup-recv-cr",
        "6 MiB + 5, the second receive-side CR is handed to wake_up_task twice",
        setup_for(6 * MIB + 5),
        Flow {
            delivery: Delivery::Held(Order::Fifo),
            dup_held: Some(1),
            xfers: one(6 * MIB + 5, 0x12, 0x22),
            ..Default::default()
        },
    ),
    Scenario::flow(
        "dup-send-cr",
        "6 MiB + 5, the loopback duplicates CR #3, the local completion of SEND_IMM 0 (chunk id 7)",
        setup_for(6 * MIB + 5),
        Flow {
            knobs: "dup_cr=3".into(),
            delivery: Delivery::Held(Order::Fifo),
            xfers: one(6 * MIB + 5, 0x13, 0x23),
            ..Default::default()
        },
    ),
    Scenario::custom(
        "dup-write-cr",
        "6 MiB + 5, send CRs handed over one at a time; WRITE 0's CR is handed over twice",
        setup_for(6 * MIB + 5),
        crate::steps!(sc_dup_write_cr),
        &["dup_write_cr"],
    ),
    Scenario::custom(
        "dup-last-recv-cr",
        "6 MiB + 5: the last receive-side CR is handed over again after the recv completed, then a new recv reuses the key",
        setup_for(6 * MIB + 5),
        crate::steps!(sc_dup_last_recv_cr),
        &["cr_after_completion"],
    ),
    Scenario::custom(
        "unknown-cr",
        "forged CRs for unknown requests: send side, receive side, wrong opcode, NULL cr",
        Setup::default(),
        crate::steps!(sc_unknown_cr),
        &["cr_before_recv"],
    ),
    Scenario::flow(
        "early-send-imm",
        "after a first transfer, a second one's SEND_IMMs are delivered before its recv registers",
        setup_for(8 * MIB + 2),
        Flow {
            delivery: Delivery::Held(Order::Fifo),
            xfers: vec![
                Xfer::new(2 * MIB + 1, 0x30, 0x31),
                Xfer {
                    off: 4 * MIB as usize,
                    early: true,
                    ..Xfer::new(4 * MIB + 1, 0x32, 0x33)
                },
            ],
            wait_ms: 200,
            ..Default::default()
        },
    ),
    ]
}

fn sc_dup_write_cr(ctx: &mut ScenarioRun) {
    if ctx.init(Side::Send, 2, 16) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    ctx.set_send_hold(true);
    let len = 6 * MIB + 5;
    let (_, r) = ctx.recv(len, 0x17, 0);
    let (_, s) = ctx.send(len, 0x16, 0x17, 0);
    let end = std::time::Instant::now() + Duration::from_secs(2);
    while ctx.send_seen() < 1 && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut first = true;
    // Hand send CRs over one at a time, in poll order, letting the worker settle each time.
    for _ in 0..64 {
        let v = ctx.take_send_held();
        if v.is_empty() {
            break;
        }
        for cr in v {
            ctx.deliver(Side::Send, cr, Duration::from_millis(0));
            if first {
                first = false;
                ctx.deliver(Side::Send, cr, Duration::from_millis(0));
                let n = ctx.settle_send_wrs(Duration::from_millis(40));
                ctx.rec.note(note_line(
                    Aspect::Wire,
                    &format!("send WRs posted once WRITE 0's CR was handed over twice: {n}"),
                ));
            } else {
                ctx.settle_send_wrs(Duration::from_millis(20));
            }
        }
    }
    ctx.set_send_hold(false);
    ctx.settle_recv(4, Duration::from_millis(150), Duration::from_secs(5));
    ctx.deliver_held(Order::Fifo);
    if let Some(s) = s {
        ctx.wait(Side::Send, &s, Some(1000));
    }
    if let Some(r) = r {
        ctx.wait(Side::Recv, &r, Some(1000));
    }
    ctx.check_data("data ck=0x17", 0, len as usize);
}

fn sc_dup_last_recv_cr(ctx: &mut ScenarioRun) {
    if ctx.init(Side::Send, 2, 16) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    let len = 6 * MIB + 5;
    let (_, r) = ctx.recv(len, 0x14, 0);
    let (_, s) = ctx.send(len, 0x15, 0x14, 0);
    ctx.settle_recv(4, Duration::from_millis(150), Duration::from_secs(5));
    let held = ctx.take_held();
    for cr in &held {
        ctx.deliver(Side::Recv, *cr, Duration::from_millis(500));
    }
    if let Some(s) = s {
        ctx.wait(Side::Send, &s, Some(5000));
    }
    if let Some(r) = r {
        ctx.wait(Side::Recv, &r, Some(5000));
    }
    ctx.check_data("data ck=0x14", 0, len as usize);
    // The stray duplicate of the last chunk's completion.
    if let Some(last) = held.last() {
        ctx.deliver(Side::Recv, *last, Duration::from_millis(200));
    }
    // A later request reusing the client key: does the stray completion reach it?
    let (_, r2) = ctx.recv(len, 0x14, 0);
    std::thread::sleep(Duration::from_millis(50));
    if let Some(r2) = r2 {
        ctx.wait(Side::Recv, &r2, Some(50));
    }
}

fn sc_unknown_cr(ctx: &mut ScenarioRun) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    // A recv on another key first, so the library has a recorded receive queue.
    let (_, s) = ctx.recv(2 * MIB + 1, 0x90, 0);
    let mut cr = urma_sys::urma_cr_t::default();
    // Send side, unknown server key.
    cr.user_ctx = 0x999;
    cr.opcode = urma_sys::URMA_CR_OPC_SEND;
    ctx.deliver(Side::Send, cr, Duration::from_millis(100));
    // Send side sentinel (chunk id 7) of an unknown request.
    cr.user_ctx = 0x998 | (7u64 << 61);
    ctx.deliver(Side::Send, cr, Duration::from_millis(100));
    // Receive side SEND_WITH_IMM for an unknown client key.
    let mut r = urma_sys::urma_cr_t::default();
    r.opcode = urma_sys::URMA_CR_OPC_SEND_WITH_IMM;
    r.flag.value = urma_sys::flags::CR_FLAG_S_R;
    r.__bindgen_anon_1.imm_data = crate::oracle::enc(0x997) | (1u64 << 60);
    ctx.deliver(Side::Recv, r, Duration::from_millis(100));
    // Receive side with a wrong opcode (WRITE_WITH_IMM) for the live recv.
    r.opcode = urma_sys::URMA_CR_OPC_WRITE_WITH_IMM;
    r.__bindgen_anon_1.imm_data = crate::oracle::enc(0x90);
    ctx.deliver(Side::Recv, r, Duration::from_millis(100));
    // NULL cr and NULL handle.
    // SAFETY: NULL arguments are part of the API contract (return -1).
    let a = unsafe { (ctx.slib.lib.os_transport_wake_up_task)(ctx.hs, std::ptr::null_mut()) };
    ctx.rec.api(format!("wake_up_task(H, NULL) = {a}"));
    let mut c2 = cr;
    // SAFETY: as above, NULL handle.
    let b = unsafe {
        (ctx.slib.lib.os_transport_wake_up_task)(
            std::ptr::null_mut(),
            (&mut c2 as *mut urma_sys::urma_cr_t).cast(),
        )
    };
    ctx.rec.api(format!("wake_up_task(NULL, cr) = {b}"));
    if let Some(s) = s {
        ctx.wait(Side::Recv, &s, Some(20));
    }
}
