//! The driver: runs every scenario on the reference C library and on the Rust library, has
//! each pair of runs compared and judged against the ledger ([`super::outcome::judge`]), runs
//! the C runner and the interop matrix, shows its progress (and every FAIL) while it runs, and
//! writes `report.json`, `report.md`, `report.html` and `report.xml` ([`super::present`]) and
//! prints the migration summary. Scenario files ([`load_files`]) run after the random scenarios;
//! a pinned expectation is held against the verdict; `--repeat` runs each scenario N times and
//! FAILs one whose verdict was not the same every time.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::aspect::AspectVerdict;
use super::ctx::{Lib, ScenarioRun};
use super::ledger::Ledger;
use super::outcome::{judge, Options, Outcome, RunResult, Verdict};
use super::present::progress::Progress;
use super::present::summary::{self, Summary};
use super::present::{self, meta, Check, Doc, Status, Table};
use super::scenario::{Expect, Expected, Scenario};
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
            let mut ctx = ScenarioRun::new(lib, lib, s2.setup);
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

/// [`load`], with the reason on stderr when a library cannot be loaded.
pub fn load_or_say(opts: &Options) -> Option<Loaded> {
    load(opts).map_err(|e| eprintln!("compat: {e}")).ok()
}

/// The outcome of a scenario the backend does not run.
fn skipped(id: &str, kind: &'static str, desc: &str, why: &str) -> Outcome {
    Outcome::new(id, kind, desc, Verdict::Skipped(why.into()))
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

/// The default scenario files: the directory `scenarios` beside the ledger
/// (`compat-tests/scenarios/`; the installed harness's private directory), if there is one.
pub fn default_files(ledger: &Path) -> Vec<PathBuf> {
    ledger
        .parent()
        .map(|d| d.join("scenarios"))
        .filter(|d| d.is_dir())
        .into_iter()
        .collect()
}

/// The scenarios of `paths` (files, and directories whose `*.scn` files are taken in name
/// order), each with the id `file:<stem>` and kind `file`.
pub fn load_files(paths: &[PathBuf]) -> Result<Vec<Scenario>, String> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("{}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "scn"))
                .collect();
            v.sort();
            files.extend(v);
        } else {
            files.push(p.clone());
        }
    }
    let mut v: Vec<Scenario> = Vec::new();
    for f in files {
        let origin = f.display().to_string();
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{origin}: {e}"))?;
        let mut s = scenario::file::parse(&text, &origin)?;
        s.id = scenario::file::file_id(&origin);
        if v.iter().any(|o| o.id == s.id) {
            return Err(format!(
                "{origin}: a second scenario file with the id {}",
                s.id
            ));
        }
        v.push(s);
    }
    Ok(v)
}

/// The scenarios of a run, in the order they run: the catalogue, the C runner, the random ones.
fn planned(opts: &Options, cat: &[Scenario], rnd: &[Scenario]) -> usize {
    let c = if opts.c_runner {
        crunner::SCENARIOS
            .iter()
            .filter(|(id, _)| opts.only.is_empty() || opts.only.iter().any(|o| o == id))
            .count()
    } else {
        0
    };
    cat.len() + c + rnd.len()
}

/// What `--repeat` saw of one scenario: its id, the verdicts in the order first seen with how
/// often, the runs per second.
pub struct Repeated {
    pub id: String,
    pub verdicts: Vec<(String, usize)>,
    pub per_second: f64,
}

impl Repeated {
    /// True when every run gave the same verdict.
    pub fn stable(&self) -> bool {
        self.verdicts.len() == 1
    }

    /// `id  N runs: PASS x20  (3.1 scenarios/s)`.
    pub fn line(&self) -> String {
        let seen: Vec<String> = self
            .verdicts
            .iter()
            .map(|(v, n)| format!("{v} x{n}"))
            .collect();
        let runs: usize = self.verdicts.iter().map(|(_, n)| n).sum();
        format!(
            "{:<28} {runs} runs: {}{}  ({:.2} scenarios/s)",
            self.id,
            seen.join(", "),
            if self.stable() { "" } else { "  FLIPS" },
            self.per_second
        )
    }
}

