//! The fuzzing loop, the supervising parent that restarts it after a crash or a hang, the
//! replay of one input and the baseline (what `make compat` runs, measured the same way).
//!
//! The loop runs in a child process (`fuzz-compat --child ...`): before each run it writes the
//! input to `<findings>/.current` and its run count to `<findings>/.runs`. When the child dies
//! (a signal, or an exit other than 0, 1 and [`EXIT_RESTART`]) the input is a `crash` finding.
//! After a hang the library is not used again in that process
//! ([`crate::harness::driver::run_on`]), so the child writes the hang's signature and reason to
//! `<findings>/.ended` and exits with [`EXIT_RESTART`]. Either way the parent re-runs the input
//! and minimizes it in processes of their own (`fuzz-compat --replay`, each within the
//! scenario's budget; a replay that dies of a signal is a crash), writes the finding, adds the
//! input to `<findings>/.skip` (inputs a child does not run again) and starts a new child for
//! what is left of the budget.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ost_supervise::Capture;

use super::coverage::{Coverage, Module};
use super::decode::decode;
use super::finding::{self, Finding, Written};
use super::mutate::mutate;
use crate::harness::driver::{self, run_on, Loaded};
use crate::harness::ledger::Ledger;
use crate::harness::outcome::{judge, Outcome, Verdict};
use crate::harness::random::{Draw, Rng};
use crate::harness::scenario::{file, Body, Scenario};
use crate::harness::{interop, random, scenario};

/// Exit status of a child that found a hang and must be replaced.
pub const EXIT_RESTART: i32 = 3;
/// In `<findings>`: the signature and reason of the hang that ended a child, one per line.
const ENDED: &str = ".ended";
/// In `<findings>`: the inputs a child skips (each one that ended a child), one hash a line.
const SKIP: &str = ".skip";
/// `FUZZ_COMPAT_ABORT_ABOVE=N` (the self-test of the crash path, `tests/fuzz_compat.rs`): a
/// scenario with a transfer longer than N bytes aborts the process before it runs, as a crash
/// of a library would.
const ABORT_ABOVE: &str = "FUZZ_COMPAT_ABORT_ABOVE";
/// First argument of the fuzzing child.
pub const CHILD_ARG: &str = "--child";

/// What `fuzz-compat` is told.
#[derive(Debug, Clone)]
pub struct Options {
    pub legacy_lib: PathBuf,
    pub rust_lib: PathBuf,
    pub ledger: PathBuf,
    /// Stop after this long (`--time`).
    pub time: Option<Duration>,
    /// Stop after this many mutated inputs (`--runs`).
    pub runs: Option<u64>,
    pub seed: u64,
    /// New inputs that reached new coverage go here (`--corpus`).
    pub corpus: PathBuf,
    /// Read-only inputs run first (`--seeds`, repeatable).
    pub seeds: Vec<PathBuf>,
    pub findings: PathBuf,
    /// Fail when the C reference's or the Rust library's counters never moved (`--smoke`).
    pub smoke: bool,
    /// Write every edge reached here at the end (`--edges FILE`).
    pub edges: Option<PathBuf>,
}

/// The threads of this process: thread id -> name.
pub fn threads() -> BTreeMap<u64, String> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return BTreeMap::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let tid = e.file_name().to_string_lossy().parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            Some((tid, comm.trim().to_string()))
        })
        .collect()
}

/// Threads that outlive a run without being a library's leak: the loopback provider's own
/// (`urma-lb-*`, process-wide, started on first use: the first run of a process started its
/// accept thread) and `destroy-inflight`'s waiter (`compat-waiter`), left blocked in legacy's
/// untimed wait after destroy, which its trace records and D5 documents.
const NOT_LEAKS: &[&str] = &["urma-lb", "compat-waiter"];

