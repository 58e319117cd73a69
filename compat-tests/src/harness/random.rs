//! Seeded random scenarios.
//!
//! Run seed `S` and count `N` give the scenarios with seeds `S, S+1, ..., S+N-1`; scenario seed
//! `x` alone determines the scenario (`rand-<x>`), so `compat --seed x --random 1` replays it.
//! A scenario draws worker count, recv capacity, 1..6 transfers (lengths from a boundary menu or
//! uniform in 1..=14 MiB, distinct 40-bit keys or edge keys), CR delivery (as polled, or held and
//! released FIFO / reversed / shuffled), poll or event mode and at most one fault: a post
//! failure, an error-status CR, a dropped or duplicated CR (loopback knobs, single-transfer
//! scenarios only, where the WR/CR numbering is deterministic), a notify callback failure at
//! chunk k, or a transfer whose SEND_IMMs arrive before its recv registers.
//!
//! The generator ([`generate`]) takes its choices from a [`Draw`]: the seeded [`Rng`] here, the
//! bytes of a fuzz input in `fuzz-compat` ([`super::fuzz::decode`]), which adds choices of its
//! own after these.

use std::time::Duration;

use super::ctx::{Delivery, Order, Setup};
use super::scenario::{chunks, flow_features, Body, Flow, Scenario, Xfer, MIB};
use crate::fixture::RecvKind;

/// A source of the generator's choices: the seeded [`Rng`] (`compat --random`), or the bytes of
/// a fuzz input (`fuzz-compat`, [`super::fuzz::decode`]), so that one generator, with one set
/// of constraints, makes both.
pub trait Draw {
    /// Next value.
    fn next_u64(&mut self) -> u64;
    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// True with probability `pct` %.
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    /// One of `v`.
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
}

/// SplitMix64.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
}

impl Draw for Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

const LENS: &[u32] = &[
    1,
    4096,
    2 * MIB,
    2 * MIB + 1,
    3 * MIB,
    4 * MIB,
    4 * MIB + 1,
    6 * MIB + 5,
    8 * MIB - 1,
    10 * MIB,
    12 * MIB + 1,
    14 * MIB,
];

/// The random scenario of seed `seed`.
pub fn scenario(seed: u64) -> Scenario {
    let mut sc = generate(&mut Rng::new(seed), None);
    sc.id = format!("rand-{seed}");
    sc.seed = Some(seed);
    sc
}

/// Choices made after the generator's own on the scenario it drew: `(draw, setup, flow, a fault
/// was injected, receives through a JFR only) -> description suffix`.
pub type More<'a, D> = &'a dyn Fn(&mut D, &mut Setup, &mut Flow, bool, bool) -> String;

