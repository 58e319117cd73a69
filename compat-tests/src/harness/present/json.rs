//! The parts of `report.json` / `report-split.json` that describe the scenarios, their aspects,
//! the counts and the run: the page's and the JUnit file's numbers are these.

use serde_json::{json, Map, Value};

use super::super::outcome::{Outcome, Verdict};
use super::model::Doc;
use super::summary::{meaning, Summary};

/// The scenario totals of a run: scenarios, PASS, DIVERGES-AS-DOCUMENTED, FAIL (the run's own
/// FAILs included) and SKIPPED.
pub fn totals(sum: &Summary) -> Value {
    json!({
        "scenarios": sum.scenarios,
        "pass": sum.pass,
        "diverges": sum.diverges,
        "fail": sum.fail + sum.run_failures,
        "skipped": sum.skipped,
    })
}

/// One scenario: id, kind, description, verdict word, ledger entries, reason (FAIL, SKIPPED),
/// differing trace sections, seed, time, the verdict of each aspect (`{}` when the traces were
/// not compared) and, with `traces` and unless it passed, both normalised traces.
pub fn scenario(o: &Outcome, traces: bool) -> Value {
    let mut aspects = Map::new();
    for (a, v) in &o.aspects {
        aspects.insert(
            a.key().to_string(),
            json!({"verdict": v.word(), "ledger": v.entries()}),
        );
    }
    let mut j = json!({
        "id": o.id,
        "kind": o.kind,
        "desc": o.desc,
        "verdict": o.verdict.word(),
        "ledger": match &o.verdict { Verdict::Diverges(v) => json!(v), _ => json!([]) },
        "reason": match &o.verdict { Verdict::Fail(w) | Verdict::Skipped(w) => json!(w), _ => Value::Null },
        "differing_sections": o.sections,
        "aspects": aspects,
        "seed": o.seed,
        "ms": o.ms as u64,
    });
    if traces {
        let keep = o.verdict != Verdict::Pass;
        j["legacy_trace"] = if keep {
            json!(o.legacy_trace)
        } else {
            Value::Null
        };
        j["rust_trace"] = if keep {
            json!(o.rust_trace)
        } else {
            Value::Null
        };
    }
    j
}

/// `summary`: the counts of [`Summary`] (scenarios per verdict, each aspect, each suite of
/// checks, the ledger entries seen with their meaning).
pub fn summary(doc: &Doc) -> Value {
    let s = Summary::of(doc);
    json!({
        "scenarios": s.scenarios,
        "pass": s.pass,
        "diverges": s.diverges,
        "fail": s.fail,
        "skipped": s.skipped,
        "run_failures": s.run_failures,
        "aspects": s.aspects.iter().map(|a| json!({
            "aspect": a.aspect.key(),
            "title": a.aspect.title(),
            "compared": a.compared,
            "same": a.same,
            "differs": a.differs,
            "fail": a.fail,
            "by_entry": a.by_entry.iter().map(|(e, n)| json!({"id": e, "scenarios": n})).collect::<Vec<_>>(),
            "sentence": a.sentence(),
        })).collect::<Vec<_>>(),
        "suites": s.suites.iter().map(|c| json!({
            "suite": c.suite, "total": c.total, "ok": c.ok, "diverges": c.diverges,
            "fail": c.fail, "skipped": c.skipped, "not_run": c.not_run,
        })).collect::<Vec<_>>(),
        "entries": s.entries.iter().map(|(e, n)| json!({
            "id": e, "scenarios": n, "title": meaning(doc.ledger, e),
        })).collect::<Vec<_>>(),
    })
}

/// `run`: the metadata, label and value, in order.
pub fn run(doc: &Doc) -> Value {
    Value::Array(
        doc.meta
            .iter()
            .map(|(k, v)| json!({"label": k, "value": v}))
            .collect(),
    )
}

/// `checks`: every check that is not a compared scenario.
pub fn checks(doc: &Doc) -> Value {
    Value::Array(
        doc.checks
            .iter()
            .map(|c| {
                json!({
                    "suite": c.suite,
                    "name": c.name,
                    "verdict": c.status.word(),
                    "reason": c.status.reason(),
                    "detail": c.detail,
                })
            })
            .collect(),
    )
}

/// Adds `summary`, `run` and `checks` to a report object.
pub fn extend(report: &mut Value, doc: &Doc) {
    report["summary"] = summary(doc);
    report["run"] = run(doc);
    report["checks"] = checks(doc);
}