/// Runs `s` `opts.repeat` times (at least once; see [`one_run`]). With more than one run and a
/// verdict that was not the same every time, the scenario FAILs with the verdicts seen and the
/// outcome kept is the first run that differed from the first (or the first, if that one
/// FAILed): its traces, diff and reason are what the reports show.
fn one(
    s: &Scenario,
    kind: &'static str,
    libs: &Loaded,
    ledger: &Ledger,
    features: Option<&BTreeSet<String>>,
    repeat: usize,
) -> (Outcome, Option<Repeated>) {
    let t = Instant::now();
    let first = one_run(s, kind, libs, ledger, features);
    if repeat <= 1 || matches!(first.verdict, Verdict::Skipped(_)) {
        return (first, None);
    }
    let mut seen: Vec<(String, usize)> = vec![(first.verdict.word(), 1)];
    let mut odd: Option<(usize, Outcome)> = None;
    for k in 1..repeat {
        let o = one_run(s, kind, libs, ledger, features);
        let w = o.verdict.word();
        match seen.iter_mut().find(|(v, _)| *v == w) {
            Some((_, n)) => *n += 1,
            None => seen.push((w, 1)),
        }
        if odd.is_none() && o.verdict != first.verdict {
            odd = Some((k + 1, o));
        }
    }
    let rep = Repeated {
        id: s.id.clone(),
        verdicts: seen,
        per_second: repeat as f64 / t.elapsed().as_secs_f64().max(1e-9),
    };
    let Some((k, odd)) = odd.filter(|_| !rep.stable()) else {
        return (first, Some(rep));
    };
    let why = |o: &Outcome| match &o.verdict {
        Verdict::Fail(r) | Verdict::Skipped(r) => format!("{} ({r})", o.verdict.word()),
        v => v.word(),
    };
    let msg = format!(
        "the verdict was not the same in {repeat} runs: {}; run 1: {}; run {k}: {}",
        rep.line(),
        why(&first),
        why(&odd)
    );
    let mut kept = if matches!(first.verdict, Verdict::Fail(_)) {
        first
    } else {
        odd
    };
    kept.verdict = Verdict::Fail(msg);
    (kept, Some(rep))
}

/// Runs `s` on both libraries (or reports it skipped by the backend), judges it and holds the
/// verdict against the scenario's pinned expectation, if any.
pub fn one_run(
    s: &Scenario,
    kind: &'static str,
    libs: &Loaded,
    ledger: &Ledger,
    features: Option<&BTreeSet<String>>,
) -> Outcome {
    if let Some(why) = backend::get().skip(&s.id) {
        return skipped(&s.id, kind, &s.desc, why);
    }
    let names: [(u64, &str); 2] = [(0, "legacy"), (1, "rust")];
    let t = Instant::now();
    let l = run_on(libs.legacy, s);
    let r = run_on(libs.rust, s);
    let mut o = judge(
        &s.id,
        kind,
        &s.desc,
        l,
        r,
        &names,
        ledger,
        features,
        s.seed,
        t.elapsed().as_millis(),
    );
    if let Some(e) = &s.expect {
        if let Some(why) = unexpected(e, &o) {
            o.verdict = Verdict::Fail(why);
        }
    }
    o
}

/// Why outcome `o` is not what `e` pins (None when it is).
fn unexpected(e: &Expect, o: &Outcome) -> Option<String> {
    let mut why = Vec::new();
    if let Some(want) = &e.verdict {
        let got = match &o.verdict {
            Verdict::Pass => Expected::Same,
            Verdict::Diverges(ids) => Expected::documented(ids),
            Verdict::Fail(_) | Verdict::Skipped(_) => Expected::Fail,
        };
        if &got != want {
            why.push(format!(
                "expected {}, got {}",
                want.text(false),
                got.text(false)
            ));
        }
    }
    for (a, want) in &e.aspects {
        let got = o
            .aspects
            .iter()
            .find(|(x, _)| x == a)
            .map(|(_, v)| match v {
                AspectVerdict::Same => Expected::Same,
                AspectVerdict::Differs(ids) => Expected::documented(ids),
                AspectVerdict::Fail => Expected::Fail,
            });
        if got.as_ref() != Some(want) {
            why.push(format!(
                "expected {} {}, got {}",
                a.key(),
                want.text(true),
                got.map(|g| g.text(true))
                    .unwrap_or_else(|| "not compared".into())
            ));
        }
    }
    if why.is_empty() {
        return None;
    }
    if let Verdict::Fail(f) = &o.verdict {
        why.push(format!("(the run: {f})"));
    }
    Some(why.join("; "))
}

