//! The catalogue's scenarios of timed waits, cancel and destroy with requests in flight.

use std::time::Duration;

use crate::harness::aspect::{note_line, Aspect};
use crate::harness::backend;
use crate::harness::ctx::{Delivery, Order, ScenarioRun, Setup, Side};
use crate::harness::scenario::{Cancel, CancelAt, Flow, Scenario, Xfer, MIB};
use crate::loopback_ctl::ReleaseOrder;

/// The scenarios of timed waits, cancel and destroy with requests in flight, in catalogue order.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::custom(
            "wait-timeout-0",
            "wait with 0 ms on a recv and a send whose tasks are still queued",
            Setup::default(),
            crate::steps!(sc_timeout_0),
            &[],
        ),
        Scenario::custom(
            "wait-timeout-short",
            "wait with 30 ms on a recv whose tasks are queued, then its late completions",
            Setup::default(),
            crate::steps!(sc_timeout_short),
            &[],
        ),
        Scenario::custom(
            "cancel-before",
            "cancel a recv (with its sync) before any completion, then deliver its completions",
            Setup::default(),
            crate::steps!(sc_cancel_before),
            &[],
        ),
        Scenario::flow(
            "cancel-after",
            "cancel a completed recv with its sync, and a completed send by id only",
            Setup::default(),
            Flow {
                capacity: 4,
                delivery: Delivery::Held(Order::Fifo),
                xfers: vec![Xfer {
                    cancel_recv: Some(Cancel {
                        at: CancelAt::After,
                        with_sync: true,
                    }),
                    cancel_send: Some(Cancel {
                        at: CancelAt::After,
                        with_sync: false,
                    }),
                    ..Xfer::new(4 * MIB, 0xD2, 0xD1)
                }],
                ..Default::default()
            },
        ),
        Scenario::flow(
            "cancel-by-id-only",
            "cancel a queued recv by id with a NULL sync, then wait on its sync (30 ms)",
            Setup::default(),
            Flow {
                capacity: 4,
                delivery: Delivery::Held(Order::Fifo),
                xfers: vec![Xfer {
                    no_send: true,
                    cancel_recv: Some(Cancel {
                        at: CancelAt::Registered,
                        with_sync: false,
                    }),
                    ..Xfer::new(4 * MIB, 0, 0xE1)
                }],
                wait_ms: 30,
                ..Default::default()
            },
        ),
        Scenario::custom(
            "destroy-inflight",
            "destroy while a recv is queued and a thread blocks in an untimed wait on it",
            Setup::default(),
            crate::steps!(sc_destroy_inflight),
            &[],
        ),
    ]
}

fn sc_timeout_0(ctx: &mut ScenarioRun) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    let (_, r) = ctx.recv(4 * MIB, 0xA1, 0);
    if let Some(r) = r {
        ctx.wait(Side::Recv, &r, Some(0));
    }
    // A send whose WRITE completion is held by the loopback: its tasks stay queued.
    backend::get().hold_crs(true);
    let (_, s) = ctx.send(4 * MIB, 0xA2, 0xA3, 0);
    if let Some(s) = s {
        ctx.wait(Side::Send, &s, Some(0));
    }
    let n = backend::get().release_crs(ReleaseOrder::Fifo);
    backend::get().hold_crs(false);
    ctx.rec.note(note_line(
        Aspect::Completion,
        &format!("released {n} held CRs"),
    ));
    ctx.settle_recv(2, Duration::from_millis(150), Duration::from_secs(2));
    std::thread::sleep(Duration::from_millis(50));
    ctx.deliver_held(Order::Fifo);
}

fn sc_timeout_short(ctx: &mut ScenarioRun) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    let (_, r) = ctx.recv(4 * MIB, 0xB1, 0);
    if let Some(r) = r {
        ctx.wait(Side::Recv, &r, Some(30));
    }
    let (_, s) = ctx.send(4 * MIB, 0xB2, 0xB1, 0);
    ctx.settle_recv(2, Duration::from_millis(150), Duration::from_secs(5));
    ctx.deliver_held(Order::Fifo);
    if let Some(s) = s {
        ctx.wait(Side::Send, &s, Some(5000));
    }
}

fn sc_cancel_before(ctx: &mut ScenarioRun) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    let (_, r) = ctx.recv(4 * MIB, 0xC1, 0);
    if let Some(r) = r {
        ctx.cancel(Side::Recv, Some(&r), 0xC1);
    }
    let (_, s) = ctx.send(4 * MIB, 0xC2, 0xC1, 0);
    ctx.settle_recv(2, Duration::from_millis(150), Duration::from_secs(5));
    ctx.deliver_held(Order::Fifo);
    if let Some(s) = s {
        ctx.wait(Side::Send, &s, Some(5000));
    }
    // Cancel with an unknown id and a NULL sync.
    ctx.cancel(Side::Send, None, 0xDEAD);
}

fn sc_destroy_inflight(ctx: &mut ScenarioRun) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    let (_, r) = ctx.recv(4 * MIB, 0xF1, 0);
    let Some(r) = r else { return };
    let p = crate::fixture::SendPtr(ctx.sync_ptr(&r));
    let h = crate::fixture::SendPtr(ctx.hs);
    let wait = ctx.rlib.lib.wait_and_free_sync;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("compat-waiter".into())
        .spawn(move || {
            let (p, h) = (p, h);
            let mut st = -77;
            // SAFETY: p is a live sync of this handle; the call may block forever (legacy,
            // by design): this thread is then left blocked on a sync legacy never frees.
            let r = unsafe { wait(h.0, p.0, &mut st) };
            let _ = tx.send((r, st));
        })
        .expect("spawn waiter");
    std::thread::sleep(Duration::from_millis(50));
    ctx.destroy(Side::Send);
    match rx.recv_timeout(Duration::from_millis(500)) {
        Ok((rv, st)) => ctx.rec.api(format!(
            "[waiter] wait_and_free_sync(H, {r}) = {} status={st}",
            crate::harness::ctx::r32(rv)
        )),
        Err(_) => ctx.rec.api(format!(
            "[waiter] wait_and_free_sync(H, {r}) still blocked 500 ms after destroy"
        )),
    }
    ctx.destroy(Side::Send);
}
