//! The model of what a run found, as every rendering shows it ([`Doc`]), and the checks that
//! are not compared scenarios ([`Check`]).

use std::path::{Path, PathBuf};

use super::super::ledger::Ledger;
use super::super::outcome::Outcome;

/// The state of a check that is not a compared scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Passed with a documented difference (these ledger entries).
    Diverges(Vec<String>),
    Fail(String),
    Skipped(String),
    /// Could not run (the provider reaches no other process, the serving node went away).
    NotRun(String),
}

impl Status {
    /// The report word.
    pub fn word(&self) -> String {
        match self {
            Status::Ok => "OK".into(),
            Status::Diverges(ids) => format!("DIVERGES-AS-DOCUMENTED {}", ids.join(",")),
            Status::Fail(_) => "FAIL".into(),
            Status::Skipped(_) => "SKIPPED".into(),
            Status::NotRun(_) => "NOT RUN".into(),
        }
    }

    /// The reason of a FAIL, SKIPPED or NOT RUN.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Status::Fail(w) | Status::Skipped(w) | Status::NotRun(w) => Some(w),
            _ => None,
        }
    }
}

/// A check that is not a compared scenario: an interop cell, a peer-death run, a scenario that
/// did not run, or the run itself (the ledger's consistency, the control API in hardware mode,
/// the serving node).
#[derive(Debug, Clone)]
pub struct Check {
    /// `interop`, `interop-two-process`, `peer-death`, `scenario` (skipped or not run), `run`.
    pub suite: &'static str,
    pub name: String,
    pub status: Status,
    pub detail: String,
}

/// The suite of the run's own checks: a FAIL there counts as a FAIL of the run.
pub const RUN: &str = "run";

/// A table shown as it is (the interop matrix with its columns).
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub title: String,
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// What a run found, as every rendering shows it.
pub struct Doc<'a> {
    /// The page's and the Markdown's title.
    pub title: String,
    /// The file stem: `report` or `report-split`.
    pub stem: &'static str,
    /// The run's metadata, label and value ([`meta`]).
    pub meta: Vec<(String, String)>,
    pub outcomes: &'a [Outcome],
    pub ledger: &'a Ledger,
    pub checks: Vec<Check>,
    pub tables: Vec<Table>,
    pub seconds: f64,
}

impl Doc<'_> {
    /// The path of the rendering with extension `ext` in `dir`.
    pub fn path(&self, dir: &Path, ext: &str) -> PathBuf {
        dir.join(format!("{}.{ext}", self.stem))
    }
}

/// Escapes `&`, `<`, `>` and `"` for HTML and XML text and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0 (tab, newline and CR are).
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {
                o.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => o.push(c),
        }
    }
    o
}