/// Runs the whole harness; returns the process exit code.
pub fn run(opts: &Options) -> i32 {
    let t0 = Instant::now();
    let Some(ledger) = ledger_of(opts) else {
        return 2;
    };
    let mut cat = scenario::catalogue();
    let mut rnd = random::scenarios(opts.seed, opts.random);
    let mut files = match load_files(&opts.files) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("compat: {e}");
            return 2;
        }
    };
    if !opts.only.is_empty() {
        cat.retain(|s| opts.only.iter().any(|o| o == &s.id));
        rnd.retain(|s| opts.only.iter().any(|o| o == &s.id));
        files.retain(|s| opts.only.iter().any(|o| o == &s.id));
        // Every rand-<seed> named is generated from its seed, whatever --seed and --random say.
        for o in &opts.only {
            if let Some(seed) = o.strip_prefix("rand-").and_then(|s| s.parse::<u64>().ok()) {
                if !rnd.iter().any(|s| s.seed == Some(seed)) {
                    rnd.push(random::scenario(seed));
                }
            }
        }
    }
    if opts.list {
        for s in scenario::catalogue() {
            println!("{:<22} {}", s.id, s.desc);
        }
        for (id, d) in crunner::SCENARIOS {
            println!("{id:<22} [C runner] {d}");
        }
        println!("rand-<seed>            random scenario (--random N --seed S)");
        for s in load_files(&opts.files).unwrap_or_default() {
            println!("{:<22} [file] {}", s.id, s.desc);
        }
        return 0;
    }
    let Some(libs) = load_or_say(opts) else {
        return 2;
    };
    println!("compat: reference C library: {}", opts.legacy_lib.display());
    println!("compat: Rust library:        {}", opts.rust_lib.display());
    println!(
        "compat: {} catalogue scenarios, {} random (seed {}), {} from scenario files, ledger {}",
        cat.len(),
        rnd.len(),
        opts.seed,
        files.len(),
        opts.ledger.display()
    );
    let mut progress = Progress::new(
        "compat",
        planned(opts, &cat, &rnd) + files.len(),
        opts.verbose,
    );
    let mut repeated: Vec<Repeated> = Vec::new();
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut diverging_ids: BTreeSet<String> = BTreeSet::new();
    let mut record = |o: Outcome, progress: &mut Progress, outcomes: &mut Vec<Outcome>| {
        if o.diff.is_some() && o.kind != "random" {
            diverging_ids.insert(o.id.clone());
        }
        match o.verdict {
            // Why a scenario did not run is always shown, as a FAIL is.
            Verdict::Skipped(_) => progress.done_shown(&line(&o)),
            _ => progress.done(&line(&o), matches!(o.verdict, Verdict::Fail(_))),
        }
        outcomes.push(o);
    };
    let repeat = opts.repeat;
    let mut run_one = |s: &Scenario,
                       kind: &'static str,
                       features: Option<&BTreeSet<String>>,
                       progress: &mut Progress|
     -> Outcome {
        progress.start(&s.id);
        let (o, rep) = one(s, kind, &libs, &ledger, features, repeat);
        repeated.extend(rep);
        o
    };
    for s in &cat {
        let o = run_one(s, "catalogue", None, &mut progress);
        record(o, &mut progress, &mut outcomes);
    }
    let mut c_outcomes = Vec::new();
    let c_skip = opts.c_runner_skip.filter(|_| opts.c_runner);
    if let Some(why) = c_skip {
        for (id, d) in crunner::SCENARIOS {
            if opts.only.is_empty() || opts.only.iter().any(|o| o == id) {
                record(
                    skipped(id, "c-runner", d, why),
                    &mut progress,
                    &mut c_outcomes,
                );
            }
        }
    } else if opts.c_runner
        && (opts.only.is_empty() || opts.only.iter().any(|o| o.starts_with("c-")))
    {
        progress.start("the C runner");
        match crunner::run_all(opts, &ledger, &opts.only) {
            Ok(v) => {
                for o in v {
                    record(o, &mut progress, &mut c_outcomes);
                }
            }
            Err(e) => {
                let o = Outcome::new(
                    "c-runner",
                    "c-runner",
                    "build of compat-tests/c/runner.c",
                    Verdict::Fail(e),
                );
                record(o, &mut progress, &mut c_outcomes);
            }
        }
    }
    for s in &rnd {
        let o = run_one(s, "random", Some(&s.features), &mut progress);
        record(o, &mut progress, &mut outcomes);
    }
    for s in &files {
        let o = run_one(s, "file", Some(&s.features), &mut progress);
        record(o, &mut progress, &mut outcomes);
    }
    progress.finish();
    if !repeated.is_empty() {
        print_repeats(&repeated, opts.repeat);
    }
    outcomes.extend(c_outcomes);
    let skipped_ids: BTreeSet<String> = outcomes
        .iter()
        .filter(|o| matches!(o.verdict, Verdict::Skipped(_)))
        .map(|o| o.id.clone())
        .collect();
    let mut ledger_problems = if opts.only.is_empty() {
        ledger_consistency(&ledger, &skipped_ids, &diverging_ids)
    } else {
        Vec::new()
    };
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
        println!("compat: interop matrix ...");
        interop::run(libs.legacy, libs.rust)
    } else {
        Vec::new()
    };
    if !cells.is_empty() {
        println!("\nInterop matrix (one process, both libraries, data checked byte for byte):");
        println!("{}", interop::render(&cells));
    }
    let secs = t0.elapsed().as_secs_f64();
    let doc = document(opts, &ledger, &outcomes, &ledger_problems, &cells, secs);
    let sum = Summary::of(&doc);
    println!(
        "\ncompat: {} scenarios ({} catalogue, {} C runner, {} random, {} from files): {} PASS, {} DIVERGES-AS-DOCUMENTED, {} FAIL, {} SKIPPED; interop {}/{} cells OK; {:.1} s",
        outcomes.len(),
        outcomes.iter().filter(|o| o.kind == "catalogue").count(),
        outcomes.iter().filter(|o| o.kind == "c-runner").count(),
        outcomes.iter().filter(|o| o.kind == "random").count(),
        outcomes.iter().filter(|o| o.kind == "file").count(),
        sum.pass,
        sum.diverges,
        sum.fail + sum.run_failures,
        sum.skipped,
        sum.suite("interop").ok,
        cells.len(),
        secs
    );
    if let Err(e) = write_reports(opts, &doc, &sum) {
        eprintln!("compat: writing the report: {e}");
        return 2;
    }
    print!("{}", summary::migration(&doc, &opts.out));
    if sum.failed() {
        1
    } else {
        0
    }
}

