//! The catalogue's scenarios of post failures and error completions.

use std::time::Duration;

use crate::harness::ctx::{Delivery, Order, ScenarioRun, Side};
use crate::harness::scenario::{apply_knobs, one, setup_for, Flow, Scenario, MIB};

/// The scenarios of post failures and error completions, in catalogue order.
pub fn scenarios() -> Vec<Scenario> {
    let mut v = Vec::new();
    for (id, desc, knobs) in [
        (
            "post-fail-first",
            "the first WRITE post fails (URMA_EAGAIN)",
            "fail_post=1:11",
        ),
        (
            "post-fail-mid-write",
            "the WRITE of chunk 1 (send WR #3) fails to post (URMA_FAIL)",
            "fail_post=3:4096",
        ),
        (
            "post-fail-send-imm",
            "the SEND_IMM of chunk 0 (send WR #2) fails to post (URMA_ENOMEM)",
            "fail_post=2:12",
        ),
        (
            "error-cr",
            "the WRITE of chunk 0 completes with URMA_CR_LOC_ACCESS_ERR",
            "fail_cr=1:4",
        ),
        (
            "error-cr-mid",
            "the WRITE of chunk 1 (send WR #3) completes with URMA_CR_REM_ACCESS_ABORT_ERR",
            "fail_cr=3:8",
        ),
        (
            "error-cr-send-imm",
            "the SEND_IMM of chunk 0 (send WR #2) completes with URMA_CR_WR_FLUSH_ERR",
            "fail_cr=2:11",
        ),
        (
            "recv-post-fail",
            "the first recv WR of the prefill fails to post (URMA_FAIL)",
            "fail_recv_post=1:4096",
        ),
    ] {
        v.push(Scenario::flow(
            id,
            &format!("6 MiB + 5: {desc}"),
            setup_for(6 * MIB + 5),
            Flow {
                knobs: knobs.into(),
                delivery: Delivery::Held(Order::Fifo),
                xfers: one(6 * MIB + 5, 0x40, 0x41),
                wait_ms: 200,
                ..Default::default()
            },
        ));
    }
    v.push(Scenario::custom(
        "recv-post-fail-retry",
        "a recv whose prefill fails, then a recv with the same key, its transfer and waits",
        setup_for(4 * MIB + 1),
        crate::steps!(sc_recv_post_fail_retry),
        &["recv_post_fail"],
    ));
    v.push(Scenario::flow(
        "recv-post-fail-enomem",
        "6 MiB + 5: the third recv WR of the prefill fails with URMA_ENOMEM (tolerated)",
        setup_for(6 * MIB + 5),
        Flow {
            knobs: "fail_recv_post=3:12".into(),
            capacity: 1,
            delivery: Delivery::Held(Order::Fifo),
            xfers: one(6 * MIB + 5, 0x42, 0x43),
            wait_ms: 200,
            ..Default::default()
        },
    ));
    v
}

fn sc_recv_post_fail_retry(ctx: &mut ScenarioRun) {
    if ctx.init(Side::Send, 1, 4) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    apply_knobs(ctx, "fail_recv_post=1:4096");
    ctx.recv(4 * MIB + 1, 0x45, 0);
    let (_, r) = ctx.recv(4 * MIB + 1, 0x45, 0);
    let (_, s) = ctx.send(4 * MIB + 1, 0x46, 0x45, 0);
    ctx.settle_recv(3, Duration::from_millis(150), Duration::from_secs(5));
    ctx.deliver_held(Order::Fifo);
    if let Some(s) = s {
        ctx.wait(Side::Send, &s, Some(5000));
    }
    if let Some(r) = r {
        ctx.wait(Side::Recv, &r, Some(100));
    }
    ctx.check_data("data ck=0x45", 0, 4 * MIB as usize + 1);
}
