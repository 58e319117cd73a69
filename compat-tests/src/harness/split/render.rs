//! What a `compat --split` run found ([`Findings`]: the scenarios' outcomes, the interop matrix
//! with both columns, peer death, what did not run or was skipped) and how it is shown: the
//! matrix as text ([`matrix`]), the summary line, `report-split.md` and `report-split.json`.

use serde_json::{json, Value};

use crate::harness::interop;
use crate::harness::outcome::{Outcome, Verdict};
use crate::harness::report;

/// A peer-death run of one library: Ok((verdict word, detail)) or Err(why: FAIL or NOT RUN).
pub type DeathResult = Result<(String, String), String>;

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

impl Cell2 {
    /// The one-process column's word.
    fn one_word(&self) -> &'static str {
        match &self.one {
            Some(o) if o.ok => "OK",
            Some(_) => "FAIL",
            None => "-",
        }
    }

    /// The two-process column's word and its detail.
    fn two_word(&self) -> (&'static str, String) {
        match &self.two {
            None => ("-", String::new()),
            Some(Ok(d)) => ("OK", d.clone()),
            Some(Err(w)) if w.starts_with("NOT RUN") => ("NOT RUN", w.clone()),
            Some(Err(w)) => ("FAIL", w.clone()),
        }
    }
}

/// What a run found.
#[derive(Default)]
pub struct Findings {
    /// The scenarios that ran, compared and judged.
    pub outcomes: Vec<Outcome>,
    /// The interop matrix.
    pub cells: Vec<Cell2>,
    /// Peer death, per library.
    pub deaths: Vec<(String, DeathResult)>,
    /// What could not run, with the reason (`<id>: <why>`, `xp-<len> <dir>: ...`,
    /// `peer-death <lib>: ...`).
    pub not_run: Vec<String>,
    /// What the backend skips, with the reason.
    pub skipped: Vec<String>,
    /// `urma_loopback_*` calls of the harness, its children and the serving node.
    pub ctl_calls: u64,
    /// The serving node's failure, if any.
    pub node_problem: Option<String>,
}

/// The counts of a run.
pub struct Totals {
    pub pass: usize,
    pub div: usize,
    /// FAILed scenarios, and the run's own failures (control calls in hardware mode, the serving
    /// node) that the driver adds.
    pub fail: usize,
    /// Interop cells failed in either column.
    pub cell_fail: usize,
    /// Interop cells OK in the two-process column.
    pub two_ok: usize,
    pub death_fail: usize,
    pub death_ok: usize,
}

impl Findings {
    /// The counts (`fail` before the driver adds the run's own failures).
    pub fn totals(&self) -> Totals {
        let (pass, div, fail) = report::counts(&self.outcomes);
        let cell_fail = self
            .cells
            .iter()
            .filter(|x| {
                !x.one.as_ref().is_some_and(|o| o.ok)
                    || matches!(&x.two, Some(Err(w)) if !w.starts_with("NOT RUN"))
            })
            .count();
        let two_ok = self
            .cells
            .iter()
            .filter(|x| matches!(x.two, Some(Ok(_))))
            .count();
        let death_fail = self
            .deaths
            .iter()
            .filter(|(_, r)| matches!(r, Err(w) if !w.starts_with("NOT RUN")))
            .count();
        let death_ok = self.deaths.iter().filter(|(_, r)| r.is_ok()).count();
        Totals {
            pass,
            div,
            fail,
            cell_fail,
            two_ok,
            death_fail,
            death_ok,
        }
    }

