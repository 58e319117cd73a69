//! The driver: runs every scenario on the reference C library and on the Rust library, has
//! each pair of runs compared and judged against the ledger ([`super::outcome::judge`]), runs
//! the C runner and the interop matrix, prints one line per scenario and writes `report.json` /
//! `report.md`.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::ctx::{Ctx, Lib};
use super::ledger::{self, Ledger};
use super::outcome::{judge, Options, Outcome, RunResult, Verdict};
use super::scenario::Scenario;
use super::{backend, crunner, interop, random, scenario};

static POISONED: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// Runs `sc` on `lib` in a watchdog thread (budget `sc.budget`).
pub fn run_on(lib: &'static Lib, sc: &Scenario) -> RunResult {
    if POISONED[lib.slot as usize & 1].load(Ordering::Acquire) {
        return Err(format!(
            "{}: skipped, the library hung in an earlier scenario",
            lib.name
        ));
    }
    let (tx, rx) = mpsc::channel();
    let s2 = sc.clone();
    std::thread::Builder::new()
        .name(format!("compat-{}", lib.name))
        .spawn(move || {
            let mut ctx = Ctx::new(lib, lib, s2.setup);
            s2.run(&mut ctx);
            let _ = tx.send(ctx.finish());
        })
        .map_err(|e| format!("spawn: {e}"))?;
    match rx.recv_timeout(sc.budget) {
        Ok(ev) => {
            if let Some(d) = std::env::var_os("COMPAT_DUMP") {
                dump(Path::new(&d), &sc.id, lib.name, &ev);
            }
            Ok(ev)
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            POISONED[lib.slot as usize & 1].store(true, Ordering::Release);
            Err(format!(
                "{}: watchdog: the scenario did not finish within {:?} (hang)",
                lib.name, sc.budget
            ))
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err(format!("{}: the scenario panicked", lib.name))
        }
    }
}

/// Scenario id → verdict word of a written report (`report.json` or `report-split.json`): how
/// two runs are compared scenario by scenario.
pub fn verdicts_of(report: &Value) -> std::collections::BTreeMap<String, String> {
    report["scenarios"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| Some((s["id"].as_str()?.into(), s["verdict"].as_str()?.into())))
                .collect()
        })
        .unwrap_or_default()
}

/// Writes a raw trace to `<dir>/<id>.<lib>.jsonl` (debugging aid, `COMPAT_DUMP=<dir>`).
pub fn dump(dir: &Path, id: &str, lib: &str, ev: &[Value]) {
    let _ = std::fs::create_dir_all(dir);
    let text: Vec<String> = ev.iter().map(|e| e.to_string()).collect();
    let _ = std::fs::write(
        dir.join(format!("{id}.{lib}.jsonl")),
        text.join("\n") + "\n",
    );
}

/// Everything `compat` needs, loaded.
pub struct Loaded {
    pub legacy: &'static Lib,
    pub rust: &'static Lib,
}

/// Loads both libraries (legacy in slot 0, Rust in slot 1).
pub fn load(opts: &Options) -> Result<Loaded, String> {
    Ok(Loaded {
        legacy: Lib::load(&opts.legacy_lib, 0, "legacy")?,
        rust: Lib::load(&opts.rust_lib, 1, "rust")?,
    })
}

/// The outcome of a scenario the backend does not run.
fn skipped(id: &str, kind: &'static str, desc: &str, why: &str) -> Outcome {
    Outcome::new(id, kind, desc, Verdict::Skipped(why.into()))
}

/// PASS, DIVERGES-AS-DOCUMENTED and FAIL counts of `outcomes`.
pub fn counts(outcomes: &[Outcome]) -> (usize, usize, usize) {
    let n = |f: fn(&Verdict) -> bool| outcomes.iter().filter(|o| f(&o.verdict)).count();
    (
        n(|v| *v == Verdict::Pass),
        n(|v| matches!(v, Verdict::Diverges(_))),
        n(|v| matches!(v, Verdict::Fail(_))),
    )
}

/// The report line of one outcome (verdict, id, description, and why for a FAIL).
pub fn line(o: &Outcome) -> String {
    let w = o.verdict.word();
    let mut s = format!("{w:<28} {:<22} {}", o.id, o.desc);
    if let Verdict::Fail(why) | Verdict::Skipped(why) = &o.verdict {
        s.push_str(&format!("\n    -> {why}"));
        if let Some(seed) = o.seed {
            s.push_str(&format!("\n    -> replay: compat --scenario rand-{seed}"));
        }
    }
    s
}

