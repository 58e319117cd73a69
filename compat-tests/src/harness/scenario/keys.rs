//! The catalogue's scenarios of request keys at the edges of their encodings (0, 2^20, 2^40).

use crate::harness::scenario::{one, setup_for, Flow, Scenario, MIB};

/// The scenarios of request keys at the edges of their encodings (0, 2^20, 2^40), in catalogue order.
pub fn scenarios() -> Vec<Scenario> {
    let mut v = Vec::new();
    for (id, key) in [
        ("key-0", 0u64),
        ("key-2^20-1", (1 << 20) - 1),
        ("key-2^20", 1 << 20),
        ("key-2^40-1", (1 << 40) - 1),
        ("key-2^40", 1 << 40),
    ] {
        let sk = if key == 1 << 40 {
            key
        } else if key == 0 {
            1
        } else {
            key - 1
        };
        v.push(Scenario::flow(
            id,
            &format!("client key {key:#x} (server key {sk:#x}), 4 MiB + 3: encoding in the SEND_IMM immediate and range checks"),
            setup_for(4 * MIB + 3),
            Flow {
                xfers: one(4 * MIB + 3, sk, key),
                ..Default::default()
            },
        ));
    }
    v
}
