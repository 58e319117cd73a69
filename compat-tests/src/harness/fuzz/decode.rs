//! Fuzz input bytes -> scenario. The bytes are (mostly: [`CUSTOM_FROM`]) the choices of the random generator
//! ([`crate::harness::random::generate`], with the fuzzer's extra choices of [`extend`]), read
//! in order: so every byte string, the empty one included, decodes to a valid scenario that
//! keeps every constraint the generator keeps (knob faults only on a single transfer, faults with
//! held delivery and short waits, capacity above the chunks in flight, no-copy for large
//! buffers), and a mutated byte changes one choice.

use std::time::Duration;

use crate::harness::ctx::{Delivery, Order, SendVia, Setup};
use crate::harness::random::{generate, Draw, Rng};
use crate::harness::scenario::{
    catalogue, chunks, Body, Cancel, CancelAt, DestroyAt, Flow, Scenario, MIB,
};

/// The bytes of an input as a [`Draw`]: each choice takes the bytes it needs (one for a choice
/// among at most 256, two, four or eight otherwise), little-endian; past the end the bytes come
/// from a fixed stream (SplitMix64 of the position), so that the generator's "draw again until
/// distinct" loops end on any input, a short one included. A `chance` byte of 0 is false.
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    /// A reader of `data`.
    pub fn new(data: &'a [u8]) -> Bytes<'a> {
        Bytes { data, pos: 0 }
    }

    fn take(&mut self, k: usize) -> u64 {
        let mut v = 0u64;
        for i in 0..k {
            let b = match self.data.get(self.pos) {
                Some(&b) => b,
                None => Rng::new(self.pos as u64).next_u64() as u8,
            };
            self.pos += 1;
            v |= (b as u64) << (8 * i);
        }
        v
    }
}

impl Draw for Bytes<'_> {
    fn next_u64(&mut self) -> u64 {
        self.take(8)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.take(width(n)) % n.max(1)
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.take(1) % 100 >= 100 - pct.min(100)
    }
}

/// A [`Draw`] that passes `inner`'s choices on and writes the bytes from which [`Bytes`] makes
/// the same choices: the encoding of a seeded random scenario as a fuzz input ([`encode_random`]).
struct Recorder<'a, D: Draw> {
    inner: &'a mut D,
    out: Vec<u8>,
}

impl<D: Draw> Recorder<'_, D> {
    fn put(&mut self, v: u64, k: usize) {
        self.out.extend_from_slice(&v.to_le_bytes()[..k]);
    }
}

impl<D: Draw> Draw for Recorder<'_, D> {
    fn next_u64(&mut self) -> u64 {
        let v = self.inner.next_u64();
        self.put(v, 8);
        v
    }
    fn below(&mut self, n: u64) -> u64 {
        let v = self.inner.below(n);
        self.put(v, width(n));
        v
    }
    fn chance(&mut self, pct: u64) -> bool {
        let c = self.inner.chance(pct);
        self.put(if c { 99 } else { 0 }, 1);
        c
    }
}

/// Bytes a choice among `n` takes.
fn width(n: u64) -> usize {
    match n {
        0..=0x100 => 1,
        0x101..=0x1_0000 => 2,
        0x1_0001..=0x1_0000_0000 => 4,
        _ => 8,
    }
}

/// The fuzz input that decodes to the random scenario of seed `seed` (`compat --random`'s
/// `rand-<seed>`): its choices, then zeros, so that none of the fuzzer's own choices is made
/// (each begins with a `chance` byte). `make compat`'s random scenarios become seeds this way
/// (`fuzz-compat --encode-random`).
pub fn encode_random(seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut rec = Recorder {
        inner: &mut rng,
        out: Vec::new(),
    };
    generate(&mut rec, None);
    let mut v = rec.out;
    v.resize(v.len() + 64, 0);
    v
}