/// The ledger twin of `opts` (None, with the reason on stderr, when it cannot be loaded).
pub fn ledger_of(opts: &Options) -> Option<Ledger> {
    Ledger::load(&opts.ledger)
        .map_err(|e| eprintln!("compat: cannot load the ledger: {e}"))
        .ok()
}

/// Runs the whole harness; returns the process exit code.
pub fn run(opts: &Options) -> i32 {
    let t0 = Instant::now();
    let Some(ledger) = ledger_of(opts) else {
        return 2;
    };
    let mut cat = scenario::catalogue();
    let mut rnd = random::scenarios(opts.seed, opts.random);
    if !opts.only.is_empty() {
        cat.retain(|s| opts.only.iter().any(|o| o == &s.id));
        rnd.retain(|s| opts.only.iter().any(|o| o == &s.id));
    }
    if opts.list {
        for s in scenario::catalogue() {
            println!("{:<22} {}", s.id, s.desc);
        }
        for (id, d) in crunner::SCENARIOS {
            println!("{id:<22} [C runner] {d}");
        }
        println!("rand-<seed>            random scenario (--random N --seed S)");
        return 0;
    }
    let libs = match load(opts) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("compat: {e}");
            return 2;
        }
    };
    println!("compat: reference C library: {}", opts.legacy_lib.display());
    println!("compat: Rust library:        {}", opts.rust_lib.display());
    println!(
        "compat: {} catalogue scenarios, {} random (seed {}), ledger {}",
        cat.len(),
        rnd.len(),
        opts.seed,
        opts.ledger.display()
    );
    let names: [(u64, &str); 2] = [(0, "legacy"), (1, "rust")];
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut diverging_ids: BTreeSet<String> = BTreeSet::new();
    for s in &cat {
        if let Some(why) = backend::get().skip(&s.id) {
            let o = skipped(&s.id, "catalogue", &s.desc, why);
            println!("{}", line(&o));
            outcomes.push(o);
            continue;
        }
        let t = Instant::now();
        let l = run_on(libs.legacy, s);
        let r = run_on(libs.rust, s);
        let o = judge(
            &s.id,
            "catalogue",
            &s.desc,
            l,
            r,
            &names,
            &ledger,
            None,
            None,
            t.elapsed().as_millis(),
        );
        if o.diff.is_some() {
            diverging_ids.insert(o.id.clone());
        }
        println!("{}", line(&o));
        outcomes.push(o);
    }
    let mut c_outcomes = Vec::new();
    let c_skip = opts.c_runner_skip.filter(|_| opts.c_runner);
    if let Some(why) = c_skip {
        for (id, d) in crunner::SCENARIOS {
            if opts.only.is_empty() || opts.only.iter().any(|o| o == id) {
                let o = skipped(id, "c-runner", d, why);
                println!("{}", line(&o));
                c_outcomes.push(o);
            }
        }
    } else if opts.c_runner
        && (opts.only.is_empty() || opts.only.iter().any(|o| o.starts_with("c-")))
    {
        match crunner::run_all(opts, &ledger, &opts.only) {
            Ok(v) => {
                for o in v {
                    if o.diff.is_some() {
                        diverging_ids.insert(o.id.clone());
                    }
                    println!("{}", line(&o));
                    c_outcomes.push(o);
                }
            }
            Err(e) => {
                let o = Outcome::new(
                    "c-runner",
                    "c-runner",
                    "build of compat-tests/c/runner.c",
                    Verdict::Fail(e),
                );
                println!("{}", line(&o));
                c_outcomes.push(o);
            }
        }
    }
    for s in &rnd {
        if let Some(why) = backend::get().skip(&s.id) {
            let o = skipped(&s.id, "random", &s.desc, why);
            println!("{}", line(&o));
            outcomes.push(o);
            continue;
        }
        let t = Instant::now();
        let l = run_on(libs.legacy, s);
        let r = run_on(libs.rust, s);
        let o = judge(
            &s.id,
            "random",
            &s.desc,
            l,
            r,
            &names,
            &ledger,
            Some(&s.features),
            s.seed,
            t.elapsed().as_millis(),
        );
        println!("{}", line(&o));
        outcomes.push(o);
    }
    outcomes.extend(c_outcomes);
    let skipped_ids: BTreeSet<String> = outcomes
        .iter()
        .filter(|o| matches!(o.verdict, Verdict::Skipped(_)))
        .map(|o| o.id.clone())
        .collect();
    // Ledger consistency: every observable entry must show in at least one catalogue or
    // C-runner scenario of this run (only checked on full runs).
    let mut ledger_problems = Vec::new();
    if opts.only.is_empty() {
        for e in &ledger.entries {
            // Scenarios the backend skipped show nothing either way.
            let explicit: Vec<&String> = e
                .scenarios
                .iter()
                .filter(|s| *s != "*" && !skipped_ids.contains(*s))
                .collect();
            if e.observable
                && !explicit.is_empty()
                && !explicit.iter().any(|s| diverging_ids.contains(*s))
            {
                ledger_problems.push(format!(
                    "{}: observable, but none of its scenarios {:?} shows a difference (stale entry)",
                    e.id, e.scenarios
                ));
            }
            if e.observable && e.scenarios.is_empty() {
                ledger_problems.push(format!("{}: observable, but lists no scenario", e.id));
            }
        }
        if let Ok(md) = std::fs::read_to_string(ledger::divergences_md_path()) {
            let doc: BTreeSet<String> = ledger::doc_ids(&md).into_iter().collect();
            let twin: BTreeSet<String> = ledger.ids().into_iter().collect();
            for d in doc.difference(&twin) {
                ledger_problems.push(format!(
                    "{d}: in docs/divergences.md but not in the ledger twin"
                ));
            }
            for d in twin.difference(&doc) {
                ledger_problems.push(format!(
                    "{d}: in the ledger twin but not in docs/divergences.md"
                ));
            }
        }
    }
    for p in &ledger_problems {
        println!("FAIL                         ledger                 {p}");
    }
    // Hardware mode forbids the loopback's control binding: every attempt panicked a scenario
    // (FAIL above) and is counted; the count is the run's proof that none happened.
    let ctl_calls = crate::loopback_ctl::forbidden_attempts();
    if backend::get().name() == "hardware" {
        println!(
            "compat: urma_loopback_* calls by the harness: {ctl_calls} (the binding is forbidden in hardware mode)"
        );
    }
    if ctl_calls > 0 {
        ledger_problems.push(format!(
            "the harness called the loopback control API {ctl_calls} times in hardware mode"
        ));
    }
    let cells = if opts.interop && opts.only.is_empty() {
        interop::run(libs.legacy, libs.rust)
    } else {
        Vec::new()
    };
    if !cells.is_empty() {
        println!("\nInterop matrix (one process, both libraries, data checked byte for byte):");
        println!("{}", interop::render(&cells));
    }
    let (pass, div, fail) = counts(&outcomes);
    let fail = fail + ledger_problems.len();
    let ifail = cells.iter().filter(|c| !c.ok).count();
    let skip = skipped_ids.len();
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "\ncompat: {} scenarios ({} catalogue, {} C runner, {} random): {pass} PASS, {div} DIVERGES-AS-DOCUMENTED, {fail} FAIL, {skip} SKIPPED; interop {}/{} cells OK; {:.1} s",
        outcomes.len(),
        outcomes.iter().filter(|o| o.kind == "catalogue").count(),
        outcomes.iter().filter(|o| o.kind == "c-runner").count(),
        outcomes.iter().filter(|o| o.kind == "random").count(),
        cells.len() - ifail,
        cells.len(),
        secs
    );
    if let Err(e) = write_reports(opts, &outcomes, &ledger_problems, &cells, secs) {
        eprintln!("compat: writing the report: {e}");
        return 2;
    }
    println!(
        "compat: report: {} and {}",
        opts.out.join("report.md").display(),
        opts.out.join("report.json").display()
    );
    if fail + ifail > 0 {
        1
    } else {
        0
    }
}

