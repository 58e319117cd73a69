//! The plan model of `compat --split`: what one two-process run does ([`Plan`], [`PlanKind`]),
//! which catalogue flows can be cut in two ([`splittable`]), every plan ([`plans`]: the
//! splittable scenarios, the interop column's cells, peer death) and the peer-death bound and
//! the reasons it is skipped.

use std::time::Duration;

use crate::fixture::RecvKind;
use crate::harness::ctx::{Delivery, SendVia, Setup};
use crate::harness::interop;
use crate::harness::scenario::{self, Body, DestroyAt, Flow, Xfer, MIB};
use crate::lib_under_test::DEFAULT_CHUNK_SIZE;

/// Longest time the sender's wait may take to fail after the receiver was killed: the
/// provider's peer-death bound (docs/loopback.md, 100 ms) plus the library's reaction and the
/// scheduling of a loaded 2-core machine.
pub const PEER_DEATH_BOUND: Duration = Duration::from_millis(1000);

/// Why peer death is not run in hardware mode.
pub const PEER_DEATH_SKIP: &str = "peer death needs the receiver's receiver-not-ready wait made \
     longer than the run (the loopback's rnr_timeout_ms), so that the transfer stalls until the \
     kill; a provider treated as unknown offers no such setting";

/// Why peer death is not run with the receiver on a serving node.
pub const PEER_DEATH_NODE_SKIP: &str = "peer death kills the receiver process at a moment the \
     sender's node notes on its own clock (CLOCK_MONOTONIC); with the receiver on another node \
     neither the kill nor the clock is the driver's";

/// What a two-process run does.
#[derive(Clone)]
pub enum PlanKind {
    /// A catalogue scenario: the C pair and the Rust pair are compared.
    Scenario,
    /// A cell of the interop matrix's two-process column.
    Interop,
    /// The receiver is killed mid-transfer; the sender's wait must fail within the bound.
    PeerDeath,
}

/// One two-process run.
#[derive(Clone)]
pub struct Plan {
    pub id: String,
    pub desc: String,
    pub setup: Setup,
    pub flow: Flow,
    pub kind: PlanKind,
}

/// A catalogue flow whose sender and receiver can be split: receive-side CRs handed over as
/// polled (no delivery order imposed across processes), no loopback knob (knobs count per
/// process), every transfer starting (1 byte ..= 14 MiB, 40-bit keys) after its receive, through the JFS,
/// to a receive jetty, with data copied.
pub fn splittable(sc: &scenario::Scenario) -> Option<Flow> {
    let Body::Flow(f) = &sc.body else {
        return None;
    };
    let ok = f.delivery == Delivery::Pass
        && f.knobs.is_empty()
        && f.via == SendVia::Jfs
        && f.dup_held.is_none()
        && f.destroy == DestroyAt::End
        && f.capacity >= 1
        && sc.setup.recv_kind == RecvKind::Jetty
        && !sc.setup.nocopy
        && !f.xfers.is_empty()
        && f.xfers.iter().all(|x| {
            !x.early
                && !x.no_send
                && x.cb_fail.is_none()
                && x.cancel_recv.is_none()
                && x.cancel_send.is_none()
                && x.recv_len == x.len
                && x.len >= 1
                && x.len <= 7 * DEFAULT_CHUNK_SIZE
                && x.sk < 1 << 40
                && x.ck < 1 << 40
        });
    ok.then(|| f.clone())
}

/// Every plan: the splittable catalogue scenarios, the interop column's cells
/// (`xp-<dir>-<len>`) and the peer-death runs.
pub fn plans() -> Vec<Plan> {
    let mut v: Vec<Plan> = scenario::catalogue()
        .iter()
        .filter_map(|sc| {
            splittable(sc).map(|flow| Plan {
                id: sc.id.clone(),
                desc: sc.desc.clone(),
                setup: sc.setup,
                flow,
                kind: PlanKind::Scenario,
            })
        })
        .collect();
    let mut lens = interop::LENS.to_vec();
    lens.insert(0, 1);
    for len in lens {
        let ck = 0xC0FFEE + len as u64;
        v.push(Plan {
            id: format!("xp-{len}"),
            desc: format!("interop, two processes, {len} bytes"),
            setup: Setup {
                buf_len: (len as usize).max(4 << 20),
                ..Default::default()
            },
            flow: Flow {
                xfers: vec![Xfer::new(len, 0x5EED + len as u64, ck)],
                ..Default::default()
            },
            kind: PlanKind::Interop,
        });
    }
    v.push(Plan {
        id: "peer-death".into(),
        desc: "14 MiB; the receiver process is killed (SIGKILL) mid-transfer; the sender's \
               wait_and_free_sync_timeout must fail within the bound"
            .into(),
        setup: Setup {
            buf_len: 14 * MIB as usize,
            ..Default::default()
        },
        // Capacity 1: the receiver's library posts 4 recv WRs and, its receive-side CRs held,
        // never re-posts them; the fifth SEND_IMM waits for a recv WR (the receiver's RNR wait
        // is made long), so the transfer stalls mid-way until the receiver dies.
        flow: Flow {
            workers: 2,
            capacity: 1,
            xfers: vec![Xfer::new(14 * MIB, 0xDEAD, 0xBEEF)],
            ..Default::default()
        },
        kind: PlanKind::PeerDeath,
    });
    v
}

/// The plan named `id`.
pub fn plan(id: &str) -> Option<Plan> {
    plans().into_iter().find(|p| p.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_has_splittable_flows_and_leaves_out_the_rest() {
        let p = plans();
        let ids: Vec<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert!(
            ids.contains(&"len-6m+5") && ids.contains(&"event-mode"),
            "{ids:?}"
        );
        // Knobs, held delivery and transfers that never start cannot be split.
        for no in [
            "len-14m+1",
            "key-2^40",
            "recv-reverse",
            "error-cr",
            "early-send-imm",
        ] {
            assert!(!ids.contains(&no), "{no} in {ids:?}");
        }
        assert!(ids.contains(&"peer-death") && ids.contains(&"xp-1"));
    }
}
