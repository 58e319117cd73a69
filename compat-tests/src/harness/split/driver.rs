//! The driving side of `compat --split` (see [`super`]): each plan's two children started
//! (both here, or the receiver on the serving node, [`super::node`]), their traces merged,
//! compared and judged like the in-process runs; the interop matrix's two-process column, the
//! peer-death runs, and `report-split.md` / `report-split.json`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::node::{self, Node};
use super::{
    lib_refs, monotonic_ns, plans, spawn, start_receiver, ChildEnd, Launch, LibRef, Mode, Plan,
    PlanKind, Proc, NOT_RUN, PEER_DEATH_BOUND, PEER_DEATH_NODE_SKIP, PEER_DEATH_SKIP, RECV_END,
    TRACE,
};
use crate::harness::outcome::{judge, Options, Outcome, Verdict};
use crate::harness::{backend, interop, report};

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

fn last_words(err: &str) -> String {
    err.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string()
}

/// The trace lines of a child's stdout, each event tagged with its process (`proc_`).
fn child_trace(lines: &[String], proc_: &str) -> Result<Vec<Value>, String> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix(TRACE).and_then(|r| r.strip_prefix(' ')))
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).map_err(|e| format!("{e}: {l}"))?;
            if let Some(o) = v.as_object_mut() {
                o.insert("proc".into(), json!(proc_));
            }
            Ok(v)
        })
        .collect()
}