/// The scenario `r` chooses. `more` adds choices of the caller's (the fuzzer's: a second fault,
/// out-of-range values, ...), drawn after all of the generator's, so a seeded scenario is the
/// same whether or not a caller adds any.
pub fn generate<D: Draw>(r: &mut D, more: Option<More<D>>) -> Scenario {
    let workers = 1 + r.below(4) as u32;
    let mut capacity = r.pick(&[1u32, 4, 16, 64]);
    let event_mode = r.chance(20);
    let jfr_only = r.chance(5);
    let fault_kind = if r.chance(35) { r.below(7) } else { 99 };
    let knob_fault = fault_kind <= 3;
    let n = if knob_fault {
        1
    } else {
        r.pick(&[1usize, 1, 2, 3, 4, 6])
    };
    let mut xfers = Vec::new();
    let mut off = 0usize;
    let mut used = std::collections::BTreeSet::new();
    for i in 0..n {
        let len = if r.chance(60) {
            r.pick(LENS)
        } else {
            1 + r.below(14 * MIB as u64) as u32
        };
        let mut key = || loop {
            let k = match r.below(10) {
                0 => r.pick(&[0u64, (1 << 20) - 1, 1 << 20, (1 << 40) - 1]),
                _ => r.below(1 << 40),
            };
            if used.insert(k) {
                return k;
            }
        };
        let sk = key();
        let ck = key();
        xfers.push(Xfer {
            off,
            ..Xfer::new(len, sk, ck)
        });
        off += (len as usize).div_ceil(4096) * 4096 + 4096;
        let _ = i;
    }
    let total_chunks: u32 = xfers.iter().map(|x| chunks(x.len)).sum();
    capacity = capacity.max(total_chunks.div_ceil(4) + 1);
    let delivery = match r.below(4) {
        0 => Delivery::Pass,
        1 => Delivery::Held(Order::Fifo),
        2 => Delivery::Held(Order::Reverse),
        _ => Delivery::Held(Order::Shuffle(r.next_u64())),
    };
    let mut f = Flow {
        workers,
        capacity,
        delivery,
        xfers,
        wait_ms: 5000,
        ..Default::default()
    };
    let mut fault_desc = "none".to_string();
    if fault_kind != 99 {
        f.wait_ms = 150;
        // Faults want deterministic receive-side delivery.
        if f.delivery == Delivery::Pass {
            f.delivery = Delivery::Held(Order::Fifo);
        }
        let x0 = &f.xfers[0];
        let wrs = 2 * chunks(x0.len).max(1) as u64;
        match fault_kind {
            0 => {
                let nth = 1 + r.below(wrs);
                let st = r.pick(&[-1i64, 11, 12]);
                f.knobs = format!("fail_post={nth}:{st}");
            }
            1 => {
                let nth = 1 + r.below(wrs);
                let st = r.pick(&[4u32, 8, 11]);
                f.knobs = format!("fail_cr={nth}:{st}");
            }
            2 => f.knobs = format!("drop_cr={}", 1 + r.below(3 * wrs / 2)),
            3 => {
                // CR n of a single request: 3k+1 = WRITE k, 3k+2 = its SEND_IMM's receive-side
                // CR, 3k+3 = that SEND_IMM's local CR.
                let k = r.below(wrs / 2);
                f.knobs = format!("dup_cr={}", 3 * k + 1 + r.below(3));
            }
            4 | 5 => {
                let i = r.below(f.xfers.len() as u64) as usize;
                let k = r.below(chunks(f.xfers[i].len).max(1) as u64) as u8;
                f.xfers[i].cb_fail = Some(k);
                fault_desc = format!("notify fails at ck=0x{:x} chunk {k}", f.xfers[i].ck);
            }
            _ => {
                if f.xfers.len() < 2 {
                    // An early transfer needs a first one to prefill the receive queue.
                    let len = 2 * MIB + 1;
                    let mut k2;
                    loop {
                        k2 = r.below(1 << 40) & !1;
                        if !used.contains(&k2) && !used.contains(&(k2 | 1)) {
                            break;
                        }
                    }
                    used.insert(k2);
                    used.insert(k2 | 1);
                    let off =
                        f.xfers[0].off + (f.xfers[0].len as usize).div_ceil(4096) * 4096 + 4096;
                    f.xfers.insert(
                        0,
                        Xfer {
                            off,
                            ..Xfer::new(len, k2, k2 | 1)
                        },
                    );
                }
                let last = f.xfers.len() - 1;
                f.xfers[last].early = true;
                fault_desc = format!("ck=0x{:x} arrives before its recv", f.xfers[last].ck);
            }
        }
        if !f.knobs.is_empty() {
            fault_desc = f.knobs.clone();
        }
    }
    let total: usize = f
        .xfers
        .iter()
        .map(|x| (x.len as usize).div_ceil(4096) * 4096 + 4096)
        .sum();
    let nocopy = total > 24 << 20 || r.chance(30);
    let setup = Setup {
        recv_kind: if jfr_only {
            RecvKind::Jfr
        } else {
            RecvKind::Jetty
        },
        event_mode,
        buf_len: total.max(4 << 20),
        nocopy,
    };
    if jfr_only {
        f.wait_ms = f.wait_ms.min(150);
    }
    let lens: Vec<String> = f.xfers.iter().map(|x| x.len.to_string()).collect();
    let desc = format!(
        "workers={} cap={} {} {}{}{} lens=[{}] delivery={} fault={}",
        f.workers,
        f.capacity,
        if event_mode { "event" } else { "poll" },
        if jfr_only { "jfr-only " } else { "" },
        if nocopy { "no-copy " } else { "" },
        if f.xfers.len() > 1 {
            "concurrent"
        } else {
            "single"
        },
        lens.join(","),
        match f.delivery {
            Delivery::Pass => "as-polled".to_string(),
            Delivery::Held(o) => o.name(),
        },
        fault_desc
    );
    let mut desc = desc;
    let mut setup = setup;
    if let Some(more) = more {
        desc.push_str(&more(r, &mut setup, &mut f, fault_kind != 99, jfr_only));
    }
    let features = flow_features(&setup, &f);
    Scenario {
        id: String::new(),
        desc,
        setup,
        body: Body::Flow(f),
        features,
        budget: Duration::from_secs(30),
        seed: None,
        expect: None,
    }
}

/// `n` scenarios from run seed `seed`.
pub fn scenarios(seed: u64, n: usize) -> Vec<Scenario> {
    (0..n as u64)
        .map(|i| scenario(seed.wrapping_add(i)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_replayable() {
        let a = scenarios(42, 20);
        let b = scenarios(42, 20);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.desc, y.desc);
            assert_eq!(x.features, y.features);
        }
        assert_eq!(scenario(45).desc, a[3].desc);
        assert_eq!(a[3].id, "rand-45");
    }

    #[test]
    fn keys_are_distinct_and_in_range() {
        for s in scenarios(7, 200) {
            let Body::Flow(f) = &s.body else { panic!() };
            let mut keys = std::collections::BTreeSet::new();
            for x in &f.xfers {
                assert!(x.sk < 1 << 40 && x.ck < 1 << 40);
                assert!(keys.insert(x.sk), "{}", s.desc);
                assert!(keys.insert(x.ck), "{}", s.desc);
                assert!(x.off + x.len as usize <= s.setup.buf_len);
            }
        }
    }
}