/// Waits (at most 1 s) until every thread of this process that was not in `before` has ended;
/// returns the names of those still running, but for [`NOT_LEAKS`].
fn settle_threads(before: &BTreeMap<u64, String>) -> Vec<String> {
    let end = Instant::now() + Duration::from_secs(1);
    loop {
        let extra: Vec<String> = threads()
            .into_iter()
            .filter(|(t, n)| !before.contains_key(t) && !NOT_LEAKS.iter().any(|p| n.starts_with(p)))
            .map(|(_, n)| n)
            .collect();
        if extra.is_empty() || Instant::now() >= end {
            return extra;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `sc` on both libraries, judges it, and tells the finding, if any.
pub fn trial(libs: &Loaded, ledger: &Ledger, sc: &Scenario) -> (Outcome, Option<Finding>) {
    abort_if_asked(sc);
    let t = Instant::now();
    let t0 = threads();
    let l = run_on(libs.legacy, sc);
    let leak_l = settle_threads(&t0);
    let t1 = threads();
    let r = run_on(libs.rust, sc);
    let leak_r = settle_threads(&t1);
    let names: [(u64, &str); 2] = [(0, "legacy"), (1, "rust")];
    let o = judge(
        &sc.id,
        "random",
        &sc.desc,
        l,
        r,
        &names,
        ledger,
        Some(&sc.features),
        None,
        t.elapsed().as_millis(),
    );
    let f = finding::of(&o, [leak_l, leak_r]);
    (o, f)
}

/// The self-test of the crash path ([`ABORT_ABOVE`]).
fn abort_if_asked(sc: &Scenario) {
    static ABOVE: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    let above = *ABOVE.get_or_init(|| std::env::var(ABORT_ABOVE).ok()?.parse().ok());
    let Some(n) = above else {
        return;
    };
    if let Body::Flow(f) = &sc.body {
        if f.xfers.iter().any(|x| x.len > n) {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: setrlimit reads one rlimit from `none`, a live local of that type; no core
            // file is left behind by the abort below.
            unsafe { libc::setrlimit(libc::RLIMIT_CORE, &none) };
            std::process::abort();
        }
    }
}

/// The hashes in `<findings>/.skip`.
fn skipped(findings: &Path) -> BTreeSet<u64> {
    std::fs::read_to_string(findings.join(SKIP)).map_or(BTreeSet::new(), |t| {
        t.lines()
            .filter_map(|l| u64::from_str_radix(l.trim(), 16).ok())
            .collect()
    })
}

fn read_inputs(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    files.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

/// The seeds and the corpus directory's inputs, shortest first, each once.
fn initial_inputs(opts: &Options) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = opts.seeds.iter().flat_map(|d| read_inputs(d)).collect();
    v.extend(read_inputs(&opts.corpus));
    v.sort_by(|a, b| a.len().cmp(&b.len()).then(a.cmp(b)));
    v.dedup();
    v
}

/// The running state of the loop.
struct Fuzzer<'a> {
    opts: &'a Options,
    libs: Loaded,
    ledger: Ledger,
    cov: Coverage,
    corpus: Vec<Vec<u8>>,
    runs: u64,
    mutated: u64,
    /// Signature -> how many inputs gave it.
    seen: BTreeMap<String, usize>,
    /// Inputs that ended an earlier child ([`SKIP`]).
    skip: BTreeSet<u64>,
    t0: Instant,
    last_print: Instant,
}

impl Fuzzer<'_> {
    fn status(&self) -> String {
        let s = self.t0.elapsed().as_secs_f64();
        format!(
            "fuzz-compat: {:.0} s, {} runs ({:.2} scenarios/s), corpus {}, findings {} | edges: {}",
            s,
            self.runs,
            self.runs as f64 / s.max(1e-9),
            self.corpus.len(),
            self.seen.len(),
            self.cov.line()
        )
    }

    /// Runs `input`; keeps it when it reached a new bucket, and writes it into the corpus
    /// directory when it reached a new edge;
    /// handles a finding. Returns false when the process must be replaced (a hang).
    fn run(&mut self, input: &[u8]) -> bool {
        if self.skip.contains(&finding::hash(input)) {
            return true;
        }
        let _ = std::fs::write(self.opts.findings.join(".current"), input);
        self.runs += 1;
        let _ = std::fs::write(self.opts.findings.join(".runs"), self.mutated.to_string());
        let sc = decode(input);
        self.cov.clear();
        let (_, f) = trial(&self.libs, &self.ledger, &sc);
        self.cov.refresh();
        let new = self.cov.collect();
        if new.buckets {
            self.corpus.push(input.to_vec());
        }
        // Hit counts of a multi-threaded run vary from run to run: the corpus directory (the
        // seeds to check in) keeps only the inputs that reached a new edge.
        if new.edges {
            let p = self
                .opts
                .corpus
                .join(format!("{:016x}", finding::hash(input)));
            let _ = std::fs::write(p, input);
        }
        let mut go_on = true;
        if let Some(f) = f {
            if f.signature.starts_with("hang-") {
                // The parent re-runs and minimizes it in processes of their own.
                let text = format!("{}\n{}\n", f.signature, f.reason);
                let _ = std::fs::write(self.opts.findings.join(ENDED), text);
                go_on = false;
            } else {
                self.found(input, &sc, &f);
            }
        }
        if self.last_print.elapsed() > Duration::from_secs(10) {
            println!("{}", self.status());
            self.last_print = Instant::now();
        }
        go_on
    }

    /// Re-runs, minimizes and writes a finding (once per signature; later ones are counted).
    fn found(&mut self, input: &[u8], sc: &Scenario, f: &Finding) {
        let n = self.seen.entry(f.signature.clone()).or_default();
        *n += 1;
        if *n > 1 {
            return;
        }
        println!(
            "fuzz-compat: FINDING {}: {}\n    scenario: {}",
            f.signature, f.reason, sc.desc
        );
        let (libs, ledger) = (&self.libs, &self.ledger);
        let mut run = |s: &Scenario| trial(libs, ledger, s).1.map(|g| g.signature);
        let k = 1
            + (0..2)
                .filter(|_| run(sc).is_some_and(|g| g == f.signature))
                .count();
        let (minimized, m_runs) =
            finding::minimize(sc, &f.signature, 60, Duration::from_secs(240), &mut run);
        let (m_out, _) = trial(libs, ledger, &minimized);
        let reproduced = (k, 3);
        self.cov.collect();
        let w = Written {
            finding: f,
            input,
            original: sc,
            minimized: &minimized,
            outcome: Some(&m_out),
            reproduced,
            minimize_runs: m_runs,
        };
        match finding::write(&self.opts.findings, &w) {
            Ok(d) => println!(
                "fuzz-compat: reproduced {}/{}; minimized in {m_runs} runs to: {}\n    written to {}",
                reproduced.0,
                reproduced.1,
                finding::describe(&minimized),
                d.display()
            ),
            Err(e) => eprintln!("fuzz-compat: writing the finding: {e}"),
        }
    }
}

/// The loop of the fuzzing child. Exit status: 0 (budget spent), 1 (findings, or `--smoke`
/// without coverage of both libraries), [`EXIT_RESTART`] (a hang), 2 (set-up errors).
pub fn child(opts: &Options) -> i32 {
    for d in [&opts.corpus, &opts.findings] {
        if let Err(e) = std::fs::create_dir_all(d) {
            eprintln!("fuzz-compat: {}: {e}", d.display());
            return 2;
        }
    }
    let Some((ledger, libs)) = load(opts) else {
        return 2;
    };
    let mut cov = Coverage::new(&opts.legacy_lib, &opts.rust_lib);
    // What loading reached (constructors, the log callback's registration) counts, as it does
    // in the baseline.
    cov.collect();
    let done_before: u64 = std::fs::read_to_string(opts.findings.join(".runs"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let mut fz = Fuzzer {
        opts,
        libs,
        ledger,
        cov,
        corpus: Vec::new(),
        runs: 0,
        mutated: done_before,
        seen: BTreeMap::new(),
        skip: skipped(&opts.findings),
        t0: Instant::now(),
        last_print: Instant::now(),
    };
    let deadline = opts.time.map(|t| Instant::now() + t);
    let over = |fz: &Fuzzer| {
        deadline.is_some_and(|d| Instant::now() >= d) || opts.runs.is_some_and(|n| fz.mutated >= n)
    };
    let mut initial = initial_inputs(opts);
    if initial.is_empty() {
        initial.push(Vec::new());
    }
    println!(
        "fuzz-compat: {} initial inputs; C reference {}, Rust library {}",
        initial.len(),
        opts.legacy_lib.display(),
        opts.rust_lib.display()
    );
    for input in &initial {
        if !fz.run(input) {
            return EXIT_RESTART;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    if fz.corpus.is_empty() {
        fz.corpus = initial;
    }
    let mut r = Rng::new(opts.seed.wrapping_add(done_before));
    while !over(&fz) {
        let a = r.below(fz.corpus.len() as u64) as usize;
        let b = r.below(fz.corpus.len() as u64) as usize;
        let input = mutate(&mut r, &fz.corpus[a], &fz.corpus[b]);
        fz.mutated += 1;
        if !fz.run(&input) {
            return EXIT_RESTART;
        }
    }
    println!("{}", fz.status());
    print_edges("fuzz-compat", &fz.cov, opts);
    let edges = fz.cov.edges();
    let mut fail = false;
    for (sig, n) in &fz.seen {
        println!("fuzz-compat: finding {sig}: {n} input(s)");
        fail = true;
    }
    if opts.smoke {
        for m in [Module::Legacy, Module::Rust] {
            if edges.get(&m).copied().unwrap_or(0) == 0 {
                println!(
                    "fuzz-compat: the {}'s counters never moved: is it instrumented?",
                    m.name()
                );
                fail = true;
            }
        }
    }
    i32::from(fail)
}

/// The ledger and both libraries (None, with the reason on stderr, when one cannot be loaded).
fn load(opts: &Options) -> Option<(Ledger, Loaded)> {
    let ledger = Ledger::load(&opts.ledger)
        .map_err(|e| eprintln!("fuzz-compat: the ledger: {e}"))
        .ok()?;
    let libs = driver::load(&libs_options(opts))
        .map_err(|e| eprintln!("fuzz-compat: {e}"))
        .ok()?;
    Some((ledger, libs))
}

/// One line per module: edges reached of edges instrumented; with `--edges FILE`, every edge
/// reached into that file ([`Coverage::edge_lines`]).
fn print_edges(prefix: &str, cov: &Coverage, opts: &Options) {
    if let Some(f) = &opts.edges {
        let text = cov.edge_lines().join("\n") + "\n";
        if let Err(e) = std::fs::write(f, text) {
            eprintln!("{prefix}: {}: {e}", f.display());
        }
    }
    let (edges, total) = (cov.edges(), cov.total());
    for m in Module::ALL {
        println!(
            "{prefix}: {:<13} {} of {} edges",
            m.name(),
            edges.get(&m).copied().unwrap_or(0),
            total.get(&m).copied().unwrap_or(0)
        );
    }
}

fn libs_options(opts: &Options) -> crate::harness::outcome::Options {
    crate::harness::outcome::Options {
        rust_lib: opts.rust_lib.clone(),
        legacy_lib: opts.legacy_lib.clone(),
        out: opts.findings.clone(),
        random: 0,
        seed: opts.seed,
        only: Vec::new(),
        list: false,
        ledger: opts.ledger.clone(),
        c_runner: false,
        c_runner_exe: None,
        interop: false,
        c_runner_skip: None,
        verbose: false,
        files: Vec::new(),
        repeat: 1,
    }
}

/// The findings written in `dir` (their directory names).
fn finding_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir).map_or(Vec::new(), |d| {
        d.flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    })
}

/// The parent: runs the loop in child processes (`exe --child <args>`) until the budget is
/// spent, recording a crash finding for each child that died. Exit status: the last child's
/// when it was not 0, else 1 when a finding was written meanwhile (a crash, or the hang of a
/// replaced child), else 0.
pub fn supervise(exe: &Path, args: &[String], opts: &Options) -> i32 {
    if let Err(e) = std::fs::create_dir_all(&opts.findings) {
        eprintln!("fuzz-compat: {}: {e}", opts.findings.display());
        return 2;
    }
    let _ = std::fs::remove_file(opts.findings.join(".runs"));
    let before = finding_dirs(&opts.findings);
    let start = Instant::now();
    let mut crashed = false;
    // The signatures of the crashes and hangs written.
    let mut ended = BTreeSet::new();
    let mut restarts = 0;
    loop {
        let mut cmd = std::process::Command::new(exe);
        cmd.arg(CHILD_ARG).args(args);
        if let Some(t) = opts.time {
            let left = t.saturating_sub(start.elapsed());
            if left.is_zero() {
                break;
            }
            cmd.args(["--time", &left.as_secs().max(1).to_string()]);
        }
        let status = match cmd.status() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("fuzz-compat: starting {}: {e}", exe.display());
                return 2;
            }
        };
        let f = match status.code() {
            Some(0) => break,
            Some(1) | Some(2) => return 1.max(status.code().unwrap_or(1)),
            Some(EXIT_RESTART) => {
                let text = std::fs::read_to_string(opts.findings.join(ENDED)).unwrap_or_default();
                let _ = std::fs::remove_file(opts.findings.join(ENDED));
                let mut lines = text.lines();
                Finding {
                    signature: lines.next().unwrap_or("hang").to_string(),
                    reason: lines.next().unwrap_or("a run did not end").to_string(),
                }
            }
            _ => Finding {
                signature: "crash".into(),
                reason: format!("the fuzzing process ended: {status}"),
            },
        };
        crashed = true;
        let input = std::fs::read(opts.findings.join(".current")).unwrap_or_default();
        let skip = format!("{:016x}\n", finding::hash(&input));
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(opts.findings.join(SKIP))
            .and_then(|mut w| std::io::Write::write_all(&mut w, skip.as_bytes()));
        if let Err(e) = appended {
            eprintln!("fuzz-compat: {}: {e}", opts.findings.join(SKIP).display());
            return 2;
        }
        if ended.insert(f.signature.clone()) {
            ended_finding(exe, args, opts, &input, &f);
        } else {
            println!("fuzz-compat: {} again (written once)", f.signature);
        }
        restarts += 1;
        if restarts > 20 {
            eprintln!("fuzz-compat: 20 restarts, giving up");
            return 1;
        }
        if opts.runs.is_some_and(|n| {
            std::fs::read_to_string(opts.findings.join(".runs"))
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .is_some_and(|done| done >= n)
        }) {
            break;
        }
    }
    // A child replaced after a hang wrote its finding and could not report it.
    let new: Vec<String> = finding_dirs(&opts.findings)
        .into_iter()
        .filter(|d| !before.contains(d))
        .collect();
    for d in &new {
        println!("fuzz-compat: new finding {d}");
    }
    i32::from(crashed || !new.is_empty())
}

/// A crash or a hang that ended a child: re-run twice and minimized, each run in a process of
/// its own (`exe --replay FILE` with the fuzzer's arguments, within the scenario's budget and a
/// minute), then written like any finding (without traces: the process that ran it is gone).
fn ended_finding(exe: &Path, args: &[String], opts: &Options, input: &[u8], f: &Finding) {
    println!("fuzz-compat: FINDING {}: {}", f.signature, f.reason);
    let sc = decode(input);
    let bin = opts.findings.join(".judge.bin");
    let scn = opts.findings.join(".judge.scn");
    // A replay's finding signature: `crash` when it died of a signal; None when it ended
    // without a finding, could not start or outlived its deadline.
    let judge = |file: &Path, budget: Duration| -> Option<String> {
        let mut cmd = std::process::Command::new(exe);
        cmd.args(args).arg("--replay").arg(file);
        let run = ost_supervise::spawn("fuzz-compat --replay", &mut cmd, Capture::Pipes).ok()?;
        let end = run.finish(budget + Duration::from_secs(60));
        match end.status {
            Some(s) if s.code().is_none() => Some("crash".to_string()),
            Some(_) => end.stdout.lines().find_map(|l| {
                let rest = l.strip_prefix("finding: ")?;
                Some(rest.split(' ').next().unwrap_or(rest).to_string())
            }),
            None => None,
        }
    };
    let k = if std::fs::write(&bin, input).is_ok() {
        1 + (0..2)
            .filter(|_| judge(&bin, sc.budget).is_some_and(|g| g == f.signature))
            .count()
    } else {
        1
    };
    let mut run = |s: &Scenario| {
        std::fs::write(&scn, file::to_text(s)).ok()?;
        judge(&scn, s.budget)
    };
    let (minimized, m_runs) =
        finding::minimize(&sc, &f.signature, 40, Duration::from_secs(240), &mut run);
    let w = Written {
        finding: f,
        input,
        original: &sc,
        minimized: &minimized,
        outcome: None,
        reproduced: (k, 3),
        minimize_runs: m_runs,
    };
    match finding::write(&opts.findings, &w) {
        Ok(d) => println!(
            "fuzz-compat: reproduced {k}/3; minimized in {m_runs} runs to: {}\n    written to {}",
            finding::describe(&minimized),
            d.display()
        ),
        Err(e) => eprintln!("fuzz-compat: writing the finding: {e}"),
    }
}

/// Distils the seeds and the corpus directory into `out` (`--distil OUT`): runs each input once,
/// notes the edges of the C reference and the Rust library it reached, and writes a greedy
/// set cover: the input reaching the most edges not yet covered, then the next, until every
/// edge any input reached is covered (the loopback's edges, which vary with timing, do not
/// choose). Prints how many inputs were kept of how many.
pub fn distil(opts: &Options, out: &Path) -> i32 {
    let Some((ledger, libs)) = load(opts) else {
        return 2;
    };
    let mut cov = Coverage::new(&opts.legacy_lib, &opts.rust_lib);
    let inputs = initial_inputs(opts);
    let mut reached: Vec<std::collections::BTreeSet<(usize, usize)>> = Vec::new();
    for input in &inputs {
        cov.clear();
        trial(&libs, &ledger, &decode(input));
        cov.refresh();
        reached.push(
            cov.hits(&[Module::Legacy, Module::Rust])
                .into_iter()
                .collect(),
        );
        cov.collect();
    }
    let mut covered = std::collections::BTreeSet::new();
    let mut kept = Vec::new();
    loop {
        let best = (0..inputs.len())
            .filter(|i| !kept.contains(i))
            .max_by_key(|&i| (reached[i].difference(&covered).count(), usize::MAX - i));
        match best {
            Some(i) if reached[i].difference(&covered).count() > 0 => {
                covered.extend(reached[i].iter().copied());
                kept.push(i);
            }
            _ => break,
        }
    }
    if let Err(e) = std::fs::create_dir_all(out) {
        eprintln!("fuzz-compat: {}: {e}", out.display());
        return 2;
    }
    for &i in &kept {
        let p = out.join(format!("{:016x}", finding::hash(&inputs[i])));
        if let Err(e) = std::fs::write(&p, &inputs[i]) {
            eprintln!("fuzz-compat: {}: {e}", p.display());
            return 2;
        }
    }
    println!(
        "fuzz-compat: distilled {} inputs into {} ({} edges of the two libraries) in {}",
        inputs.len(),
        kept.len(),
        covered.len(),
        out.display()
    );
    0
}

/// Runs one input (`--replay FILE`: a fuzz input, or a scenario file when it ends in `.scn`)
/// and prints its verdict, finding and traces side by side.
pub fn replay(opts: &Options, file: &Path) -> i32 {
    let input = match std::fs::read(file) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("fuzz-compat: {}: {e}", file.display());
            return 2;
        }
    };
    let sc = if file.extension().is_some_and(|e| e == "scn") {
        let parsed = std::str::from_utf8(&input)
            .map_err(|e| format!("{}: {e}", file.display()))
            .and_then(|t| file::parse(t, &file.display().to_string()));
        match parsed {
            Ok(sc) => sc,
            Err(e) => {
                eprintln!("fuzz-compat: {e}");
                return 2;
            }
        }
    } else {
        decode(&input)
    };
    let Some((ledger, libs)) = load(opts) else {
        return 2;
    };
    let (o, f) = trial(&libs, &ledger, &sc);
    println!(
        "scenario: {}\nverdict: {}",
        finding::describe(&sc),
        o.verdict.word()
    );
    if let Verdict::Fail(why) = &o.verdict {
        println!("reason: {why}");
    }
    print!("{}", finding::side_by_side(&o));
    match f {
        Some(f) => {
            println!("finding: {} ({})", f.signature, f.reason);
            1
        }
        None => 0,
    }
}

