//! What counts as a finding, its signature, its structural minimization and the files it is
//! written to.
//!
//! A finding is a FAIL verdict (a difference no ledger entry explains), a hang (the scenario's
//! watchdog), a panic of the harness in a run, a crash of the fuzzing process (recorded by the
//! supervising parent, [`super::engine`]), or a leak of threads by either library (the process
//! has more threads after the library's run, its handle destroyed, than before it). Its
//! signature names the kind and, for a FAIL, the aspects no ledger entry explains; two findings
//! with one signature are one finding.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::fixture::RecvKind;
use crate::harness::aspect::AspectVerdict;
use crate::harness::ctx::{Delivery, Order, SendVia};
use crate::harness::outcome::{Outcome, Verdict};
use crate::harness::present::sidebyside;
use crate::harness::scenario::{chunks, file, flow_features, Body, DestroyAt, Flow, Scenario, MIB};

/// A finding of one run: its signature and the reason in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub signature: String,
    pub reason: String,
}

/// The finding of a judged run, and the threads each library's run left behind (legacy, Rust:
/// their names).
pub fn of(o: &Outcome, leaked: [Vec<String>; 2]) -> Option<Finding> {
    if let Verdict::Fail(why) = &o.verdict {
        let sig = if why.contains("watchdog") {
            let lib = if why.starts_with("legacy") {
                "legacy"
            } else {
                "rust"
            };
            format!("hang-{lib}")
        } else if why.contains("panicked") {
            "harness-panic".to_string()
        } else {
            let failed: Vec<&str> = o
                .aspects
                .iter()
                .filter(|(_, v)| *v == AspectVerdict::Fail)
                .map(|(a, _)| a.key())
                .collect();
            if failed.is_empty() {
                "fail".to_string()
            } else {
                format!("fail-{}", failed.join("+"))
            }
        };
        return Some(Finding {
            signature: sig,
            reason: why.clone(),
        });
    }
    for (names, lib) in leaked.iter().zip(["legacy", "rust"]) {
        if !names.is_empty() {
            return Some(Finding {
                signature: format!("thread-leak-{lib}"),
                reason: format!(
                    "{lib}: thread(s) started by its run still running 1 s after it (handle destroyed): {}",
                    names.join(", ")
                ),
            });
        }
    }
    None
}

fn sync_or_id(with_sync: bool) -> &'static str {
    if with_sync {
        "sync"
    } else {
        "id"
    }
}

/// A one-line description of a flow scenario (as the random generator writes it).
pub fn describe(sc: &Scenario) -> String {
    let Body::Flow(f) = &sc.body else {
        return sc.desc.clone();
    };
    let x: Vec<String> = f
        .xfers
        .iter()
        .map(|x| {
            let mut s = format!("{}B sk=0x{:x} ck=0x{:x} off={}", x.len, x.sk, x.ck, x.off);
            if x.recv_len != x.len {
                s.push_str(&format!(" recv_len={}", x.recv_len));
            }
            if x.early {
                s.push_str(" early");
            }
            if let Some(k) = x.cb_fail {
                s.push_str(&format!(" notify-fails@{k}"));
            }
            if let Some(c) = x.cancel_recv {
                s.push_str(&format!(
                    " cancel-recv={:?}/{}",
                    c.at,
                    sync_or_id(c.with_sync)
                ));
            }
            if let Some(c) = x.cancel_send {
                s.push_str(&format!(
                    " cancel-send={:?}/{}",
                    c.at,
                    sync_or_id(c.with_sync)
                ));
            }
            s
        })
        .collect();
    format!(
        "workers={} cap={} {}{}{}{} via={:?} delivery={}{} knobs=[{}] wait={}{}{} xfers=[{}]",
        f.workers,
        f.capacity,
        if sc.setup.event_mode { "event" } else { "poll" },
        if sc.setup.recv_kind == RecvKind::Jfr {
            " jfr-only"
        } else {
            ""
        },
        if sc.setup.nocopy { " no-copy" } else { "" },
        if f.untimed { " untimed" } else { "" },
        f.via,
        match f.delivery {
            Delivery::Pass => "as-polled".to_string(),
            Delivery::Held(o) => o.name(),
        },
        f.dup_held
            .map(|n| format!(" dup-held={n}"))
            .unwrap_or_default(),
        f.knobs,
        f.wait_ms,
        if sc.setup.buf_len > 24 << 20 {
            " big-buffers"
        } else {
            ""
        },
        if f.destroy == DestroyAt::Inflight {
            " destroy-inflight"
        } else {
            ""
        },
        x.join("; ")
    )
}