    /// The last line of the output.
    pub fn summary(&self, t: &Totals, secs: f64) -> String {
        let Totals {
            pass,
            div,
            fail,
            two_ok,
            death_ok,
            ..
        } = t;
        format!(
            "\ncompat --split: {} scenarios: {pass} PASS, {div} DIVERGES-AS-DOCUMENTED, {fail} FAIL, {} NOT RUN, {} SKIPPED; interop two-process column {two_ok}/{} cells OK; peer death {death_ok}/{} OK; {secs:.1} s",
            self.outcomes.len()
                + self
                    .not_run
                    .iter()
                    .filter(|n| !n.starts_with("xp-") && !n.starts_with("peer-death"))
                    .count(),
            self.not_run.len(),
            self.skipped.len(),
            self.cells.len(),
            self.deaths.len(),
        )
    }

    /// `report-split.json`: `backend` and `nodes` are the run's.
    pub fn json(&self, t: &Totals, backend: &str, nodes: u32, secs: f64) -> Value {
        json!({
            "backend": backend,
            "nodes": nodes,
            "loopback_control_calls": self.ctl_calls,
            "seconds": secs,
            "totals": {"pass": t.pass, "diverges": t.div, "fail": t.fail, "not_run": self.not_run.len(),
                       "skipped": self.skipped.len(), "interop_two_ok": t.two_ok, "interop_cells": self.cells.len(),
                       "peer_death_ok": t.death_ok},
            "scenarios": self.outcomes.iter().map(|o| json!({
                "id": o.id,
                "verdict": o.verdict.word(),
                "reason": match &o.verdict { Verdict::Fail(w) => json!(w), _ => Value::Null },
                "differing_sections": o.sections,
            })).collect::<Vec<_>>(),
            "interop": self.cells.iter().map(|x| {
                let (two, detail) = x.two_word();
                json!({"direction": x.dir, "len": x.len, "one": x.one_word(), "two": two, "detail": detail})
            }).collect::<Vec<_>>(),
            "peer_death": self.deaths.iter().map(|(l, r)| match r {
                Ok((w, t)) => json!({"lib": l, "verdict": w, "detail": t}),
                Err(w) => json!({"lib": l, "verdict": if w.starts_with("NOT RUN") { "NOT RUN" } else { "FAIL" }, "detail": w}),
            }).collect::<Vec<_>>(),
            "not_run": self.not_run,
            "skipped": self.skipped,
            "serving_node": self.node_problem,
        })
    }

    /// `report-split.md`.
    pub fn markdown(&self, secs: f64) -> String {
        let mut s = String::from("# compat --split: sender and receiver in two processes\n\n");
        s.push_str("| scenario | verdict | differing sections |\n|---|---|---|\n");
        for o in &self.outcomes {
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
        for x in &self.cells {
            let one = x.one_word();
            let (two, detail) = x.two_word();
            s.push_str(&format!(
                "| {} | {} | {one} | {two} | {detail} |\n",
                x.dir, x.len
            ));
        }
        s.push_str("\n## Peer death\n\n| library | result |\n|---|---|\n");
        for (l, r) in &self.deaths {
            let t = match r {
                Ok((w, t)) => format!("{w}: {t}"),
                Err(w) => w.clone(),
            };
            s.push_str(&format!("| {l} | {t} |\n"));
        }
        for o in self.outcomes.iter().filter(|o| o.diff.is_some()) {
            s.push_str(&format!(
                "\n## {} ({})\n\n```diff\n{}\n```\n",
                o.id,
                o.verdict.word(),
                report::strip_ansi(o.diff.as_deref().unwrap_or(""))
            ));
        }
        for (title, list) in [("Not run", &self.not_run), ("Skipped", &self.skipped)] {
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
}

/// The interop matrix as plain text: one process, two processes.
pub fn matrix(cells: &[Cell2]) -> String {
    let mut s = format!(
        "  {:<10} {:>11}  {:<12} {}\n",
        "direction", "length", "one process", "two processes"
    );
    for x in cells {
        let one = x.one_word();
        let (two, detail) = x.two_word();
        s.push_str(&format!(
            "  {:<10} {:>9} B  {:<12} {two}  {detail}\n",
            x.dir, x.len, one
        ));
    }
    s
}