fn write_reports(
    opts: &Options,
    outcomes: &[Outcome],
    ledger_problems: &[String],
    cells: &[interop::Cell],
    secs: f64,
) -> std::io::Result<()> {
    std::fs::create_dir_all(&opts.out)?;
    let j = json!({
        "backend": backend::get().name(),
        "loopback_control_calls": crate::loopback_ctl::forbidden_attempts(),
        "legacy_lib": opts.legacy_lib.display().to_string(),
        "rust_lib": opts.rust_lib.display().to_string(),
        "seed": opts.seed,
        "random": opts.random,
        "seconds": secs,
        "totals": {
            "scenarios": outcomes.len(),
            "pass": outcomes.iter().filter(|o| o.verdict == Verdict::Pass).count(),
            "diverges": outcomes.iter().filter(|o| matches!(o.verdict, Verdict::Diverges(_))).count(),
            "fail": outcomes.iter().filter(|o| matches!(o.verdict, Verdict::Fail(_))).count() + ledger_problems.len(),
            "skipped": outcomes.iter().filter(|o| matches!(o.verdict, Verdict::Skipped(_))).count(),
            "interop_ok": cells.iter().filter(|c| c.ok).count(),
            "interop_cells": cells.len(),
        },
        "ledger_problems": ledger_problems,
        "scenarios": outcomes.iter().map(|o| json!({
            "id": o.id,
            "kind": o.kind,
            "desc": o.desc,
            "verdict": o.verdict.word(),
            "ledger": match &o.verdict { Verdict::Diverges(v) => json!(v), _ => json!([]) },
            "reason": match &o.verdict { Verdict::Fail(w) | Verdict::Skipped(w) => json!(w), _ => Value::Null },
            "differing_sections": o.sections,
            "seed": o.seed,
            "ms": o.ms as u64,
            "legacy_trace": if o.verdict == Verdict::Pass { Value::Null } else { json!(o.legacy_trace) },
            "rust_trace": if o.verdict == Verdict::Pass { Value::Null } else { json!(o.rust_trace) },
        })).collect::<Vec<_>>(),
        "interop": cells.iter().map(|c| json!({
            "direction": c.dir, "len": c.len, "ok": c.ok, "detail": c.detail
        })).collect::<Vec<_>>(),
    });
    std::fs::write(
        opts.out.join("report.json"),
        serde_json::to_string_pretty(&j).unwrap_or_default(),
    )?;
    let mut md = String::new();
    md.push_str("# os_transport C-vs-Rust conformance report\n\n");
    md.push_str(&format!(
        "- URMA trace and faults: {}\n- reference C library: `{}`\n- Rust library: `{}`\n- random seed {} ({} scenarios)\n- run time {:.1} s\n\n",
        backend::get().name(),
        opts.legacy_lib.display(),
        opts.rust_lib.display(),
        opts.seed,
        opts.random,
        secs
    ));
    md.push_str("| verdict | scenario | kind | description |\n|---|---|---|---|\n");
    for o in outcomes {
        md.push_str(&format!(
            "| {} | `{}` | {} | {} |\n",
            o.verdict.word(),
            o.id,
            o.kind,
            o.desc.replace('|', "\\|")
        ));
    }
    for p in ledger_problems {
        md.push_str(&format!(
            "| FAIL | ledger | - | {} |\n",
            p.replace('|', "\\|")
        ));
    }
    if !cells.is_empty() {
        md.push_str("\n## Interop matrix\n\n");
        md.push_str(&interop::render_md(cells));
    }
    md.push_str("\n## Differences\n\n");
    for o in outcomes.iter().filter(|o| o.verdict != Verdict::Pass) {
        md.push_str(&format!("### {} — {}\n\n", o.id, o.verdict.word()));
        if let Verdict::Fail(w) | Verdict::Skipped(w) = &o.verdict {
            md.push_str(&format!("{w}\n\n"));
        }
        if let Some(d) = &o.diff {
            md.push_str("Diff (left: reference C, right: Rust):\n\n```diff\n");
            md.push_str(&strip_ansi(d));
            md.push_str("\n```\n\n");
        }
    }
    std::fs::write(opts.out.join("report.md"), md)
}

/// Removes ANSI colour sequences (pretty_assertions colours its output).
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\u{1b}' {
            if it.peek() == Some(&'[') {
                it.next();
                for d in it.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Default for `--random`: `$COMPAT_RANDOM`, else 200.
pub fn default_random() -> usize {
    std::env::var("COMPAT_RANDOM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// Default for `--seed`: `$COMPAT_SEED` (a number, or `time`), else 20250413.
pub fn default_seed() -> u64 {
    match std::env::var("COMPAT_SEED") {
        Ok(v) if v == "time" => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(1),
        Ok(v) => v.parse().unwrap_or(20250413),
        Err(_) => 20250413,
    }
}

/// Keeps `Duration` in scope for doc links.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(30);