/// `sc` with flow `f` (features and description recomputed).
fn with_flow(sc: &Scenario, f: Flow) -> Scenario {
    let mut s = sc.clone();
    s.features = flow_features(&s.setup, &f);
    s.body = Body::Flow(f);
    s.desc = describe(&s);
    s
}

/// Capacity the generator would give `f` at least (receive WRs for the chunks in flight).
fn capacity_floor(f: &Flow) -> u32 {
    let total: u32 = f.xfers.iter().map(|x| chunks(x.len)).sum();
    total.div_ceil(4) + 1
}

/// Simpler scenarios than `sc`, simplest step first: fewer transfers, shorter lengths (towards
/// chunk boundaries and 1), valid lengths and keys, fewer faults, simpler delivery, one worker,
/// waits of 150 ms, plainer setup.
pub fn simpler(sc: &Scenario) -> Vec<Scenario> {
    let Body::Flow(f) = &sc.body else {
        return Vec::new();
    };
    let mut v = Vec::new();
    let mut push = |g: Flow| v.push(with_flow(sc, g));
    if f.xfers.len() > 1 {
        for i in 0..f.xfers.len() {
            let mut g = f.clone();
            g.xfers.remove(i);
            if g.xfers.len() == 1 {
                g.xfers[0].early = false;
            }
            if g.dup_held
                .is_some_and(|n| n >= g.xfers.iter().map(|x| chunks(x.len) as usize).sum())
            {
                g.dup_held = None;
            }
            push(g);
        }
    }
    for (i, x) in f.xfers.iter().enumerate() {
        let lens = [
            1,
            2 * MIB,
            2 * MIB + 1,
            4 * MIB,
            x.len / 2,
            x.len.saturating_sub(1),
        ];
        for len in lens {
            if len >= 1 && len < x.len && (f.knobs.is_empty() || chunks(len) == chunks(x.len)) {
                let mut g = f.clone();
                let d = g.xfers[i].len - len;
                g.xfers[i].len = len;
                g.xfers[i].recv_len = g.xfers[i].recv_len.saturating_sub(d).max(1);
                if let Some(k) = g.xfers[i].cb_fail {
                    g.xfers[i].cb_fail = Some(k.min((chunks(len).max(1) - 1).min(255) as u8));
                }
                push(g);
            }
        }
        if x.len == 0 {
            let mut g = f.clone();
            g.xfers[i].len = 1;
            push(g);
        }
        for (k, key) in [(0, x.sk), (1, x.ck)] {
            if key >= 1 << 40 {
                // A valid key no other transfer uses.
                let mut g = f.clone();
                let used: Vec<u64> = f.xfers.iter().flat_map(|y| [y.sk, y.ck]).collect();
                let fresh = (0x5a5a_0000u64..).find(|v| !used.contains(v)).unwrap_or(0);
                if k == 0 {
                    g.xfers[i].sk = fresh;
                } else {
                    g.xfers[i].ck = fresh;
                }
                push(g);
            }
        }
        if x.recv_len != x.len {
            let mut g = f.clone();
            g.xfers[i].recv_len = x.len;
            push(g);
        }
        if x.cb_fail.is_some() {
            let mut g = f.clone();
            g.xfers[i].cb_fail = None;
            push(g);
        }
        if x.early && i > 0 {
            let mut g = f.clone();
            g.xfers[i].early = false;
            push(g);
        }
    }
    for (i, x) in f.xfers.iter().enumerate() {
        if x.cancel_recv.is_some() {
            let mut g = f.clone();
            g.xfers[i].cancel_recv = None;
            push(g);
        }
        if x.cancel_send.is_some() {
            let mut g = f.clone();
            g.xfers[i].cancel_send = None;
            push(g);
        }
    }
    if f.destroy == DestroyAt::Inflight {
        push(Flow {
            destroy: DestroyAt::End,
            ..f.clone()
        });
    }
    let knobs: Vec<&str> = f.knobs.split(',').filter(|k| !k.is_empty()).collect();
    for i in 0..knobs.len() {
        let mut g = f.clone();
        let rest: Vec<&str> = knobs
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, k)| *k)
            .collect();
        g.knobs = rest.join(",");
        push(g);
    }
    if f.dup_held.is_some() {
        push(Flow {
            dup_held: None,
            ..f.clone()
        });
    }
    match f.delivery {
        Delivery::Held(Order::Fifo) => {
            let faulted = !f.knobs.is_empty()
                || f.dup_held.is_some()
                || f.destroy == DestroyAt::Inflight
                || f.xfers
                    .iter()
                    .any(|x| x.cancel_recv.is_some() || x.cancel_send.is_some())
                || f.xfers
                    .iter()
                    .any(|x| x.cb_fail.is_some() || x.early || x.recv_len != x.len);
            if !faulted {
                push(Flow {
                    delivery: Delivery::Pass,
                    ..f.clone()
                });
            }
        }
        Delivery::Held(_) => push(Flow {
            delivery: Delivery::Held(Order::Fifo),
            ..f.clone()
        }),
        Delivery::Pass => {}
    }
    if f.workers != 1 {
        push(Flow {
            workers: 1,
            ..f.clone()
        });
    }
    if f.wait_ms < 150 {
        push(Flow {
            wait_ms: 150,
            ..f.clone()
        });
    }
    let floor = capacity_floor(f).max(1);
    if f.capacity > floor {
        push(Flow {
            capacity: floor,
            ..f.clone()
        });
    }
    if f.via != SendVia::Jfs {
        push(Flow {
            via: SendVia::Jfs,
            ..f.clone()
        });
    }
    if f.untimed {
        push(Flow {
            untimed: false,
            ..f.clone()
        });
    }
    let mut setups = Vec::new();
    if sc.setup.event_mode {
        setups.push(crate::harness::ctx::Setup {
            event_mode: false,
            ..sc.setup
        });
    }
    if sc.setup.recv_kind == RecvKind::Jfr {
        setups.push(crate::harness::ctx::Setup {
            recv_kind: RecvKind::Jetty,
            ..sc.setup
        });
    }
    if sc.setup.nocopy && sc.setup.buf_len <= 24 << 20 {
        setups.push(crate::harness::ctx::Setup {
            nocopy: false,
            ..sc.setup
        });
    }
    for s in setups {
        let mut t = sc.clone();
        t.setup = s;
        v.push(with_flow(&t, f.clone()));
    }
    v
}