/// The `--repeat` table: per scenario the verdicts seen and scenarios per second, then the
/// totals (scenarios whose verdict flipped, runs per second over all).
fn print_repeats(v: &[Repeated], n: usize) {
    println!("\nRepeat: each scenario {n} times (a run = both libraries):");
    for r in v {
        println!("  {}", r.line());
    }
    let flips = v.iter().filter(|r| !r.stable()).count();
    let secs: f64 = v.iter().map(|r| n as f64 / r.per_second).sum();
    println!(
        "compat: --repeat {n}: {} scenarios, {} runs, {flips} with a verdict that flipped; {:.2} scenarios/s",
        v.len(),
        v.len() * n,
        (v.len() * n) as f64 / secs.max(1e-9)
    );
}

/// Ledger consistency of a full run: every observable entry must show in at least one of its
/// catalogue or C-runner scenarios that ran (`diverging`), and docs/divergences.md and the twin
/// must name the same entries.
fn ledger_consistency(
    ledger: &Ledger,
    skipped_ids: &BTreeSet<String>,
    diverging: &BTreeSet<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for e in &ledger.entries {
        // Scenarios the backend skipped show nothing either way.
        let explicit: Vec<&String> = e
            .scenarios
            .iter()
            .filter(|s| *s != "*" && !skipped_ids.contains(*s))
            .collect();
        if e.observable && !explicit.is_empty() && !explicit.iter().any(|s| diverging.contains(*s))
        {
            problems.push(format!(
                "{}: observable, but none of its scenarios {:?} shows a difference (stale entry)",
                e.id, e.scenarios
            ));
        }
        if e.observable && e.scenarios.is_empty() {
            problems.push(format!("{}: observable, but lists no scenario", e.id));
        }
    }
    problems
}

