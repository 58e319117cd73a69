//! `<stem>.xml`: the run in JUnit XML, the format Jenkins and GitLab read. One `testsuite` per
//! scenario kind (`compat.catalogue`, `compat.c-runner`, `compat.random`, `compat.file`, `compat.split`) and
//! per suite of other checks (`compat.interop`, `compat.peer-death`, ...); one `testcase` per
//! scenario and per check: `failure` for a FAIL (with the trace diff), `skipped` with the reason
//! for SKIPPED, `error` for NOT RUN; the verdict, each aspect's verdict and the ledger entries
//! with their meaning as the test case's properties, the run's metadata as each suite's.
//! `compat-tests/junit.xsd` is the subset of the format written here; the report test
//! validates against it.

use super::super::outcome::strip_ansi;
use super::super::outcome::{Outcome, Verdict};
use super::model::{escape, Check, Doc, Status};
use super::summary::meaning;

/// One test case being written.
struct Case {
    name: String,
    secs: f64,
    props: Vec<(String, String)>,
    /// ("failure" | "skipped" | "error", message, body).
    result: Option<(&'static str, String, String)>,
    out: String,
}

fn scenario_case(doc: &Doc, o: &Outcome) -> Case {
    let mut props = vec![("verdict".to_string(), o.verdict.word())];
    for (a, v) in &o.aspects {
        props.push((format!("aspect.{}", a.key()), v.text()));
    }
    if let Verdict::Diverges(ids) = &o.verdict {
        props.push(("ledger".into(), ids.join(",")));
        for id in ids {
            props.push((format!("ledger.{id}"), meaning(doc.ledger, id).to_string()));
        }
    }
    if let Some(seed) = o.seed {
        props.push(("replay".into(), format!("compat --scenario rand-{seed}")));
    }
    let diff = o.diff.as_deref().map(strip_ansi).unwrap_or_default();
    let result = match &o.verdict {
        Verdict::Fail(w) => Some(("failure", w.clone(), diff)),
        Verdict::Skipped(w) => Some(("skipped", w.clone(), String::new())),
        _ => None,
    };
    Case {
        name: o.id.clone(),
        secs: o.ms as f64 / 1000.0,
        props,
        result,
        out: o.desc.clone(),
    }
}

fn check_case(c: &Check) -> Case {
    let mut props = vec![("verdict".to_string(), c.status.word())];
    if let Status::Diverges(ids) = &c.status {
        props.push(("ledger".into(), ids.join(",")));
    }
    let result = match &c.status {
        Status::Fail(w) => Some(("failure", w.clone(), c.detail.clone())),
        Status::Skipped(w) => Some(("skipped", w.clone(), String::new())),
        Status::NotRun(w) => Some(("error", w.clone(), String::new())),
        _ => None,
    };
    Case {
        name: c.name.clone(),
        secs: 0.0,
        props,
        result,
        out: c.detail.clone(),
    }
}

fn props_xml(props: &[(String, String)], indent: &str) -> String {
    if props.is_empty() {
        return String::new();
    }
    let mut s = format!("{indent}<properties>\n");
    for (k, v) in props {
        s.push_str(&format!(
            "{indent}  <property name=\"{}\" value=\"{}\"/>\n",
            escape(k),
            escape(v)
        ));
    }
    s.push_str(&format!("{indent}</properties>\n"));
    s
}

/// The counts of a suite: tests, failures, errors, skipped, seconds.
fn counts(cases: &[Case]) -> (usize, usize, usize, usize, f64) {
    let n = |k: &str| {
        cases
            .iter()
            .filter(|c| c.result.as_ref().is_some_and(|r| r.0 == k))
            .count()
    };
    (
        cases.len(),
        n("failure"),
        n("error"),
        n("skipped"),
        cases.iter().map(|c| c.secs).sum(),
    )
}

/// The JUnit XML of `doc`.
pub fn render(doc: &Doc) -> String {
    let mut suites: Vec<(String, Vec<Case>)> = Vec::new();
    let mut add = |suite: String, case: Case| match suites.iter_mut().find(|(n, _)| *n == suite) {
        Some((_, v)) => v.push(case),
        None => suites.push((suite, vec![case])),
    };
    for o in doc.outcomes {
        add(format!("compat.{}", o.kind), scenario_case(doc, o));
    }
    for c in &doc.checks {
        add(format!("compat.{}", c.suite), check_case(c));
    }
    let stamp = super::meta::utc_now().replace(' ', "T");
    let all: Vec<&Case> = suites.iter().flat_map(|(_, v)| v.iter()).collect();
    let total = |k: &str| {
        all.iter()
            .filter(|c| c.result.as_ref().is_some_and(|r| r.0 == k))
            .count()
    };
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\" timestamp=\"{stamp}\">\n",
        escape(&doc.title),
        all.len(),
        total("failure"),
        total("error"),
        total("skipped"),
        doc.seconds
    ));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    for (name, cases) in &suites {
        let (t, f, e, s, secs) = counts(cases);
        x.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{t}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{s}\" time=\"{secs:.3}\" timestamp=\"{stamp}\" hostname=\"{}\">\n",
            escape(name),
            escape(&host)
        ));
        x.push_str(&props_xml(&doc.meta, "    "));
        for c in cases {
            x.push_str(&format!(
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\">\n",
                escape(&c.name),
                escape(name),
                c.secs
            ));
            x.push_str(&props_xml(&c.props, "      "));
            if let Some((kind, msg, body)) = &c.result {
                if body.is_empty() {
                    x.push_str(&format!("      <{kind} message=\"{}\"/>\n", escape(msg)));
                } else {
                    x.push_str(&format!(
                        "      <{kind} message=\"{}\" type=\"{}\">{}</{kind}>\n",
                        escape(msg),
                        if *kind == "failure" {
                            "FAIL"
                        } else {
                            "NOT RUN"
                        },
                        escape(body)
                    ));
                }
            }
            if !c.out.is_empty() {
                x.push_str(&format!(
                    "      <system-out>{}</system-out>\n",
                    escape(&c.out)
                ));
            }
            x.push_str("    </testcase>\n");
        }
        x.push_str("  </testsuite>\n");
    }
    x.push_str("</testsuites>\n");
    x
}
