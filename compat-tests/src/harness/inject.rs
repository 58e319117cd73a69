//! `compat --inject`: faults at the libraries' own inject points (docs/inject.md). Each scenario
//! is a transfer of the generic flow run on the inject flavour of both libraries with one point
//! armed in the host's registry (an error with a non-zero value, an error 0, a sleep; count and
//! percent modes), armed afresh before each library's run and cleared after it. The two runs are
//! compared and judged against the ledger as every other scenario ([`judge`]); the reports are
//! `report-inject.{json,md,html,xml}`.

use std::time::{Duration, Instant};

use os_transport_inject as registry;
use serde_json::json;

use super::backend;
use super::driver::{ledger_of, line, load_or_say, run_on};
use super::outcome::{judge, Options, Outcome, Verdict};
use super::present::progress::Progress;
use super::present::summary::Summary;
use super::present::{self, meta, Doc};
use super::scenario::{flow_features, one, setup_for, Body, Flow, Scenario, MIB};

/// What an armed point does.
#[derive(Clone, Copy, Debug)]
pub enum Action {
    /// Sleep this many milliseconds, then go on.
    Sleep(u32),
    /// Fail the step with this value.
    Error(i32),
}

/// When an armed point fires.
#[derive(Clone, Copy, Debug)]
pub enum Mode {
    /// Every time (percent 100).
    Always,
    /// The first n times (count mode, `set_frequency(100 + n)`).
    Count(u32),
    /// That percentage of the times (percent mode).
    Percent(u32),
}

/// One armed point.
#[derive(Clone, Debug)]
pub struct Arm {
    pub point: &'static str,
    pub action: Action,
    pub mode: Mode,
}

/// A scenario of `compat --inject`.
#[derive(Clone)]
pub struct InjectScenario {
    pub scenario: Scenario,
    pub arms: Vec<Arm>,
    /// Not run on the C reference, which behaves as the original there, with the reason.
    pub legacy_skip: Option<&'static str>,
}

/// The seven points, without the `os_transport.` prefix.
pub const POINTS: [&str; 7] = [
    "send.begin",
    "recv.begin",
    "task_group.alloc",
    "send.first_chunk",
    "urma.write",
    "urma.recv",
    "notify_callback",
];

/// The transfer of every scenario: three chunks.
const LEN: u32 = 4 * MIB + 3;
/// The error value of the non-zero error scenarios (URMA_FAIL).
const VALUE: i32 = 0x1000;
/// A wait that ends a stalled request (an injected 0 of the original stalls some).
const WAIT_MS: i64 = 1000;

fn point(short: &str) -> &'static str {
    match short {
        "send.begin" => "os_transport.send.begin",
        "recv.begin" => "os_transport.recv.begin",
        "task_group.alloc" => "os_transport.task_group.alloc",
        "send.first_chunk" => "os_transport.send.first_chunk",
        "urma.write" => "os_transport.urma.write",
        "urma.recv" => "os_transport.urma.recv",
        _ => "os_transport.notify_callback",
    }
}

fn scenario(id: String, desc: String, arms: Vec<Arm>) -> InjectScenario {
    let setup = setup_for(LEN);
    let f = Flow {
        xfers: one(LEN, 0x1_2345, 0x6_7890),
        wait_ms: WAIT_MS,
        ..Default::default()
    };
    let mut features = flow_features(&setup, &f);
    features.insert("inject".into());
    InjectScenario {
        scenario: Scenario {
            id,
            desc,
            setup,
            body: Body::Flow(f),
            features,
            budget: Duration::from_secs(30),
            seed: None,
            expect: None,
        },
        arms,
        legacy_skip: None,
    }
}

/// The scenarios: each point with an error of [`VALUE`], an error 0 and a sleep, then count and
/// percent modes.
pub fn catalogue() -> Vec<InjectScenario> {
    let mut v = Vec::new();
    let arm = |p: &str, action, mode| Arm {
        point: point(p),
        action,
        mode,
    };
    for p in POINTS {
        v.push(scenario(
            format!("inj-{p}-error"),
            format!("{p} armed with error {VALUE:#x}, every time; 4 MiB + 3"),
            vec![arm(p, Action::Error(VALUE), Mode::Always)],
        ));
        let mut zero = scenario(
            format!("inj-{p}-error0"),
            format!("{p} armed with error 0, every time; 4 MiB + 3"),
            vec![arm(p, Action::Error(0), Mode::Always)],
        );
        if p == "task_group.alloc" {
            zero.legacy_skip = Some(
                "the C reference aborts here, as the original crashes (D18); run on Rust only",
            );
        }
        v.push(zero);
        v.push(scenario(
            format!("inj-{p}-sleep"),
            format!("{p} armed with a 5 ms sleep, every time; 4 MiB + 3"),
            vec![arm(p, Action::Sleep(5), Mode::Always)],
        ));
    }
    v.push(scenario(
        "inj-urma.write-count1".into(),
        format!("urma.write armed with error {VALUE:#x} once (count mode): chunk 0's WRITE fails"),
        vec![arm("urma.write", Action::Error(VALUE), Mode::Count(1))],
    ));
    v.push(scenario(
        "inj-notify_callback-count1".into(),
        "notify_callback armed with error 1 once (count mode): chunk 0's callback fails".into(),
        vec![arm("notify_callback", Action::Error(1), Mode::Count(1))],
    ));
    v.push(scenario(
        "inj-urma.write-pct50-sleep".into(),
        "urma.write armed with a 5 ms sleep half of the times (percent mode)".into(),
        vec![arm("urma.write", Action::Sleep(5), Mode::Percent(50))],
    ));
    v.push(scenario(
        "inj-send.begin-pct100".into(),
        format!("send.begin armed with error {VALUE:#x} at percent 100 (always)"),
        vec![arm("send.begin", Action::Error(VALUE), Mode::Percent(100))],
    ));
    v
}