/// Greedy structural minimization: takes the first simpler scenario that still gives
/// `signature` (`run` gives a scenario's finding signature, if any), until none does or
/// `budget` runs or `limit` time are spent.
pub fn minimize(
    sc: &Scenario,
    signature: &str,
    budget: usize,
    limit: Duration,
    run: &mut dyn FnMut(&Scenario) -> Option<String>,
) -> (Scenario, usize) {
    let t = Instant::now();
    let mut cur = sc.clone();
    let mut runs = 0;
    'outer: loop {
        for cand in simpler(&cur) {
            if runs >= budget || t.elapsed() > limit {
                break 'outer;
            }
            runs += 1;
            if run(&cand).is_some_and(|f| f == signature) {
                cur = cand;
                continue 'outer;
            }
        }
        break;
    }
    (cur, runs)
}

/// The two traces of `o` side by side, as text: per section, each row's tag (`=` same, `-`
/// only C, `+` only Rust, `~` changed), aspect, the C reference's line and the Rust library's.
pub fn side_by_side(o: &Outcome) -> String {
    let mut s = String::new();
    let w = 70;
    for sec in sidebyside::build(&o.legacy_trace, &o.rust_trace) {
        s.push_str(&format!("## {}\n", sec.name));
        s.push_str(&format!(
            "  {:<12} {:<w$} | {}\n",
            "", "C reference", "Rust library"
        ));
        for r in sec.rows {
            s.push_str(&format!(
                "{} {:<12} {:<w$} | {}\n",
                r.tag,
                r.aspect.key(),
                r.left.unwrap_or_default(),
                r.right.unwrap_or_default()
            ));
        }
        s.push('\n');
    }
    s
}

