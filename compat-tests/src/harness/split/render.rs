//! What a `compat --split` run found ([`Findings`]: the scenarios' outcomes, the interop matrix
//! with both columns, peer death, what did not run or was skipped) and how it is shown: the
//! matrix as text ([`matrix`]), the summary line, `report-split.json`, and the model the other
//! renderings (`report-split.md`, `.html`, `.xml`) are made from ([`Findings::doc`]).

use serde_json::{json, Value};

use crate::harness::interop;
use crate::harness::ledger::Ledger;
use crate::harness::outcome::Outcome;
use crate::harness::present::{self, summary, Check, Doc, Status, Table};

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
        let (pass, div, fail) = summary::counts(&self.outcomes);
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

    /// `report-split.json`: `backend` and `nodes` are the run's; `doc` is [`Findings::doc`].
    pub fn json(&self, t: &Totals, backend: &str, nodes: u32, doc: &Doc) -> Value {
        let mut j = json!({
            "backend": backend,
            "nodes": nodes,
            "loopback_control_calls": self.ctl_calls,
            "seconds": doc.seconds,
            "totals": {"pass": t.pass, "diverges": t.div, "fail": t.fail, "not_run": self.not_run.len(),
                       "skipped": self.skipped.len(), "interop_two_ok": t.two_ok, "interop_cells": self.cells.len(),
                       "peer_death_ok": t.death_ok},
            "scenarios": self.outcomes.iter().map(|o| present::json::scenario(o, true)).collect::<Vec<_>>(),
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
        });
        present::json::extend(&mut j, doc);
        j
    }

    /// What the run found as the reports show it: the scenarios; the interop cells of both
    /// columns, peer death, what did not run or was skipped, and the run's own failures (control
    /// calls in `hardware` mode, the serving node) as checks; the matrix and peer death as tables.
    pub fn doc<'a>(
        &'a self,
        ledger: &'a Ledger,
        meta: Vec<(String, String)>,
        hardware: bool,
        secs: f64,
    ) -> Doc<'a> {
        let mut checks = Vec::new();
        for x in &self.cells {
            let name = format!("{} {} B", x.dir, x.len);
            if let Some(o) = &x.one {
                checks.push(Check {
                    suite: "interop",
                    name: name.clone(),
                    status: if o.ok {
                        Status::Ok
                    } else {
                        Status::Fail(o.detail.clone())
                    },
                    detail: o.detail.clone(),
                });
            }
            if let Some(t) = &x.two {
                let status = match t {
                    Ok(_) => Status::Ok,
                    Err(w) if w.starts_with("NOT RUN") => Status::NotRun(w.clone()),
                    Err(w) => Status::Fail(w.clone()),
                };
                checks.push(Check {
                    suite: "interop-two-process",
                    name,
                    detail: x.two_word().1,
                    status,
                });
            }
        }
        for (l, r) in &self.deaths {
            let status = match r {
                Ok((w, _)) => match w.strip_prefix("DIVERGES-AS-DOCUMENTED ") {
                    Some(ids) => Status::Diverges(ids.split(',').map(str::to_string).collect()),
                    None => Status::Ok,
                },
                Err(w) if w.starts_with("NOT RUN") => Status::NotRun(w.clone()),
                Err(w) => Status::Fail(w.clone()),
            };
            checks.push(Check {
                suite: "peer-death",
                name: l.clone(),
                status,
                detail: match r {
                    Ok((_, t)) => t.clone(),
                    Err(w) => w.clone(),
                },
            });
        }
        for n in &self.not_run {
            if !n.starts_with("xp-") && !n.starts_with("peer-death") {
                let (id, why) = n.split_once(": ").unwrap_or((n, ""));
                checks.push(Check {
                    suite: "scenario",
                    name: id.to_string(),
                    status: Status::NotRun(why.to_string()),
                    detail: String::new(),
                });
            }
        }
        for n in &self.skipped {
            let (id, why) = n.split_once(": ").unwrap_or((n, ""));
            checks.push(Check {
                suite: if id == "peer-death" {
                    "peer-death"
                } else {
                    "scenario"
                },
                name: id.to_string(),
                status: Status::Skipped(why.to_string()),
                detail: String::new(),
            });
        }
        if hardware && self.ctl_calls > 0 {
            checks.push(Check {
                suite: present::RUN,
                name: "hardware mode".into(),
                status: Status::Fail(format!(
                    "the loopback control API was called {} times in hardware mode",
                    self.ctl_calls
                )),
                detail: String::new(),
            });
        }
        if let Some(e) = &self.node_problem {
            checks.push(Check {
                suite: present::RUN,
                name: "serving node".into(),
                status: Status::Fail(e.clone()),
                detail: String::new(),
            });
        }
        let mut tables = Vec::new();
        if !self.cells.is_empty() {
            tables.push(Table {
                title: "Interop matrix (data checked byte for byte)".into(),
                head: [
                    "direction",
                    "length (bytes)",
                    "one process",
                    "two processes",
                    "detail",
                ]
                .map(String::from)
                .to_vec(),
                rows: self
                    .cells
                    .iter()
                    .map(|x| {
                        let (two, detail) = x.two_word();
                        vec![
                            x.dir.clone(),
                            x.len.to_string(),
                            x.one_word().into(),
                            two.into(),
                            detail,
                        ]
                    })
                    .collect(),
            });
        }
        if !self.deaths.is_empty() {
            tables.push(Table {
                title: "Peer death (the receiver killed mid-transfer)".into(),
                head: vec!["library".into(), "result".into()],
                rows: self
                    .deaths
                    .iter()
                    .map(|(l, r)| {
                        vec![
                            l.clone(),
                            match r {
                                Ok((w, t)) => format!("{w}: {t}"),
                                Err(w) => w.clone(),
                            },
                        ]
                    })
                    .collect(),
            });
        }
        Doc {
            title: "compat --split: sender and receiver in two processes".into(),
            stem: "report-split",
            meta,
            outcomes: &self.outcomes,
            ledger,
            checks,
            tables,
            seconds: secs,
        }
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