/// A first byte from this value on selects one of [`customs`] (by the second byte) instead of a
/// flow: 12 in 256 inputs.
pub const CUSTOM_FROM: u8 = 0xf4;

/// The catalogue's scenarios with steps of their own, which no flow expresses (NULL arguments,
/// a second init, forged CRs, cancels, timed-out waits, destroy under a blocked waiter, log
/// registration, ...): part of what the fuzzer runs, so that it reaches what `make compat`
/// reaches and more.
pub fn customs() -> Vec<Scenario> {
    catalogue()
        .into_iter()
        .filter(|s| matches!(s.body, Body::Custom(..)))
        .collect()
}

/// The scenario of fuzz input `input`: a flow (id `fuzz`, no seed), or, when the first byte is
/// [`CUSTOM_FROM`] or more, the custom catalogue scenario the second byte picks (its own id, so
/// that the ledger entries listing it apply).
pub fn decode(input: &[u8]) -> Scenario {
    if let [b0, rest @ ..] = input {
        if *b0 >= CUSTOM_FROM {
            let c = customs();
            let k = rest.first().copied().unwrap_or(0) as usize % c.len();
            return c[k].clone();
        }
    }
    let mut sc = generate(&mut Bytes::new(input), Some(&extend::<Bytes>));
    sc.id = "fuzz".into();
    sc.budget = Duration::from_secs(30);
    sc
}

/// Makes the flow's receive-side delivery deterministic and its waits short, as every fault
/// wants (a fault may leave a wait unanswered).
fn faulted(f: &mut Flow) {
    f.wait_ms = f.wait_ms.min(150);
    f.untimed = false;
    if f.delivery == Delivery::Pass {
        f.delivery = Delivery::Held(Order::Fifo);
    }
}

fn add_knob(f: &mut Flow, knob: String) {
    if !f.knobs.is_empty() {
        f.knobs.push(',');
    }
    f.knobs.push_str(&knob);
}

