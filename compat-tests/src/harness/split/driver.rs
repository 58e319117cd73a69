//! The driving side of `compat --split` (see [`super`]): each plan's two children started
//! (both here, or the receiver on the serving node, [`super::node`]), their traces merged,
//! compared and judged like the in-process runs; the interop matrix's two-process column and the
//! peer-death runs. What a run found is shown by [`super::render`].

use std::time::{Duration, Instant};

use serde_json::Value;

use super::mode::Mode;
use super::node::{self, Node};
use super::plan::{plans, Plan, PlanKind, PEER_DEATH_BOUND, PEER_DEATH_NODE_SKIP, PEER_DEATH_SKIP};
use super::protocol::{
    child_ctl_calls, child_problems, child_trace, child_waited, monotonic_ns, not_run_reason,
    NOT_RUN,
};
use super::render::{matrix, Cell2, DeathResult, Findings};
use super::supervise::{
    last_words, lib_refs, spawn, start_receiver, ChildEnd, Launch, LibRef, Proc, RECV_END,
};
use crate::harness::ledger::Ledger;
use crate::harness::outcome::{judge, Options, Verdict};
use crate::harness::present::progress::Progress;
use crate::harness::present::{self, meta, summary};
use crate::harness::{backend, driver, interop};

/// Where the children of a run start: here ([`Launch`]), and in two-node mode every receiver on
/// the serving node.
pub struct Children {
    pub launch: Launch,
    pub node: Option<Node>,
}

/// Result of one two-process run.
#[derive(Debug, Default)]
pub struct PairRun {
    /// The merged raw trace (receiver's events, then the sender's, tagged with `proc`).
    pub events: Vec<Value>,
    /// What went wrong on either side (empty: every call and wait returned 0, data matched).
    pub problems: Vec<String>,
    /// Why it could not run (the provider does not reach the other process, a set-up error).
    pub not_run: Option<String>,
    /// The sender's `waited` line (peer death).
    pub waited: Option<Value>,
    /// When the receiver was killed (peer death), CLOCK_MONOTONIC ns.
    pub killed_ns: Option<u64>,
    /// The sender's wait had returned before the kill (peer death: not mid-transfer).
    pub returned_before_kill: bool,
    /// `urma_loopback_*` calls the two children counted (their `ctl_calls` lines).
    pub ctl_calls: u64,
}

/// Where the receiver of a run is: a child of this process or of the serving node.
enum Receiver {
    Here(Proc),
    Node,
}

/// Runs `plan` with `slib` sending in one process and `rlib` receiving in another: both
/// children of this process, or (with [`Children::node`]) the receiver a child of the serving
/// node, whose lines come back over the node's TCP connection.
pub fn run_pair(children: &mut Children, plan: &Plan, slib: &LibRef, rlib: &LibRef) -> PairRun {
    let mut pr = PairRun::default();
    let death = matches!(plan.kind, PlanKind::PeerDeath);
    let started = match &mut children.node {
        Some(n) => n
            .start_receiver(&plan.id, rlib)
            .map(|(host, port)| (Receiver::Node, host, port)),
        None => start_receiver(&children.launch, &plan.id, rlib, "127.0.0.1")
            .map(|(c, port)| (Receiver::Here(c.0), "127.0.0.1".to_string(), port)),
    };
    let (recv, host, port) = match started {
        Ok(x) => x,
        Err((code, lines, err)) => {
            pr.ctl_calls += child_ctl_calls(&lines);
            pr.not_run = Some(if code == NOT_RUN {
                not_run_reason(&lines)
            } else {
                format!(
                    "the receiver did not start (exit {code}): {}",
                    last_words(&err)
                )
            });
            return pr;
        }
    };
    let to = vec!["--connect".to_string(), format!("{host}:{port}")];
    let to = if host.contains(':') {
        // An IPv6 address: in brackets before the port.
        vec!["--connect".to_string(), format!("[{host}]:{port}")]
    } else {
        to
    };
    let send = match spawn(&children.launch, "send", slib, &plan.id, &to) {
        Ok(p) => p,
        Err(e) => {
            let _ = end_receiver(children, recv);
            pr.not_run = Some(e);
            return pr;
        }
    };
    if death {
        let Receiver::Here(recv) = recv else {
            pr.not_run = Some("peer death needs the receiver on the driving node".into());
            return pr;
        };
        peer_death(&mut pr, send, recv);
        return pr;
    }
    let (scode, srest, serr) = send.finish(Duration::from_secs(60));
    let (rcode, rrest, rerr) = end_receiver(children, recv);
    pr.ctl_calls += child_ctl_calls(&srest) + child_ctl_calls(&rrest);
    if scode == NOT_RUN || rcode == NOT_RUN {
        let mut all = srest;
        all.extend(rrest);
        pr.not_run = Some(not_run_reason(&all));
        return pr;
    }
    for (side, code, rest, err) in [
        ("receiver", rcode, &rrest, &rerr),
        ("sender", scode, &srest, &serr),
    ] {
        if code != 0 {
            pr.problems
                .push(format!("{side} exit {code}: {}", last_words(err)));
            continue;
        }
        match child_problems(rest) {
            Some(v) => pr
                .problems
                .extend(v.into_iter().map(|p| format!("{side}: {p}"))),
            None => pr.problems.push(format!("{side}: no result line")),
        }
    }
    if pr.problems.iter().any(|p| p.contains(" exit ")) {
        return pr;
    }
    match (child_trace(&rrest, "recv"), child_trace(&srest, "send")) {
        (Ok(mut r), Ok(s)) => {
            r.extend(s);
            pr.events = r;
        }
        (Err(e), _) | (_, Err(e)) => pr.problems.push(format!("trace: {e}")),
    }
    pr
}