/// What `make compat` runs in this process (the catalogue, the random scenarios of the default
/// seed, the scenario files of `compat-tests/scenarios`, the interop matrix), measured by the
/// same counters: edges per module.
pub fn baseline(opts: &Options, random_n: usize) -> i32 {
    let Some((ledger, libs)) = load(opts) else {
        return 2;
    };
    let mut cov = Coverage::new(&opts.legacy_lib, &opts.rust_lib);
    let t = Instant::now();
    let cat = scenario::catalogue();
    let rnd = random::scenarios(driver::default_seed(), random_n);
    for s in &cat {
        driver::one_run(s, "catalogue", &libs, &ledger, None);
    }
    for s in &rnd {
        driver::one_run(s, "random", &libs, &ledger, Some(&s.features));
    }
    let files = driver::load_files(&driver::default_files(&opts.ledger)).unwrap_or_else(|e| {
        eprintln!("fuzz-compat baseline: the scenario files: {e}");
        Vec::new()
    });
    for s in &files {
        driver::one_run(s, "file", &libs, &ledger, Some(&s.features));
    }
    interop::run(libs.legacy, libs.rust);
    cov.refresh();
    cov.collect();
    let n = cat.len() + rnd.len() + files.len();
    println!(
        "fuzz-compat baseline: {n} scenarios ({} catalogue, {} random, {} from files) and the interop matrix in {:.0} s ({:.2} scenarios/s)",
        cat.len(),
        rnd.len(),
        files.len(),
        t.elapsed().as_secs_f64(),
        n as f64 / t.elapsed().as_secs_f64()
    );
    print_edges("fuzz-compat baseline", &cov, opts);
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linger(name: &str, ms: u64) -> std::thread::JoinHandle<()> {
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || std::thread::sleep(Duration::from_millis(ms)))
            .unwrap()
    }

    #[test]
    fn a_thread_outliving_the_run_is_a_leak_unless_it_is_the_loopbacks() {
        let before = threads();
        let a = linger("ost_wkr_lost", 1500);
        let b = linger("urma-lb-accept", 1500);
        let c = linger("short", 10);
        let leaked = settle_threads(&before);
        // Other tests of this binary may run threads of their own meanwhile.
        assert!(leaked.iter().any(|n| n == "ost_wkr_lost"), "{leaked:?}");
        assert!(
            !leaked.iter().any(|n| n == "urma-lb-accept" || n == "short"),
            "{leaked:?}"
        );
        for t in [a, b, c] {
            t.join().unwrap();
        }
    }
}