/// The fuzzer's extra choices on a generated flow (`faulted`: the generator already injected a
/// fault; `jfr_only`: receives through a JFR): a receive-post failure (knob, single transfer),
/// a second notify failure, a duplicated held CR, a receive length off by one or 1, sends
/// through the jetty or no queue, no receive WRs, and values outside what a correct caller
/// passes (worker counts 0, 64, 1024, 1025; a length of 0 or 14 MiB + 1; a key of
/// 2^40 or 2^64 - 1; waits of 0 ms); untimed waits only where nothing may leave a wait
/// unanswered. Returns the description's suffix.
pub fn extend<D: Draw>(
    r: &mut D,
    setup: &mut Setup,
    f: &mut Flow,
    faulted_already: bool,
    jfr_only: bool,
) -> String {
    let mut d = String::new();
    let single = f.xfers.len() == 1 && !f.xfers[0].early;
    let mut fault = faulted_already;
    if single && r.chance(15) {
        let n = 1 + r.below(chunks(f.xfers[0].len).max(1) as u64);
        let st = r.pick(&[12i64, 4096]);
        add_knob(f, format!("fail_recv_post={n}:{st}"));
        d.push_str(&format!(" fail_recv_post={n}:{st}"));
        fault = true;
    }
    if r.chance(10) {
        let i = r.below(f.xfers.len() as u64) as usize;
        let k = r.below(chunks(f.xfers[i].len).max(1) as u64) as u8;
        if f.xfers[i].cb_fail.is_none() {
            f.xfers[i].cb_fail = Some(k);
            d.push_str(&format!(" notify-fails ck=0x{:x} chunk {k}", f.xfers[i].ck));
            fault = true;
        }
    }
    if r.chance(10) {
        let i = r.below(f.xfers.len() as u64) as usize;
        let len = f.xfers[i].len;
        let rl = match r.below(3) {
            0 => len.saturating_sub(1).max(1),
            1 => len + 1,
            _ => 1,
        };
        if rl != len {
            f.xfers[i].recv_len = rl;
            d.push_str(&format!(" recv_len[{i}]={rl}"));
            fault = true;
        }
    }
    if r.chance(3) {
        f.capacity = 0;
        d.push_str(" cap=0");
        fault = true;
    }
    if r.chance(20) {
        f.via = r.pick(&[
            SendVia::Jetty,
            SendVia::Jetty,
            SendVia::Jetty,
            SendVia::None,
        ]);
        d.push_str(&format!(" via={:?}", f.via));
        fault |= f.via == SendVia::None;
    }
    // Values outside what a correct caller passes: the argument checks of both libraries.
    if r.chance(4) {
        f.workers = r.pick(&[0u32, 64, 1024, 1025]);
        d.push_str(&format!(" workers={}", f.workers));
        fault = true;
    }
    if r.chance(5) {
        let i = r.below(f.xfers.len() as u64) as usize;
        let len = r.pick(&[0u32, MAX_LEN + 1]);
        let x = &mut f.xfers[i];
        x.len = len;
        x.recv_len = if r.chance(50) { len } else { x.recv_len };
        // Room for what a library that does not check the length might move.
        let need = x.off + len as usize + 4096;
        setup.buf_len = setup.buf_len.max(need);
        setup.nocopy |= setup.buf_len > 24 << 20;
        d.push_str(&format!(" len[{i}]={len} recv_len[{i}]={}", x.recv_len));
        fault = true;
    }
    if r.chance(5) {
        let i = r.below(f.xfers.len() as u64) as usize;
        let key = r.pick(&[1u64 << 40, u64::MAX]);
        if r.chance(50) {
            f.xfers[i].sk = key;
        } else {
            f.xfers[i].ck = key;
        }
        d.push_str(&format!(" key[{i}]=0x{key:x}"));
        fault = true;
    }
    if r.chance(4) {
        f.wait_ms = 0;
        d.push_str(" wait=0");
        fault = true;
    }
    // Cancels (recv or send, with the sync or by id, when registered, before or after the
    // receive-side CRs are handed over) and destroy in flight.
    if r.chance(12) {
        let i = r.below(f.xfers.len() as u64) as usize;
        let at = r.pick(&[CancelAt::Registered, CancelAt::Before, CancelAt::After]);
        let c = Cancel {
            at,
            with_sync: r.chance(50),
        };
        if at == CancelAt::Registered || r.chance(50) {
            f.xfers[i].cancel_recv = Some(c);
        } else {
            f.xfers[i].cancel_send = Some(c);
        }
        d.push_str(&format!(" cancel[{i}]={c:?}"));
        fault = true;
    }
    if r.chance(6) {
        f.destroy = DestroyAt::Inflight;
        d.push_str(" destroy-inflight");
        fault = true;
    }
    if fault {
        faulted(f);
    }
    // Nothing runs after the receive-side CRs are handed over when destroy comes in flight.
    if f.destroy == DestroyAt::Inflight {
        for x in &mut f.xfers {
            for c in [&mut x.cancel_recv, &mut x.cancel_send]
                .into_iter()
                .flatten()
            {
                if c.at == CancelAt::After {
                    c.at = CancelAt::Before;
                }
            }
        }
    }
    if let Delivery::Held(_) = f.delivery {
        if r.chance(15) {
            let total: u32 = f.xfers.iter().map(|x| chunks(x.len)).sum();
            let n = r.below(total.max(1) as u64) as usize;
            f.dup_held = Some(n);
            d.push_str(&format!(" dup-held={n}"));
        }
    }
    if !fault && !jfr_only && r.chance(10) {
        f.untimed = true;
        d.push_str(" untimed");
    }
    d
}