fn end_receiver(children: &mut Children, recv: Receiver) -> ChildEnd {
    match (recv, &mut children.node) {
        (Receiver::Here(p), _) => p.finish(RECV_END),
        (Receiver::Node, Some(n)) => n.finish_receiver(),
        (Receiver::Node, None) => (2, Vec::new(), "no serving node".into()),
    }
}

/// The peer-death run once both children are up: waits for the sender's post, kills the
/// receiver mid-transfer and notes when the sender's wait returned.
fn peer_death(pr: &mut PairRun, send: Proc, recv: Proc) {
    let mut sseen = Vec::new();
    if send
        .expect("posted", Duration::from_secs(20), &mut sseen)
        .is_some()
    {
        // Let the transfer reach the stall (the fifth SEND_IMM waiting for a recv WR).
        std::thread::sleep(Duration::from_millis(300));
        sseen.extend(send.ready_lines());
        pr.waited = child_waited(&sseen);
        pr.returned_before_kill = sseen.iter().any(|l| l.starts_with("waited"));
        let mut recv = recv;
        pr.killed_ns = Some(monotonic_ns());
        recv.kill();
        let _ = recv.finish(Duration::from_millis(1));
        let mut all = sseen;
        if pr.waited.is_none() {
            let w = send.expect("waited ", Duration::from_secs(15), &mut all);
            pr.waited = w.and_then(|w| serde_json::from_str(&w).ok());
        }
        let (code, rest, err) = send.finish(Duration::from_secs(15));
        all.extend(rest);
        pr.ctl_calls += child_ctl_calls(&all);
        if pr.waited.is_none() {
            pr.waited = child_waited(&all);
        }
        if code == NOT_RUN {
            pr.not_run = Some(not_run_reason(&all));
        } else if code != 0 {
            pr.problems
                .push(format!("sender exit {code}: {}", last_words(&err)));
        }
    } else {
        let (scode, srest, serr) = send.finish(Duration::from_secs(5));
        let (rcode, rrest, _) = recv.finish(Duration::from_secs(5));
        if scode == NOT_RUN || rcode == NOT_RUN {
            let mut all = srest;
            all.extend(rrest);
            pr.not_run = Some(not_run_reason(&all));
        } else {
            pr.problems.push(format!(
                "the sender never posted (exit {scode}): {}",
                last_words(&serr)
            ));
        }
    }
}

/// Whether the receiver process of a merged trace had a receive-side CR: a message of the
/// other process reached it.
pub fn crossed(events: &[Value]) -> bool {
    events.iter().any(|e| {
        e.get("proc").and_then(Value::as_str) == Some("recv")
            && e.get("k").and_then(Value::as_str) == Some("urma")
            && e.get("raw").is_some_and(|r| {
                r.get("ev").and_then(Value::as_str) == Some("cr")
                    && r.get("s_r").and_then(Value::as_u64) == Some(1)
            })
    })
}

