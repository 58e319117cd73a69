//! What a run of the harness is given and what it makes of one scenario: the options
//! ([`Options`]), the result of the scenario on one library ([`RunResult`]) and [`judge`], which
//! compares the two libraries' normalised traces aspect by aspect ([`super::aspect`]), judges
//! each differing aspect against the ledger and derives the scenario's verdict from them
//! ([`Outcome`], [`Verdict`]). The driver ([`super::driver`]), the C runner
//! ([`super::crunner`]) and `compat --split` build on it.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

use super::aspect::{self, Aspect, AspectVerdict};
use super::backend;
use super::ledger::Ledger;
use super::normalise::{normalise, Normalised};
use super::received;

/// Command-line options of `compat`.
#[derive(Debug, Clone)]
pub struct Options {
    pub rust_lib: PathBuf,
    pub legacy_lib: PathBuf,
    pub out: PathBuf,
    pub random: usize,
    pub seed: u64,
    pub only: Vec<String>,
    pub list: bool,
    pub ledger: PathBuf,
    pub c_runner: bool,
    /// A prebuilt C runner (`--c-runner-exe`): used as it is instead of compiling
    /// `compat-tests/c/runner.c` (the installed conformance package ships one).
    pub c_runner_exe: Option<PathBuf>,
    pub interop: bool,
    /// The C runner is not run, for this reason (reported as SKIPPED): set by the backends whose
    /// trace it cannot give ([`super::backend::C_RUNNER_SKIP`]).
    pub c_runner_skip: Option<&'static str>,
    /// Print every scenario's line (`--verbose`), not only the FAILs and the progress.
    pub verbose: bool,
    /// Scenario files, and directories whose `*.scn` files run in name order
    /// (`--scenario-file`; default [`super::driver::default_files`]).
    pub files: Vec<PathBuf>,
    /// Runs of each in-process scenario (`--repeat`); a scenario whose verdict was not the
    /// same every time FAILs.
    pub repeat: usize,
}

/// The verdict of one comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Diverges(Vec<String>),
    Fail(String),
    /// Not run on this backend, with the reason ([`super::backend::TraceFaults::skip`]).
    Skipped(String),
}

impl Verdict {
    /// The report word.
    pub fn word(&self) -> String {
        match self {
            Verdict::Pass => "PASS".into(),
            Verdict::Diverges(ids) => format!("DIVERGES-AS-DOCUMENTED {}", ids.join(",")),
            Verdict::Fail(_) => "FAIL".into(),
            Verdict::Skipped(_) => "SKIPPED".into(),
        }
    }
}

/// One compared scenario.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub id: String,
    pub kind: &'static str,
    pub desc: String,
    pub verdict: Verdict,
    /// The verdict of every aspect, in [`Aspect::ALL`] order; empty when the traces were not
    /// compared (a run failed, or the scenario was skipped).
    pub aspects: Vec<(Aspect, AspectVerdict)>,
    pub sections: Vec<String>,
    pub diff: Option<String>,
    pub legacy_trace: String,
    pub rust_trace: String,
    pub seed: Option<u64>,
    pub ms: u128,
}

/// Result of one run of a scenario on one library.
pub type RunResult = Result<Vec<Value>, String>;

impl Outcome {
    /// An outcome with `verdict` and no traces (yet).
    pub fn new(id: &str, kind: &'static str, desc: &str, verdict: Verdict) -> Outcome {
        Outcome {
            id: id.into(),
            kind,
            desc: desc.into(),
            verdict,
            aspects: vec![],
            sections: vec![],
            diff: None,
            legacy_trace: String::new(),
            rust_trace: String::new(),
            seed: None,
            ms: 0,
        }
    }
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

/// A unified diff (pretty_assertions) of two texts.
pub fn diff_text(left: &str, right: &str) -> String {
    format!("{}", pretty_assertions::StrComparison::new(left, right))
}

/// Compares two runs and judges the difference against the ledger. `features` is given for
/// random scenarios (ledger predicates); catalogue and C-runner scenarios match by id, and
/// for them an entry that lists the id explicitly while the traces agree is stale. Over a
/// provider the harness does not control (hardware mode), entries also apply by the CRs the two
/// libraries were handed (the ledger's `received` predicates, [`received::evidence`]).
#[allow(clippy::too_many_arguments)]
pub fn judge(
    id: &str,
    kind: &'static str,
    desc: &str,
    legacy: RunResult,
    rust: RunResult,
    lib_names: &[(u64, &str)],
    ledger: &Ledger,
    features: Option<&BTreeSet<String>>,
    seed: Option<u64>,
    ms: u128,
) -> Outcome {
    let mut o = Outcome {
        seed,
        ms,
        ..Outcome::new(id, kind, desc, Verdict::Pass)
    };
    let (l, r) = match (legacy, rust) {
        (Ok(l), Ok(r)) => (l, r),
        (l, r) => {
            let mut why = Vec::new();
            if let Err(e) = l {
                why.push(e);
            }
            if let Err(e) = r {
                why.push(e);
            }
            o.verdict = Verdict::Fail(why.join("; "));
            return o;
        }
    };
    let nl: Normalised = normalise(&l, &lib_names[..1]);
    let nr: Normalised = normalise(&r, &lib_names[1..]);
    o.legacy_trace = nl.render();
    o.rust_trace = nr.render();
    let differing = aspect::differing(&nl, &nr);
    if differing.is_empty() {
        o.aspects = Aspect::ALL
            .into_iter()
            .map(|a| (a, AspectVerdict::Same))
            .collect();
        if features.is_none() {
            let stale = ledger.for_scenario(id);
            if !stale.is_empty() {
                o.verdict = Verdict::Fail(format!(
                    "stale ledger: {} list(s) this scenario but the traces no longer differ",
                    stale.join(",")
                ));
            }
        }
        return o;
    }
    o.sections = nl.differing_sections(&nr);
    o.diff = Some(diff_text(&o.legacy_trace, &o.rust_trace));
    let scoped;
    let ledger = if backend::get().provider_known() {
        ledger
    } else {
        scoped = ledger.with_received(id, &received::evidence(&l, &r));
        &scoped
    };
    o.aspects = Aspect::ALL
        .into_iter()
        .map(|a| {
            let v = if !differing.contains(&a) {
                AspectVerdict::Same
            } else {
                match ledger.attribute(id, features, a.key()) {
                    ids if ids.is_empty() => AspectVerdict::Fail,
                    ids => AspectVerdict::Differs(ids),
                }
            };
            (a, v)
        })
        .collect();
    let keys: Vec<String> = differing.iter().map(|a| a.key().to_string()).collect();
    o.verdict = match ledger.explain(id, features, &keys) {
        Ok(ids) => Verdict::Diverges(ids),
        Err(missing) => Verdict::Fail(format!(
            "undocumented difference in {} (no ledger entry applies)",
            missing.join(", ")
        )),
    };
    o
}
