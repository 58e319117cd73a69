//! The catalogue's scenarios of transfer lengths, from 1 byte to 14 MiB + 1 (one chunk, chunk boundaries, the 7-chunk limit and beyond it).

use crate::harness::scenario::{one, setup_for, Flow, Scenario, MIB};

/// The scenarios of transfer lengths, from 1 byte to 14 MiB + 1 (one chunk, chunk boundaries, the 7-chunk limit and beyond it), in catalogue order.
pub fn scenarios() -> Vec<Scenario> {
    let mut v = Vec::new();
    let two = 2 * MIB;
    for (id, len) in [
        ("len-1", 1u32),
        ("len-2m", two),
        ("len-2m+1", two + 1),
        ("len-4m", 4 * MIB),
        ("len-6m+5", 6 * MIB + 5),
        ("len-14m", 14 * MIB),
        ("len-14m+1", 14 * MIB + 1),
    ] {
        v.push(Scenario::flow(
            id,
            &format!("send + recv of {len} bytes, untimed waits, data checked byte for byte"),
            setup_for(len),
            Flow {
                xfers: one(len, 0x123456789A, 0xABCDE12345),
                untimed: true,
                ..Default::default()
            },
        ));
    }
    v
}