/// The peer-death check of one run: Ok((how long after the kill the sender's wait returned,
/// its return value)). A wait that returns 0 is accepted only from the reference C library,
/// which ignores CR statuses (D3); the caller decides.
pub fn judge_peer_death(pr: &PairRun) -> Result<(Duration, u64), String> {
    if !pr.problems.is_empty() {
        return Err(pr.problems.join("; "));
    }
    if pr.returned_before_kill {
        return Err(format!(
            "the sender's wait returned before the kill ({}): the transfer did not stall",
            pr.waited
                .as_ref()
                .map(|w| w.to_string())
                .unwrap_or_default()
        ));
    }
    let (Some(w), Some(k)) = (&pr.waited, pr.killed_ns) else {
        return Err("the sender reported no wait".into());
    };
    let ret = w.get("ret").and_then(Value::as_u64).unwrap_or(0);
    let t = w.get("t_ns").and_then(Value::as_u64).unwrap_or(0);
    if t < k {
        return Err("the sender's wait returned before the kill".into());
    }
    let lat = Duration::from_nanos(t - k);
    if lat > PEER_DEATH_BOUND {
        return Err(format!(
            "the sender's wait failed {} ms after the kill (bound {} ms)",
            lat.as_millis(),
            PEER_DEATH_BOUND.as_millis()
        ));
    }
    Ok((lat, ret))
}

/// One `compat --split` run: what it runs with and what it found so far.
struct Run<'a> {
    opts: &'a Options,
    ledger: Ledger,
    children: Children,
    /// The C reference and the Rust library, as the children load them.
    c: LibRef,
    r: LibRef,
    all: Vec<Plan>,
    found: Findings,
}