/// Clears every point and arms `arms` (their budgets refilled).
fn arm(arms: &[Arm]) -> Result<(), String> {
    registry::clear_all();
    for a in arms {
        let p = a.point.as_bytes();
        let r = match a.action {
            Action::Sleep(ms) => registry::set_sleep(p, ms),
            Action::Error(v) => registry::set_return_error(p, v),
        };
        let f = match a.mode {
            Mode::Always => 100,
            Mode::Count(n) => 100 + n,
            Mode::Percent(x) => x,
        };
        if r != 0 || registry::set_frequency(p, f) != 0 {
            return Err(format!("arming {} failed", a.point));
        }
    }
    Ok(())
}

/// Runs `compat --inject`; returns the exit code.
pub fn run(opts: &Options) -> i32 {
    let t0 = Instant::now();
    let Some(ledger) = ledger_of(opts) else {
        return 2;
    };
    let mut cat = catalogue();
    if !opts.only.is_empty() {
        cat.retain(|s| opts.only.iter().any(|o| o == &s.scenario.id));
    }
    if opts.list {
        for s in catalogue() {
            println!("{:<30} {}", s.scenario.id, s.scenario.desc);
        }
        return 0;
    }
    let Some(libs) = load_or_say(opts) else {
        return 2;
    };
    // The registry is one object per host: no test may arm it meanwhile.
    let _exclusive = registry::testing::exclusive();
    registry::cleanup();
    println!(
        "compat --inject: reference C library (inject flavour): {}",
        opts.legacy_lib.display()
    );
    println!(
        "compat --inject: Rust library (inject flavour):        {}",
        opts.rust_lib.display()
    );
    let mut progress = Progress::new("compat --inject", cat.len(), opts.verbose);
    let mut outcomes: Vec<Outcome> = Vec::new();
    let names: [(u64, &str); 2] = [(0, "legacy"), (1, "rust")];
    for s in &cat {
        let sc = &s.scenario;
        progress.start(&sc.id);
        let t = Instant::now();
        let o = if let Some(why) = s.legacy_skip {
            let r = arm(&s.arms).and_then(|()| run_on(libs.rust, sc));
            registry::clear_all();
            let verdict = match r {
                Ok(_) => Verdict::Skipped(why.into()),
                Err(e) => Verdict::Fail(e),
            };
            Outcome::new(&sc.id, "inject", &sc.desc, verdict)
        } else {
            let l = arm(&s.arms).and_then(|()| run_on(libs.legacy, sc));
            let r = arm(&s.arms).and_then(|()| run_on(libs.rust, sc));
            registry::clear_all();
            judge(
                &sc.id,
                "inject",
                &sc.desc,
                l,
                r,
                &names,
                &ledger,
                None,
                None,
                t.elapsed().as_millis(),
            )
        };
        match o.verdict {
            Verdict::Skipped(_) => progress.done_shown(&line(&o)),
            _ => progress.done(&line(&o), matches!(o.verdict, Verdict::Fail(_))),
        }
        outcomes.push(o);
    }
    progress.finish();
    registry::cleanup();
    let doc = Doc {
        title: "os_transport C-vs-Rust conformance report: faults at the inject points".into(),
        stem: "report-inject",
        meta: meta::collect(
            "one process, the inject flavours of both libraries dlopened",
            backend::get().name(),
            &opts.legacy_lib,
            &opts.rust_lib,
            opts.seed,
            0,
            &opts.ledger,
            Vec::new(),
        ),
        outcomes: &outcomes,
        ledger: &ledger,
        checks: Vec::new(),
        tables: Vec::new(),
        seconds: t0.elapsed().as_secs_f64(),
    };
    let sum = Summary::of(&doc);
    println!(
        "\ncompat --inject: {} scenarios: {} PASS, {} DIVERGES-AS-DOCUMENTED, {} FAIL, {} SKIPPED; {:.1} s",
        outcomes.len(),
        sum.pass,
        sum.diverges,
        sum.fail + sum.run_failures,
        sum.skipped,
        doc.seconds
    );
    let mut j = json!({
        "legacy_lib": opts.legacy_lib.display().to_string(),
        "rust_lib": opts.rust_lib.display().to_string(),
        "seconds": doc.seconds,
        "totals": present::json::totals(&sum),
        "scenarios": outcomes.iter().map(|o| present::json::scenario(o, true)).collect::<Vec<_>>(),
    });
    present::json::extend(&mut j, &doc);
    let written = std::fs::create_dir_all(&opts.out)
        .and_then(|()| {
            std::fs::write(
                doc.path(&opts.out, "json"),
                serde_json::to_string_pretty(&j).unwrap_or_default(),
            )
        })
        .and_then(|()| present::write(&doc, &opts.out));
    if let Err(e) = written {
        eprintln!("compat --inject: writing the report: {e}");
        return 2;
    }
    println!(
        "compat --inject: reports in {}",
        doc.path(&opts.out, "md").display()
    );
    i32::from(sum.failed())
}
