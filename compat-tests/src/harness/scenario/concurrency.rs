//! The catalogue's scenarios of concurrent transfers.

use crate::harness::ctx::{Delivery, Order, Setup};
use crate::harness::scenario::{setup_for, Flow, Scenario, Xfer, MIB};

/// The scenarios of concurrent transfers, in catalogue order.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::flow(
            "concurrent-64x4",
            "64 concurrent 2 MiB + 1 transfers over 4 workers (no-copy), receive CRs shuffled",
            Setup {
                nocopy: true,
                buf_len: 4 << 20,
                ..Default::default()
            },
            Flow {
                workers: 4,
                capacity: 64,
                delivery: Delivery::Held(Order::Shuffle(64)),
                xfers: (0..64u64)
                    .map(|i| Xfer::new(2 * MIB + 1, 0x1000 + i, 0x2000 + i))
                    .collect(),
                ..Default::default()
            },
        ),
        Scenario::flow(
            "concurrent-8-copy",
            "8 concurrent transfers of 1.5..8 MiB over 3 workers with data, CRs as they come",
            setup_for(56 * MIB),
            Flow {
                workers: 3,
                capacity: 64,
                xfers: (0..8u64)
                    .map(|i| Xfer {
                        off: i as usize * 6 * MIB as usize,
                        ..Xfer::new(
                            2 * MIB + 1 + (i as u32) * (3 * MIB / 4),
                            0x3000 + i,
                            0x4000 + i,
                        )
                    })
                    .collect(),
                ..Default::default()
            },
        ),
    ]
}
