//! The catalogue's scenarios of receive-side completions handed over out of order.

use crate::harness::ctx::{Delivery, Order};
use crate::harness::scenario::{one, setup_for, Flow, Scenario, MIB};

/// The scenarios of receive-side completions handed over out of order, in catalogue order.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::flow(
            "recv-reverse",
            "14 MiB, receive-side CRs delivered in reverse order",
            setup_for(14 * MIB),
            Flow {
                delivery: Delivery::Held(Order::Reverse),
                xfers: one(14 * MIB, 0x10, 0x20),
                ..Default::default()
            },
        ),
        Scenario::flow(
            "recv-shuffled",
            "12 MiB + 1, receive-side CRs delivered in a shuffled order (seed 7)",
            setup_for(12 * MIB + 1),
            Flow {
                delivery: Delivery::Held(Order::Shuffle(7)),
                xfers: one(12 * MIB + 1, 0x11, 0x21),
                ..Default::default()
            },
        ),
    ]
}