impl Run<'_> {
    /// Whether `--scenario` asked for `id` (everything without it).
    fn wanted(&self, id: &str) -> bool {
        self.opts.only.is_empty() || self.opts.only.iter().any(|o| o == id)
    }

    /// The splittable scenarios, each on the C pair and on the Rust pair, compared and judged.
    fn scenarios(&mut self) {
        let names: [(u64, &str); 2] = [(0, "legacy"), (1, "rust")];
        let plans: Vec<Plan> = self
            .all
            .iter()
            .filter(|p| matches!(p.kind, PlanKind::Scenario) && self.wanted(&p.id))
            .cloned()
            .collect();
        let mut progress = Progress::new("compat --split", plans.len(), self.opts.verbose);
        for p in &plans {
            progress.start(&p.id);
            if let Some(why) = backend::get().skip(&p.id) {
                progress.done_shown(&format!("{:<28} {:<22} {why}", "SKIPPED", p.id));
                self.found.skipped.push(format!("{}: {why}", p.id));
                continue;
            }
            let t = Instant::now();
            let lc = run_pair(&mut self.children, p, &self.c, &self.c);
            let lr = run_pair(&mut self.children, p, &self.r, &self.r);
            self.found.ctl_calls += lc.ctl_calls + lr.ctl_calls;
            if let Some(why) = lc.not_run.as_ref().or(lr.not_run.as_ref()) {
                progress.done_shown(&format!("{:<28} {:<22} {why}", "NOT RUN", p.id));
                self.found.not_run.push(format!("{}: {why}", p.id));
                continue;
            }
            let crossed = crossed(&lc.events) || crossed(&lr.events);
            let notes: Vec<String> = lc
                .problems
                .iter()
                .map(|x| format!("C pair: {x}"))
                .chain(lr.problems.iter().map(|x| format!("Rust pair: {x}")))
                .collect();
            let mut o = judge(
                &p.id,
                "split",
                &p.desc,
                Ok(lc.events),
                Ok(lr.events),
                &names,
                &self.ledger,
                None,
                None,
                t.elapsed().as_millis(),
            );
            // Compared like the in-process runs (a scenario may fail on purpose on one
            // library, D1), but never judged on runs where nothing went from one process to the
            // other.
            if !crossed {
                o.verdict = Verdict::Fail(format!(
                    "no receive-side completion reached the receiver process on either pair ({})",
                    notes.join("; ")
                ));
            }
            progress.done(&driver::line(&o), matches!(o.verdict, Verdict::Fail(_)));
            self.found.outcomes.push(o);
        }
        progress.finish();
    }

    /// The interop matrix, both columns (not with `--scenario`, nor `--no-interop`). `Err`: the
    /// exit status of a set-up error.
    fn interop(&mut self) -> Result<(), i32> {
        if !(self.opts.interop && self.opts.only.is_empty()) {
            return Ok(());
        }
        let one = match driver::load(self.opts) {
            Ok(libs) => interop::run(libs.legacy, libs.rust),
            Err(e) => {
                eprintln!("compat: {e}");
                return Err(2);
            }
        };
        let (c, r) = (self.c.clone(), self.r.clone());
        for (dirn, s, rl) in [("C -> Rust", &c, &r), ("Rust -> C", &r, &c)] {
            for cell in one.iter().filter(|x| x.dir == dirn) {
                let id = format!("xp-{}", cell.len);
                let plan = self.all.iter().find(|p| p.id == id).cloned();
                let two = plan.map(|p| {
                    let pr = run_pair(&mut self.children, &p, s, rl);
                    self.found.ctl_calls += pr.ctl_calls;
                    match (&pr.not_run, pr.problems.is_empty()) {
                        (Some(why), _) => Err(format!("NOT RUN: {why}")),
                        (None, true) => Ok("data verified byte for byte".to_string()),
                        (None, false) => Err(pr.problems.join("; ")),
                    }
                });
                if let Some(Err(why)) = &two {
                    if why.starts_with("NOT RUN") {
                        self.found.not_run.push(format!("{id} {dirn}: {why}"));
                    }
                }
                self.found.cells.push(Cell2 {
                    dir: dirn.into(),
                    len: cell.len,
                    one: Some(cell.clone()),
                    two,
                });
            }
        }
        println!("\nInterop matrix (data checked byte for byte):");
        print!("{}", matrix(&self.found.cells));
        Ok(())
    }

    /// Peer death, each library sending to itself (skipped with the receiver on a serving node
    /// and in hardware mode).
    fn peer_deaths(&mut self) {
        if !self.wanted("peer-death") {
            return;
        }
        let skip = if self.children.node.is_some() {
            Some(PEER_DEATH_NODE_SKIP)
        } else {
            matches!(self.children.launch.mode, Mode::Hardware { .. }).then_some(PEER_DEATH_SKIP)
        };
        if let Some(why) = skip {
            println!("{:<28} {:<22} {why}", "SKIPPED", "peer-death");
            self.found.skipped.push(format!("peer-death: {why}"));
            return;
        }
        let Some(p) = self
            .all
            .iter()
            .find(|p| matches!(p.kind, PlanKind::PeerDeath))
            .cloned()
        else {
            return;
        };
        for l in [self.c.clone(), self.r.clone()] {
            let pr = run_pair(&mut self.children, &p, &l, &l);
            self.found.ctl_calls += pr.ctl_calls;
            let res = match &pr.not_run {
                Some(why) => {
                    self.found
                        .not_run
                        .push(format!("peer-death {}: {why}", l.name));
                    Err(format!("NOT RUN: {why}"))
                }
                None => self.death_verdict(&pr, &l),
            };
            match &res {
                Ok((w, t)) => println!("{w:<28} {:<22} {t}", "peer-death"),
                Err(why) if why.starts_with("NOT RUN") => {
                    println!("{:<28} {:<22} {}: {why}", "NOT RUN", "peer-death", l.name)
                }
                Err(why) => println!(
                    "{:<28} {:<22} {}\n    -> {why}",
                    "FAIL", "peer-death", l.name
                ),
            }
            self.found.deaths.push((l.name.to_string(), res));
        }
    }

    /// The verdict of a peer-death run of `l` that ran ([`judge_peer_death`]): a wait that
    /// returned 0 is D3 on the C reference, a FAIL on the Rust library.
    fn death_verdict(&self, pr: &PairRun, l: &LibRef) -> DeathResult {
        judge_peer_death(pr).and_then(|(lat, ret)| {
            let t = format!(
                "{}: the sender's wait returned {} {} ms after the kill (bound {} ms)",
                l.name,
                ret as u32 as i32,
                lat.as_millis(),
                PEER_DEATH_BOUND.as_millis()
            );
            match (ret, l.slot) {
                (0, 0) if self.ledger.ids().iter().any(|i| i == "D3") => Ok((
                    "DIVERGES-AS-DOCUMENTED D3".to_string(),
                    format!("{t} (legacy ignores CR statuses)"),
                )),
                (0, _) => Err(format!("{t}: success after the peer died")),
                _ => Ok(("PASS".to_string(), t)),
            }
        })
    }

    /// Ends the run: the serving node told it is over, the totals printed, the reports
    /// written. Returns the exit status.
    fn finish(mut self, t0: Instant) -> i32 {
        let mut totals = self.found.totals();
        // The serving node is told the run is over; its count of control calls joins ours.
        if let Some(n) = self.children.node.as_mut() {
            match n.done() {
                Ok(c) => self.found.ctl_calls += c,
                Err(e) => self.found.node_problem = Some(e),
            }
        }
        self.found.ctl_calls += crate::loopback_ctl::forbidden_attempts();
        let ctl_calls = self.found.ctl_calls;
        let hardware = matches!(self.children.launch.mode, Mode::Hardware { .. });
        if hardware {
            println!(
                "compat --split: urma_loopback_* calls by the harness and its children: {ctl_calls}"
            );
        }
        if ctl_calls > 0 && hardware {
            totals.fail += 1;
            println!(
                "{:<28} {:<22} the loopback control API was called {ctl_calls} times in hardware mode",
                "FAIL", "hardware mode"
            );
        }
        if let Some(e) = &self.found.node_problem {
            totals.fail += 1;
            println!("{:<28} {:<22} {e}", "FAIL", "serving node");
        }
        let secs = t0.elapsed().as_secs_f64();
        println!("{}", self.found.summary(&totals, secs));
        let nodes = if self.children.node.is_some() { 2 } else { 1 };
        let mode = match &self.children.node {
            Some(n) => format!(
                "two nodes: receivers on the node serving at {}, senders here",
                n.addr()
            ),
            None => "two processes (sender and receiver), both on this node".to_string(),
        };
        let meta = meta::collect(
            &mode,
            self.children.launch.mode.name(),
            &self.c.path,
            &self.r.path,
            self.opts.seed,
            0,
            &self.opts.ledger,
            Vec::new(),
        );
        let doc = self.found.doc(&self.ledger, meta, hardware, secs);
        let j = self
            .found
            .json(&totals, self.children.launch.mode.name(), nodes, &doc);
        let jpath = doc.path(&self.opts.out, "json");
        if let Err(e) = std::fs::write(&jpath, serde_json::to_string_pretty(&j).unwrap_or_default())
        {
            eprintln!("compat: {}: {e}", jpath.display());
            return 2;
        }
        if let Err(e) = present::write(&doc, &self.opts.out) {
            eprintln!("compat: {}: {e}", self.opts.out.display());
            return 2;
        }
        print!("{}", summary::migration(&doc, &self.opts.out));
        if totals.fail + totals.cell_fail + totals.death_fail > 0 {
            1
        } else if !self.found.not_run.is_empty() {
            NOT_RUN
        } else {
            0
        }
    }
}

