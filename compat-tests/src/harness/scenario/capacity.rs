//! The catalogue's scenarios of the receive queue capacity and the choice of queues.

use crate::fixture::RecvKind;
use crate::harness::ctx::{Delivery, Order, SendVia, Setup};
use crate::harness::scenario::{one, setup_for, Flow, Scenario, Xfer, MIB};

/// The scenarios of the receive queue capacity and the choice of queues, in catalogue order.
pub fn scenarios() -> Vec<Scenario> {
    let mut v = Vec::new();
    for cap in [0u32, 1, 64] {
        v.push(Scenario::flow(
            &format!("recv-capacity-{cap}"),
            &format!("recv_queue_capacity = {cap}: prefill of 4 x {cap} recv WRs, 14 MiB transfer"),
            setup_for(14 * MIB),
            Flow {
                capacity: cap,
                xfers: one(14 * MIB, 0x60, 0x61),
                wait_ms: if cap == 0 { 200 } else { 5000 },
                ..Default::default()
            },
        ));
    }
    v.push(Scenario::flow(
        "recv-jetty",
        "recv on a jetty (device_dst.jetty set, jfr NULL), 6 MiB + 5",
        setup_for(6 * MIB + 5),
        Flow {
            xfers: one(6 * MIB + 5, 0x70, 0x71),
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "recv-jfr-only",
        "recv on a JFR only (device_dst.jetty NULL), 6 MiB + 5",
        Setup {
            recv_kind: RecvKind::Jfr,
            ..setup_for(6 * MIB + 5)
        },
        Flow {
            xfers: one(6 * MIB + 5, 0x72, 0x73),
            wait_ms: 200,
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "send-via-jetty",
        "send with jfs NULL (posts go to the jetty), 4 MiB + 1",
        setup_for(4 * MIB + 1),
        Flow {
            via: SendVia::Jetty,
            xfers: one(4 * MIB + 1, 0x74, 0x75),
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "send-no-queue",
        "send with jfs and jetty NULL: the first post fails with URMA_FAIL",
        setup_for(4 * MIB + 1),
        Flow {
            via: SendVia::None,
            xfers: one(4 * MIB + 1, 0x76, 0x77),
            wait_ms: 100,
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "event-mode",
        "pollers in event mode (urma_wait_jfc on a JFCE), 10 MiB + 9",
        Setup {
            event_mode: true,
            ..setup_for(10 * MIB + 9)
        },
        Flow {
            xfers: one(10 * MIB + 9, 0x78, 0x79),
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "recv-len-mismatch",
        "the receiver registers 2 MiB + 1 for a 4 MiB + 1 send (different last-chunk key)",
        setup_for(4 * MIB + 1),
        Flow {
            delivery: Delivery::Held(Order::Fifo),
            xfers: vec![Xfer {
                recv_len: 2 * MIB + 1,
                ..Xfer::new(4 * MIB + 1, 0x7A, 0x7B)
            }],
            wait_ms: 100,
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "reuse-live-id",
        "a send whose server key equals the client key of a live recv (same request id)",
        setup_for(8 * MIB),
        Flow {
            delivery: Delivery::Held(Order::Fifo),
            xfers: vec![
                Xfer::new(2 * MIB + 1, 0x7C, 0x7D),
                Xfer {
                    off: 4 * MIB as usize,
                    ..Xfer::new(2 * MIB + 1, 0x7D, 0x7E)
                },
            ],
            wait_ms: 100,
            ..Default::default()
        },
    ));
    v
}
