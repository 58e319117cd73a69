//! The catalogue's scenarios of a notify callback that fails.

use crate::harness::ctx::{Delivery, Order};
use crate::harness::scenario::{setup_for, Flow, Scenario, Xfer, MIB};

/// The scenarios of a notify callback that fails, in catalogue order.
pub fn scenarios() -> Vec<Scenario> {
    let mut v = Vec::new();
    for k in [0u8, 2] {
        v.push(Scenario::flow(
            &format!("cb-fail-chunk{k}"),
            &format!(
                "8 MiB: notify_callback returns 1 for chunk {k}; later chunks still delivered"
            ),
            setup_for(8 * MIB),
            Flow {
                delivery: Delivery::Held(Order::Fifo),
                xfers: vec![Xfer {
                    cb_fail: Some(k),
                    ..Xfer::new(8 * MIB, 0x50, 0x51)
                }],
                wait_ms: 200,
                ..Default::default()
            },
        ));
    }
    v
}