/// `compat --split`: the splittable scenarios on the C pair and the Rust pair (compared and
/// judged like the in-process runs), the interop matrix with its two-process column, and
/// peer death with each library. `mode` is the backend of this process, which the children
/// take too; `peer` (`--peer HOST:PORT`) puts every receiver on the node serving there
/// ([`node::serve`]). Exit status: 0 when everything ran and nothing FAILed, 1 on a FAIL, 2 on
/// set-up errors, [`NOT_RUN`] when the provider does not reach other processes (nothing
/// failed, but nothing ran across processes either).
pub fn run(opts: &Options, mode: Mode, peer: Option<&str>) -> i32 {
    let t0 = Instant::now();
    let Some(ledger) = driver::ledger_of(opts) else {
        return 2;
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("compat: --split: where am I: {e}");
            return 2;
        }
    };
    if let Err(e) = std::fs::create_dir_all(&opts.out) {
        eprintln!("compat: {}: {e}", opts.out.display());
        return 2;
    }
    let node = match peer {
        None => None,
        Some(addr) => match node::Node::connect(addr, &mode, node::peer_wait()) {
            Ok(n) => Some(n),
            Err(e) => {
                eprintln!("compat: --peer {addr}: {e}");
                return 2;
            }
        },
    };
    let (c, r) = lib_refs(opts);
    println!(
        "compat --split: sender and receiver in two processes ({}); C: {}; Rust: {}",
        match &node {
            Some(n) => format!(
                "receivers on the node serving at {}, senders here",
                n.addr()
            ),
            None => "both on this node".to_string(),
        },
        c.path.display(),
        r.path.display()
    );
    let mut run = Run {
        opts,
        ledger,
        children: Children {
            launch: Launch { exe, mode },
            node,
        },
        c,
        r,
        all: plans(),
        found: Findings::default(),
    };
    run.scenarios();
    if let Err(code) = run.interop() {
        return code;
    }
    run.peer_deaths();
    run.finish(t0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn peer_death_needs_an_error_within_the_bound_after_the_kill() {
        let run = |ret: u64, after_ms: u64, before: bool| PairRun {
            waited: Some(
                json!({"ret": ret, "status": 0, "t_ns": 1_000_000_000 + after_ms * 1_000_000}),
            ),
            killed_ns: Some(1_000_000_000),
            returned_before_kill: before,
            ..Default::default()
        };
        assert_eq!(
            judge_peer_death(&run(1, 120, false)),
            Ok((Duration::from_millis(120), 1))
        );
        assert_eq!(
            judge_peer_death(&run(0, 120, false)),
            Ok((Duration::from_millis(120), 0))
        );
        assert!(judge_peer_death(&run(1, 5000, false)).is_err());
        assert!(judge_peer_death(&run(1, 120, true)).is_err());
        assert!(judge_peer_death(&PairRun::default()).is_err());
    }
}