/// What an in-process run found, as the reports show it.
fn document<'a>(
    opts: &Options,
    ledger: &'a Ledger,
    outcomes: &'a [Outcome],
    ledger_problems: &[String],
    cells: &[interop::Cell],
    secs: f64,
) -> Doc<'a> {
    let mut checks: Vec<Check> = cells
        .iter()
        .map(|c| Check {
            suite: "interop",
            name: format!("{} {} B", c.dir, c.len),
            status: if c.ok {
                Status::Ok
            } else {
                Status::Fail(c.detail.clone())
            },
            detail: c.detail.clone(),
        })
        .collect();
    checks.extend(ledger_problems.iter().map(|p| Check {
        suite: present::RUN,
        name: "ledger".into(),
        status: Status::Fail(p.clone()),
        detail: String::new(),
    }));
    let tables = if cells.is_empty() {
        Vec::new()
    } else {
        vec![Table {
            title: "Interop matrix (one process, data checked byte for byte)".into(),
            head: vec![
                "direction".into(),
                "length (bytes)".into(),
                "result".into(),
                "detail".into(),
            ],
            rows: cells
                .iter()
                .map(|c| {
                    vec![
                        c.dir.clone(),
                        c.len.to_string(),
                        if c.ok { "OK" } else { "FAIL" }.into(),
                        c.detail.clone(),
                    ]
                })
                .collect(),
        }]
    };
    Doc {
        title: "os_transport C-vs-Rust conformance report".into(),
        stem: "report",
        meta: meta::collect(
            "one process, both libraries dlopened",
            backend::get().name(),
            &opts.legacy_lib,
            &opts.rust_lib,
            opts.seed,
            opts.random,
            &opts.ledger,
            Vec::new(),
        ),
        outcomes,
        ledger,
        checks,
        tables,
        seconds: secs,
    }
}

/// `report.json`, then `report.md`, `report.html` and `report.xml`.
fn write_reports(opts: &Options, doc: &Doc, sum: &Summary) -> std::io::Result<()> {
    std::fs::create_dir_all(&opts.out)?;
    let interop = doc.checks.iter().filter(|c| c.suite == "interop");
    let mut totals = present::json::totals(sum);
    totals["interop_ok"] = json!(sum.suite("interop").ok);
    totals["interop_cells"] = json!(sum.suite("interop").total);
    let mut j = json!({
        "backend": backend::get().name(),
        "loopback_control_calls": crate::loopback_ctl::forbidden_attempts(),
        "legacy_lib": opts.legacy_lib.display().to_string(),
        "rust_lib": opts.rust_lib.display().to_string(),
        "seed": opts.seed,
        "random": opts.random,
        "seconds": doc.seconds,
        "totals": totals,
        "ledger_problems": doc.checks.iter().filter(|c| c.suite == present::RUN).filter_map(|c| c.status.reason()).collect::<Vec<_>>(),
        "scenarios": doc.outcomes.iter().map(|o| present::json::scenario(o, true)).collect::<Vec<_>>(),
        "interop": doc.tables.first().map(|t| t.rows.iter().zip(interop).map(|(r, c)| json!({
            "direction": r[0], "len": r[1].parse::<u64>().unwrap_or(0), "ok": c.status == Status::Ok, "detail": c.detail
        })).collect::<Vec<_>>()).unwrap_or_default(),
    });
    present::json::extend(&mut j, doc);
    std::fs::write(
        doc.path(&opts.out, "json"),
        serde_json::to_string_pretty(&j).unwrap_or_default(),
    )?;
    present::write(doc, &opts.out)
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