/// Largest transfer a decoded flow holds (for the minimizer's length steps).
pub const MAX_LEN: u32 = 14 * MIB;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::random;

    fn flow(sc: &Scenario) -> &Flow {
        match &sc.body {
            Body::Flow(f) => f,
            Body::Custom(..) => panic!("{} is not a flow", sc.id),
        }
    }

    #[test]
    fn a_high_first_byte_picks_a_custom_scenario() {
        let c = customs();
        assert!(c.len() >= 10 && c.iter().any(|s| s.id == "destroy-inflight"));
        for k in 0..c.len() as u8 {
            assert_eq!(decode(&[CUSTOM_FROM, k]).id, c[k as usize].id);
        }
        assert_eq!(decode(&[0xff]).id, c[0].id);
        assert_eq!(decode(&[CUSTOM_FROM - 1]).id, "fuzz");
    }

    #[test]
    fn every_input_decodes_to_a_valid_flow() {
        let mut r = Rng::new(3);
        for n in 0..400 {
            let len = (r.below(64)) as usize;
            let mut input: Vec<u8> = (0..len).map(|_| r.next_u64() as u8).collect();
            if let Some(b) = input.first_mut() {
                *b %= CUSTOM_FROM;
            }
            let sc = decode(&input);
            let f = flow(&sc);
            assert!(
                (1..=6).contains(&f.xfers.len()),
                "input {n}: {} transfers",
                f.xfers.len()
            );
            let mut keys = std::collections::BTreeSet::new();
            for x in &f.xfers {
                let moved = (MAX_LEN + 1).min(x.len.max(x.recv_len)) as usize;
                assert!(x.off + moved <= sc.setup.buf_len, "{}", sc.desc);
                if x.len >= 1 && x.len <= MAX_LEN && x.sk < 1 << 40 && x.ck < 1 << 40 {
                    assert!(keys.insert(x.sk) && keys.insert(x.ck), "{}", sc.desc);
                }
            }
            if !f.knobs.is_empty() {
                assert_eq!(f.xfers.len(), 1, "{}", sc.desc);
                assert_ne!(f.delivery, Delivery::Pass, "{}", sc.desc);
            }
            if f.untimed {
                assert!(f.knobs.is_empty() && f.xfers.iter().all(|x| x.cb_fail.is_none()));
            }
        }
    }

    #[test]
    fn every_decoded_flow_is_a_scenario_file() {
        let mut r = Rng::new(5);
        for _ in 0..300 {
            let mut input: Vec<u8> = (0..64).map(|_| r.next_u64() as u8).collect();
            input[0] %= CUSTOM_FROM;
            let sc = decode(&input);
            let text = crate::harness::scenario::file::to_text(&sc);
            let back = crate::harness::scenario::file::parse(&text, "fuzz.scn")
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(crate::harness::scenario::file::to_text(&back), text);
        }
    }

    #[test]
    fn a_random_scenario_encodes_to_an_input_that_decodes_to_it() {
        for seed in 20250413..20250413 + 200 {
            let input = encode_random(seed);
            assert!(input.first().is_some_and(|b| *b < CUSTOM_FROM));
            let (a, b) = (random::scenario(seed), decode(&input));
            let text = |s: &Scenario| {
                let mut s = s.clone();
                s.id = "x".into();
                s.seed = None;
                crate::harness::scenario::file::to_text(&s)
            };
            assert_eq!(text(&a), text(&b), "rand-{seed}");
            assert_eq!(a.features, b.features, "rand-{seed}");
        }
    }

    #[test]
    fn decoding_is_deterministic_and_a_byte_changes_a_choice() {
        for input in [&b""[..], b"\0", b"\xff\xff\xff\xff", b"0123456789abcdef"] {
            assert_eq!(decode(input).desc, decode(input).desc);
        }
        // The first byte is the worker count.
        let a = flow(&decode(&[0; 32])).workers;
        let b = flow(&decode(&[[1u8].as_slice(), &[0; 31]].concat())).workers;
        assert_eq!((a, b), (1, 2));
    }
}