/// FNV-1a of `data`: the name of a corpus entry or finding.
pub fn hash(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// What is written for one finding.
pub struct Written<'a> {
    pub finding: &'a Finding,
    pub input: &'a [u8],
    pub original: &'a Scenario,
    pub minimized: &'a Scenario,
    /// The minimized scenario's run.
    pub outcome: Option<&'a Outcome>,
    /// Runs of the original input that gave the same signature, of how many.
    pub reproduced: (usize, usize),
    pub minimize_runs: usize,
}

/// Writes a finding into `<dir>/<signature>-<hash>/`: `input.bin` (the fuzz input, replayed
/// by `fuzz-compat --replay`), `scenario.scn` (the minimized scenario as a scenario file,
/// [`file::to_text`]), `sidebyside.txt` (its two traces) and `finding.txt` (signature, reason,
/// reproduction count). Returns the directory.
pub fn write(dir: &Path, w: &Written) -> std::io::Result<PathBuf> {
    let d = dir.join(format!("{}-{:016x}", w.finding.signature, hash(w.input)));
    std::fs::create_dir_all(&d)?;
    std::fs::write(d.join("input.bin"), w.input)?;
    let mut sc = w.minimized.clone();
    sc.id = format!("fuzz-{}", w.finding.signature);
    std::fs::write(d.join("scenario.scn"), file::to_text(&sc))?;
    if let Some(o) = w.outcome {
        std::fs::write(d.join("sidebyside.txt"), side_by_side(o))?;
    }
    let (k, n) = w.reproduced;
    let reproduced = match (k, n) {
        (_, 0 | 1) => "not re-run".to_string(),
        (k, n) if k == n => format!("{k} of {n} runs (deterministic)"),
        (k, n) => format!("{k} of {n} runs (flaky)"),
    };
    let text = format!(
        "signature: {}\nreason: {}\nreproduced: {reproduced}\noriginal: {}\nminimized ({} runs): {}\nreplay: fuzz-compat --replay {} (the original input); compat --scenario-file {} (the minimized scenario)\n",
        w.finding.signature,
        w.finding.reason,
        describe(w.original),
        w.minimize_runs,
        describe(w.minimized),
        d.join("input.bin").display(),
        d.join("scenario.scn").display()
    );
    std::fs::write(d.join("finding.txt"), text)?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::fuzz::decode::decode;

    #[test]
    fn simpler_scenarios_are_simpler_and_valid() {
        let mut r = crate::harness::random::Rng::new(11);
        use crate::harness::random::Draw;
        for _ in 0..100 {
            let input: Vec<u8> = (0..64).map(|_| r.next_u64() as u8).collect();
            let sc = decode(&input);
            let Body::Flow(f) = &sc.body else {
                assert!(
                    simpler(&sc).is_empty(),
                    "a custom scenario has no simpler form"
                );
                continue;
            };
            for s in simpler(&sc) {
                let Body::Flow(g) = &s.body else { panic!() };
                assert!(!g.xfers.is_empty());
                assert!(g.xfers.len() <= f.xfers.len());
                assert!(g.knobs.is_empty() || g.xfers.len() == 1);
                assert!(g.capacity >= capacity_floor(g).min(f.capacity));
                assert!(
                    describe(&s) != describe(&sc),
                    "a step changes nothing: {}",
                    describe(&s)
                );
            }
        }
    }

    #[test]
    fn minimize_keeps_only_candidates_with_the_signature() {
        let sc = decode(&[3, 3, 0, 0, 0, 0, 5, 5, 5, 5, 5, 5, 5, 5]);
        // A stand-in judge: the "finding" is any flow with 2 or more workers.
        let mut run = |s: &Scenario| {
            let Body::Flow(f) = &s.body else { panic!() };
            (f.workers >= 2).then(|| "w".to_string())
        };
        let Body::Flow(f0) = &sc.body else { panic!() };
        assert!(f0.workers >= 2, "{}", sc.desc);
        let (m, runs) = minimize(&sc, "w", 500, Duration::from_secs(60), &mut run);
        let Body::Flow(f) = &m.body else { panic!() };
        assert!(f.workers >= 2);
        assert!(runs > 0);
        assert!(simpler(&m).iter().all(|s| run(s).is_none()));
    }
}