/// The `ctl_calls` a child reported (0 when it did not get that far).
fn child_ctl_calls(lines: &[String]) -> u64 {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("ctl_calls ")?.trim().parse().ok())
        .unwrap_or(0)
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
        match rest
            .iter()
            .find_map(|l| l.strip_prefix("problems "))
            .and_then(|p| serde_json::from_str::<Vec<String>>(p).ok())
        {
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
        while let Ok(l) = send.lines.try_recv() {
            sseen.push(l);
        }
        pr.waited = sseen
            .iter()
            .find_map(|l| l.strip_prefix("waited "))
            .and_then(|w| serde_json::from_str(w).ok());
        pr.returned_before_kill = sseen.iter().any(|l| l.starts_with("waited"));
        let mut recv = recv;
        pr.killed_ns = Some(monotonic_ns());
        let _ = recv.child.kill();
        let _ = recv.child.wait();
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
            pr.waited = all
                .iter()
                .find_map(|l| l.strip_prefix("waited "))
                .and_then(|w| serde_json::from_str(w).ok());
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

fn not_run_reason(lines: &[String]) -> String {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("not-run "))
        .unwrap_or("a child could not reach the other process")
        .to_string()
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

/// A peer-death run of one library: Ok((verdict word, detail)) or Err(why: FAIL or NOT RUN).
type DeathResult = Result<(String, String), String>;

/// One cell of the interop matrix with both columns.
#[derive(Debug, Clone)]
pub struct Cell2 {
    pub dir: String,
    pub len: u32,
    /// One process (`interop::run`).
    pub one: Option<interop::Cell>,
    /// Two processes: Ok(detail) / Err(why); None = not run.
    pub two: Option<Result<String, String>>,
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
    let Some(ledger) = report::ledger_of(opts) else {
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
    let mut children = Children {
        launch: Launch { exe, mode },
        node,
    };
    let (c, r) = lib_refs(opts);
    let wanted = |id: &str| opts.only.is_empty() || opts.only.iter().any(|o| o == id);
    let all = plans();
    println!(
        "compat --split: sender and receiver in two processes ({}); C: {}; Rust: {}",
        match &children.node {
            Some(n) => format!(
                "receivers on the node serving at {}, senders here",
                n.addr()
            ),
            None => "both on this node".to_string(),
        },
        c.path.display(),
        r.path.display()
    );
    let names: [(u64, &str); 2] = [(0, "legacy"), (1, "rust")];
    let mut outcomes = Vec::new();
    let mut not_run: Vec<String> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    let mut ctl_calls = 0u64;
    for p in all
        .iter()
        .filter(|p| matches!(p.kind, PlanKind::Scenario) && wanted(&p.id))
    {
        if let Some(why) = backend::get().skip(&p.id) {
            println!("{:<28} {:<22} {why}", "SKIPPED", p.id);
            skipped.push(format!("{}: {why}", p.id));
            continue;
        }
        let t = Instant::now();
        let lc = run_pair(&mut children, p, &c, &c);
        let lr = run_pair(&mut children, p, &r, &r);
        ctl_calls += lc.ctl_calls + lr.ctl_calls;
        if let Some(why) = lc.not_run.as_ref().or(lr.not_run.as_ref()) {
            println!("{:<28} {:<22} {why}", "NOT RUN", p.id);
            not_run.push(format!("{}: {why}", p.id));
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
            &ledger,
            None,
            None,
            t.elapsed().as_millis(),
        );
        // Compared like the in-process runs (a scenario may fail on purpose on one library,
        // D1), but never judged on runs where nothing went from one process to the other.
        if !crossed {
            o.verdict = Verdict::Fail(format!(
                "no receive-side completion reached the receiver process on either pair ({})",
                notes.join("; ")
            ));
        }
        println!("{}", report::line(&o));
        outcomes.push(o);
    }
    // The interop matrix: both columns.
    let mut cells: Vec<Cell2> = Vec::new();
    if opts.interop && opts.only.is_empty() {
        let one = match report::load(opts) {
            Ok(libs) => interop::run(libs.legacy, libs.rust),
            Err(e) => {
                eprintln!("compat: {e}");
                return 2;
            }
        };
        for (dirn, s, rl) in [("C -> Rust", &c, &r), ("Rust -> C", &r, &c)] {
            for cell in one.iter().filter(|x| x.dir == dirn) {
                let id = format!("xp-{}", cell.len);
                let two = all.iter().find(|p| p.id == id).map(|p| {
                    let pr = run_pair(&mut children, p, s, rl);
                    ctl_calls += pr.ctl_calls;
                    match (&pr.not_run, pr.problems.is_empty()) {
                        (Some(why), _) => Err(format!("NOT RUN: {why}")),
                        (None, true) => Ok("data verified byte for byte".to_string()),
                        (None, false) => Err(pr.problems.join("; ")),
                    }
                });
                if let Some(Err(why)) = &two {
                    if why.starts_with("NOT RUN") {
                        not_run.push(format!("{id} {dirn}: {why}"));
                    }
                }
                cells.push(Cell2 {
                    dir: dirn.into(),
                    len: cell.len,
                    one: Some(cell.clone()),
                    two,
                });
            }
        }
        println!("\nInterop matrix (data checked byte for byte):");
        print!("{}", render(&cells));
    }
    // Peer death, each library sending to itself.
    let mut deaths: Vec<(String, DeathResult)> = Vec::new();
    let death_skip = if children.node.is_some() {
        Some(PEER_DEATH_NODE_SKIP)
    } else {
        matches!(children.launch.mode, Mode::Hardware { .. }).then_some(PEER_DEATH_SKIP)
    };
    if let (true, Some(why)) = (wanted("peer-death"), death_skip) {
        println!("{:<28} {:<22} {why}", "SKIPPED", "peer-death");
        skipped.push(format!("peer-death: {why}"));
    } else if wanted("peer-death") {
        if let Some(p) = all.iter().find(|p| matches!(p.kind, PlanKind::PeerDeath)) {
            for l in [&c, &r] {
                let pr = run_pair(&mut children, p, l, l);
                ctl_calls += pr.ctl_calls;
                let res = match &pr.not_run {
                    Some(why) => {
                        not_run.push(format!("peer-death {}: {why}", l.name));
                        Err(format!("NOT RUN: {why}"))
                    }
                    None => judge_peer_death(&pr).and_then(|(lat, ret)| {
                        let t = format!(
                            "{}: the sender's wait returned {} {} ms after the kill (bound {} ms)",
                            l.name,
                            ret as u32 as i32,
                            lat.as_millis(),
                            PEER_DEATH_BOUND.as_millis()
                        );
                        match (ret, l.slot) {
                            (0, 0) if ledger.ids().iter().any(|i| i == "D3") => Ok((
                                "DIVERGES-AS-DOCUMENTED D3".to_string(),
                                format!("{t} (legacy ignores CR statuses)"),
                            )),
                            (0, _) => Err(format!("{t}: success after the peer died")),
                            _ => Ok(("PASS".to_string(), t)),
                        }
                    }),
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
                deaths.push((l.name.to_string(), res));
            }
        }
    }
    let (pass, div, fail) = report::counts(&outcomes);
    let cell_fail = cells
        .iter()
        .filter(|x| {
            !x.one.as_ref().is_some_and(|o| o.ok)
                || matches!(&x.two, Some(Err(w)) if !w.starts_with("NOT RUN"))
        })
        .count();
    let two_ok = cells
        .iter()
        .filter(|x| matches!(x.two, Some(Ok(_))))
        .count();
    let death_fail = deaths
        .iter()
        .filter(|(_, r)| matches!(r, Err(w) if !w.starts_with("NOT RUN")))
        .count();
    let death_ok = deaths.iter().filter(|(_, r)| r.is_ok()).count();
    // The serving node is told the run is over; its count of control calls joins ours.
    let mut node_problem = None;
    if let Some(n) = children.node.as_mut() {
        match n.done() {
            Ok(c) => ctl_calls += c,
            Err(e) => node_problem = Some(e),
        }
    }
    ctl_calls += crate::loopback_ctl::forbidden_attempts();
    if matches!(children.launch.mode, Mode::Hardware { .. }) {
        println!(
            "compat --split: urma_loopback_* calls by the harness and its children: {ctl_calls}"
        );
    }
    let mut fail = fail;
    if ctl_calls > 0 && matches!(children.launch.mode, Mode::Hardware { .. }) {
        fail += 1;
        println!(
            "{:<28} {:<22} the loopback control API was called {ctl_calls} times in hardware mode",
            "FAIL", "hardware mode"
        );
    }
    if let Some(e) = &node_problem {
        fail += 1;
        println!("{:<28} {:<22} {e}", "FAIL", "serving node");
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "\ncompat --split: {} scenarios: {pass} PASS, {div} DIVERGES-AS-DOCUMENTED, {fail} FAIL, {} NOT RUN, {} SKIPPED; interop two-process column {two_ok}/{} cells OK; peer death {death_ok}/{} OK; {secs:.1} s",
        outcomes.len() + not_run.iter().filter(|n| !n.starts_with("xp-") && !n.starts_with("peer-death")).count(),
        not_run.len(),
        skipped.len(),
        cells.len(),
        deaths.len(),
    );
    let md = render_md(&outcomes, &cells, &deaths, &not_run, &skipped, secs);
    let path = opts.out.join("report-split.md");
    if let Err(e) = std::fs::write(&path, md) {
        eprintln!("compat: {}: {e}", path.display());
        return 2;
    }
    let j = json!({
        "backend": children.launch.mode.name(),
        "nodes": if children.node.is_some() { 2 } else { 1 },
        "loopback_control_calls": ctl_calls,
        "seconds": secs,
        "totals": {"pass": pass, "diverges": div, "fail": fail, "not_run": not_run.len(),
                   "skipped": skipped.len(), "interop_two_ok": two_ok, "interop_cells": cells.len(),
                   "peer_death_ok": death_ok},
        "scenarios": outcomes.iter().map(|o| json!({
            "id": o.id,
            "verdict": o.verdict.word(),
            "reason": match &o.verdict { Verdict::Fail(w) => json!(w), _ => Value::Null },
            "differing_sections": o.sections,
        })).collect::<Vec<_>>(),
        "interop": cells.iter().map(|x| {
            let (two, detail) = two_word(&x.two);
            json!({"direction": x.dir, "len": x.len, "one": x.one_word(), "two": two, "detail": detail})
        }).collect::<Vec<_>>(),
        "peer_death": deaths.iter().map(|(l, r)| match r {
            Ok((w, t)) => json!({"lib": l, "verdict": w, "detail": t}),
            Err(w) => json!({"lib": l, "verdict": if w.starts_with("NOT RUN") { "NOT RUN" } else { "FAIL" }, "detail": w}),
        }).collect::<Vec<_>>(),
        "not_run": not_run,
        "skipped": skipped,
        "serving_node": node_problem,
    });
    let jpath = opts.out.join("report-split.json");
    if let Err(e) = std::fs::write(&jpath, serde_json::to_string_pretty(&j).unwrap_or_default()) {
        eprintln!("compat: {}: {e}", jpath.display());
        return 2;
    }
    println!(
        "compat --split: report: {} and {}",
        path.display(),
        jpath.display()
    );
    if fail + cell_fail + death_fail > 0 {
        1
    } else if !not_run.is_empty() {
        NOT_RUN
    } else {
        0
    }
}

impl Cell2 {
    /// The one-process column's word.
    fn one_word(&self) -> &'static str {
        match &self.one {
            Some(o) if o.ok => "OK",
            Some(_) => "FAIL",
            None => "-",
        }
    }
}

fn two_word(t: &Option<Result<String, String>>) -> (&'static str, String) {
    match t {
        None => ("-", String::new()),
        Some(Ok(d)) => ("OK", d.clone()),
        Some(Err(w)) if w.starts_with("NOT RUN") => ("NOT RUN", w.clone()),
        Some(Err(w)) => ("FAIL", w.clone()),
    }
}

/// Plain-text matrix: one process, two processes.
pub fn render(cells: &[Cell2]) -> String {
    let mut s = format!(
        "  {:<10} {:>11}  {:<12} {}\n",
        "direction", "length", "one process", "two processes"
    );
    for x in cells {
        let one = x.one_word();
        let (two, detail) = two_word(&x.two);
        s.push_str(&format!(
            "  {:<10} {:>9} B  {:<12} {two}  {detail}\n",
            x.dir, x.len, one
        ));
    }
    s
}

fn render_md(
    outcomes: &[Outcome],
    cells: &[Cell2],
    deaths: &[(String, DeathResult)],
    not_run: &[String],
    skipped: &[String],
    secs: f64,
) -> String {
    let mut s = String::from("# compat --split: sender and receiver in two processes\n\n");
    s.push_str("| scenario | verdict | differing sections |\n|---|---|---|\n");
    for o in outcomes {
        let why = match &o.verdict {
            Verdict::Fail(w) => format!(" ({w})"),
            _ => String::new(),
        };
        s.push_str(&format!(
            "| {} | {}{why} | {} |\n",
            o.id,
            o.verdict.word(),
            o.sections.join(", ")
        ));
    }
    s.push_str("\n## Interop matrix\n\n| direction | length | one process | two processes | detail |\n|---|---|---|---|---|\n");
    for x in cells {
        let one = x.one_word();
        let (two, detail) = two_word(&x.two);
        s.push_str(&format!(
            "| {} | {} | {one} | {two} | {detail} |\n",
            x.dir, x.len
        ));
    }
    s.push_str("\n## Peer death\n\n| library | result |\n|---|---|\n");
    for (l, r) in deaths {
        let t = match r {
            Ok((w, t)) => format!("{w}: {t}"),
            Err(w) => w.clone(),
        };
        s.push_str(&format!("| {l} | {t} |\n"));
    }
    for o in outcomes.iter().filter(|o| o.diff.is_some()) {
        s.push_str(&format!(
            "\n## {} ({})\n\n```diff\n{}\n```\n",
            o.id,
            o.verdict.word(),
            report::strip_ansi(o.diff.as_deref().unwrap_or(""))
        ));
    }
    for (title, list) in [("Not run", not_run), ("Skipped", skipped)] {
        if !list.is_empty() {
            s.push_str(&format!("\n## {title}\n\n"));
            for n in list {
                s.push_str(&format!("* {n}\n"));
            }
        }
    }
    s.push_str(&format!("\n{secs:.1} s\n"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

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
