//! `<stem>.html`: one self-contained page (inline CSS and JavaScript, no network, no external
//! fonts or scripts). It shows the answer first (is the wire identical, and where not, which
//! ledger entries say why), each aspect's counts, the scenarios x aspects matrix in colour with
//! filters (aspect, verdict, ledger entry, kind, id; also read from the URL's hash:
//! `#aspect=wire&verdict=differs&entry=D3&kind=random&open=<id>`), for each scenario its
//! normalised C and Rust traces side by side with the differing lines marked and the ledger's
//! text of each difference, the interop tables, the other checks and the run's metadata.
//!
//! Every number the page shows that `<stem>.json` also has carries `data-n="<key>"` (the keys of
//! [`number_keys`]); the report test reads them back from the page as Chromium rendered it and
//! compares them with the JSON.

use serde_json::{json, Map, Value};

use super::super::aspect::{Aspect, AspectVerdict};
use super::super::outcome::{Outcome, Verdict};
use super::model::{escape, Doc, Status};
use super::sidebyside;
use super::summary::{meaning, verdict_of, AspectCount, Summary};

const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");

/// The class and filter value of an aspect verdict: `same`, `differs`, `FAIL`, `na`.
fn class_of(v: Option<&AspectVerdict>) -> &'static str {
    match v {
        None => "na",
        Some(v) => v.word(),
    }
}

/// The class and filter value of a scenario verdict (the aspects' words; `na` for SKIPPED).
pub fn scenario_class(v: &Verdict) -> &'static str {
    match v {
        Verdict::Pass => "same",
        Verdict::Diverges(_) => "differs",
        Verdict::Fail(_) => "FAIL",
        Verdict::Skipped(_) => "na",
    }
}

/// The numbers the page marks with `data-n`, key and value: every count of [`Summary`] that
/// `<stem>.json`'s `summary` has, under the same names (`scenarios`, `pass`, `diverges`, `fail`,
/// `skipped`, `run_failures`, `aspect.<a>.<same|differs|fail|compared>`,
/// `aspect.<a>.entry.<Dn>`, `suite.<s>.<total|ok|diverges|fail|skipped|not_run>`,
/// `entry.<Dn>`).
pub fn number_keys(s: &Summary) -> Vec<(String, usize)> {
    let mut v = vec![
        ("scenarios".to_string(), s.scenarios),
        ("pass".into(), s.pass),
        ("diverges".into(), s.diverges),
        ("fail".into(), s.fail),
        ("skipped".into(), s.skipped),
        ("run_failures".into(), s.run_failures),
    ];
    for a in &s.aspects {
        let k = a.aspect.key();
        v.push((format!("aspect.{k}.compared"), a.compared));
        v.push((format!("aspect.{k}.same"), a.same));
        v.push((format!("aspect.{k}.differs"), a.differs));
        v.push((format!("aspect.{k}.fail"), a.fail));
        for (e, n) in &a.by_entry {
            v.push((format!("aspect.{k}.entry.{e}"), *n));
        }
    }
    for c in &s.suites {
        for (f, n) in [
            ("total", c.total),
            ("ok", c.ok),
            ("diverges", c.diverges),
            ("fail", c.fail),
            ("skipped", c.skipped),
            ("not_run", c.not_run),
        ] {
            v.push((format!("suite.{}.{f}", c.suite), n));
        }
    }
    for (e, n) in &s.entries {
        v.push((format!("entry.{e}"), *n));
    }
    v
}

fn n(key: &str, value: usize) -> String {
    format!("<b data-n=\"{}\">{value}</b>", escape(key))
}

/// The data the page's script reads: aspect titles, the ledger, each scenario's aspects, reason
/// and side-by-side sections.
fn data(doc: &Doc) -> Value {
    let titles: Map<String, Value> = Aspect::ALL
        .into_iter()
        .map(|a| (a.key().to_string(), json!(a.title())))
        .collect();
    let ledger: Map<String, Value> = doc
        .ledger
        .entries
        .iter()
        .map(|e| {
            (
                e.id.clone(),
                json!({"title": e.title, "aspects": e.aspects, "note": e.note}),
            )
        })
        .collect();
    let mut scenarios = Map::new();
    for o in doc.outcomes.iter().filter(|o| !o.aspects.is_empty()) {
        scenarios.insert(o.id.clone(), scenario_data(o));
    }
    json!({"titles": titles, "ledger": ledger, "scenarios": scenarios})
}

fn scenario_data(o: &Outcome) -> Value {
    let aspects: Vec<Value> = o
        .aspects
        .iter()
        .map(|(a, v)| json!([a.key(), v.word(), v.entries()]))
        .collect();
    let sections: Vec<Value> = sidebyside::build(&o.legacy_trace, &o.rust_trace)
        .into_iter()
        .map(|s| {
            let rows: Vec<Value> = s
                .rows
                .into_iter()
                .map(|r| {
                    let right = if r.tag == '=' {
                        Value::Null
                    } else {
                        json!(r.right)
                    };
                    json!([r.tag.to_string(), r.left, right, r.aspect.key()])
                })
                .collect();
            json!([s.name, rows])
        })
        .collect();
    json!({
        "aspects": aspects,
        "reason": match &o.verdict { Verdict::Fail(w) => json!(w), _ => Value::Null },
        "replay": o.seed.map(|s| format!("compat --scenario rand-{s}")),
        "sections": sections,
    })
}

/// The ledger entries behind an aspect's differences, each with its count of scenarios and a
/// link to the matrix filtered to them: `D1 (70), D3 (13)`.
fn entry_links(doc: &Doc, a: &AspectCount) -> String {
    let k = a.aspect.key();
    a.by_entry
        .iter()
        .map(|(e, c)| {
            format!(
                "<a class=\"entry\" href=\"#aspect={k}&amp;verdict=differs&amp;entry={e}\" title=\"{}\">{e} ({})</a>",
                escape(meaning(doc.ledger, e)),
                n(&format!("aspect.{k}.entry.{e}"), *c)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The ledger's entries (only those seen, with `seen_only`): id, scenarios, meaning (and why
/// an entry cannot be observed), the aspects it may show in.
fn ledger_table(doc: &Doc, s: &Summary, seen_only: bool) -> String {
    let mut h = String::from("<table class=\"ledger\"><tr><th>entry</th><th>scenarios</th><th>meaning</th><th>aspects it may show in</th></tr>\n");
    for e in &doc.ledger.entries {
        let seen = s.entries.iter().find(|(id, _)| *id == e.id).map(|x| x.1);
        if seen_only && seen.is_none() {
            continue;
        }
        let note = if e.observable {
            String::new()
        } else {
            format!(
                "<div class=\"small\">not observable here: {}</div>",
                escape(&e.note)
            )
        };
        // The ledger's own words (markdown shown as text): a reader of the report learns what
        // each entry means without the docs.
        let meaning = if e.legacy.is_empty() {
            escape(&e.title)
        } else {
            format!(
                "<details><summary>{}</summary><div class=\"small\"><b>C original:</b> {}<br><b>Rust:</b> {}<br><b>why safe:</b> {}</div></details>",
                escape(&e.title),
                escape(&e.legacy),
                escape(&e.ours),
                escape(&e.why_safe)
            )
        };
        h.push_str(&format!(
            "<tr><td><a class=\"entry\" href=\"#entry={0}\">{0}</a></td><td>{1}</td><td>{2}{note}</td><td>{3}</td></tr>\n",
            escape(&e.id),
            match seen {
                Some(c) if seen_only => n(&format!("entry.{}", e.id), c),
                Some(c) => c.to_string(),
                None => "0".into(),
            },
            meaning,
            if e.aspects.is_empty() { "all".into() } else { escape(&e.aspects.join(", ")) }
        ));
    }
    h.push_str("</table>\n");
    h
}

/// The page of `doc`.
pub fn render(doc: &Doc) -> String {
    let s = Summary::of(doc);
    let mut h = String::with_capacity(1 << 20);
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str(&format!(
        "<title>{}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n",
        escape(&doc.title)
    ));
    h.push_str(&format!("<h1>{}</h1>\n", escape(&doc.title)));
    // The answer first.
    let wire = &s.aspects[0];
    let bad = s.failed();
    h.push_str(&format!(
        "<div class=\"answer{}\" id=\"answer\"><b>Wire</b> (WRs: opcodes, flags, user_data encoding, immediates, SGEs; the chunk sequence): identical in {} of {} compared scenarios",
        if bad { " bad" } else { "" },
        n("aspect.wire.same", wire.same),
        n("aspect.wire.compared", wire.compared)
    ));
    if !wire.by_entry.is_empty() {
        h.push_str("; where it differs: ");
        h.push_str(&entry_links(doc, wire));
    }
    if wire.fail > 0 {
        h.push_str(&format!("; FAIL in {}", n("aspect.wire.fail", wire.fail)));
    }
    h.push('.');
    if !wire.by_entry.is_empty() {
        h.push_str("<ul class=\"why\">");
        for (e, _) in &wire.by_entry {
            h.push_str(&format!(
                "<li><b>{}</b>: {}</li>",
                escape(e),
                escape(meaning(doc.ledger, e))
            ));
        }
        h.push_str("</ul>");
    }
    h.push_str("</div>\n");
    h.push_str(&format!(
        "<p>{} scenarios: <span class=\"badge pass\">{}</span> PASS <span class=\"badge diverges\">{}</span> DIVERGES-AS-DOCUMENTED <span class=\"badge fail\">{}</span> FAIL <span class=\"badge skipped\">{}</span> SKIPPED",
        n("scenarios", s.scenarios),
        n("pass", s.pass),
        n("diverges", s.diverges),
        n("fail", s.fail),
        n("skipped", s.skipped)
    ));
    h.push_str(&format!(
        "; FAILs of the run itself: {}; {:.1} s.</p>\n",
        n("run_failures", s.run_failures),
        doc.seconds
    ));
    // Aspects.
    h.push_str("<h2>Aspects</h2>\n<table class=\"aspects\"><tr><th>aspect</th><th>compares</th><th>identical</th><th>differs as documented (ledger entry: scenarios)</th><th>FAIL</th></tr>\n");
    for a in &s.aspects {
        let k = a.aspect.key();
        let by = entry_links(doc, a);
        h.push_str(&format!(
            "<tr><td><a href=\"#aspect={k}&amp;verdict=differs\">{}</a></td><td>{}</td><td class=\"same\">{} of {}</td><td class=\"{}\">{} {}</td><td class=\"{}\">{}</td></tr>\n",
            escape(a.aspect.title()),
            escape(a.aspect.about()),
            n(&format!("aspect.{k}.same"), a.same),
            n(&format!("aspect.{k}.compared"), a.compared),
            if a.differs > 0 { "differs" } else { "" },
            n(&format!("aspect.{k}.differs"), a.differs),
            if by.is_empty() { String::new() } else { format!("({by})") },
            if a.fail > 0 { "fail" } else { "" },
            n(&format!("aspect.{k}.fail"), a.fail)
        ));
    }
    h.push_str("</table>\n");
    if !s.suites.is_empty() {
        h.push_str("<table class=\"suites\"><tr><th>checks</th><th>total</th><th>OK</th><th>as documented</th><th>FAIL</th><th>SKIPPED</th><th>NOT RUN</th></tr>\n");
        for c in &s.suites {
            let k = |f: &str| format!("suite.{}.{f}", c.suite);
            h.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td class=\"same\">{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td></tr>\n",
                escape(&c.suite),
                n(&k("total"), c.total),
                n(&k("ok"), c.ok),
                n(&k("diverges"), c.diverges),
                if c.fail > 0 { "fail" } else { "" },
                n(&k("fail"), c.fail),
                n(&k("skipped"), c.skipped),
                n(&k("not_run"), c.not_run)
            ));
        }
        h.push_str("</table>\n");
    }
    // The documented differences this run saw, with their meaning.
    if !s.entries.is_empty() {
        h.push_str("<h2>Documented differences seen (docs/divergences.md)</h2>\n");
        h.push_str(&ledger_table(doc, &s, true));
    }
    // Filters and the matrix.
    h.push_str("<h2>Scenarios x aspects</h2>\n<p class=\"small\">Click a row for its traces side by side. Colours: <span class=\"badge same\">same</span> <span class=\"badge differs\">Dn: differs as documented</span> <span class=\"badge fail\">FAIL</span> <span class=\"badge na\">not compared</span>.</p>\n<form id=\"filters\" onsubmit=\"return false\">\n<label>aspect <select id=\"f-aspect\"><option value=\"\">(scenario verdict)</option>");
    for a in Aspect::ALL {
        h.push_str(&format!(
            "<option value=\"{}\">{}</option>",
            a.key(),
            escape(a.title())
        ));
    }
    h.push_str("</select></label>\n<label>verdict <select id=\"f-verdict\"><option value=\"\">any</option><option value=\"same\">same / PASS</option><option value=\"differs\">differs as documented</option><option value=\"FAIL\">FAIL</option><option value=\"na\">not compared / SKIPPED</option></select></label>\n<label>ledger entry <select id=\"f-entry\"><option value=\"\">any</option>");
    for e in &doc.ledger.entries {
        h.push_str(&format!(
            "<option value=\"{0}\">{0}</option>",
            escape(&e.id)
        ));
    }
    h.push_str(
        "</select></label>\n<label>kind <select id=\"f-kind\"><option value=\"\">any</option>",
    );
    let mut kinds: Vec<&str> = Vec::new();
    for o in doc.outcomes {
        if !kinds.contains(&o.kind) {
            kinds.push(o.kind);
        }
    }
    for k in &kinds {
        h.push_str(&format!("<option value=\"{k}\">{k}</option>"));
    }
    h.push_str(&format!(
        "</select></label>\n<label>id <input id=\"f-text\" size=\"14\"></label>\nshowing <b id=\"shown\">{}</b> of <b>{}</b> scenarios\n</form>\n",
        doc.outcomes.len(),
        doc.outcomes.len()
    ));
    h.push_str("<table id=\"matrix\"><thead><tr><th>scenario</th><th>kind</th><th>verdict</th>");
    for a in Aspect::ALL {
        h.push_str(&format!("<th>{}</th>", escape(a.title())));
    }
    h.push_str("<th>description</th></tr></thead>\n<tbody>\n");
    for o in doc.outcomes {
        let entries = match &o.verdict {
            Verdict::Diverges(ids) => ids.join(" "),
            _ => String::new(),
        };
        h.push_str(&format!(
            "<tr class=\"sc\" id=\"s-{}\" data-id=\"{}\" data-kind=\"{}\" data-v=\"{}\" data-e=\"{}\"",
            escape(&o.id),
            escape(&o.id),
            o.kind,
            scenario_class(&o.verdict),
            escape(&entries)
        ));
        for a in Aspect::ALL {
            let v = verdict_of(o, a);
            h.push_str(&format!(
                " data-a-{}=\"{}\" data-x-{}=\"{}\"",
                a.key(),
                class_of(v),
                a.key(),
                v.map(|v| v.entries().join(" ")).unwrap_or_default()
            ));
        }
        let reason = match &o.verdict {
            Verdict::Fail(w) | Verdict::Skipped(w) => format!(" title=\"{}\"", escape(w)),
            _ => String::new(),
        };
        h.push_str(&format!(
            "><td class=\"mono\">{}</td><td>{}</td><td class=\"{}\"{reason}>{}</td>",
            escape(&o.id),
            o.kind,
            scenario_class(&o.verdict),
            escape(&o.verdict.word())
        ));
        for a in Aspect::ALL {
            let v = verdict_of(o, a);
            let (text, title) = match v {
                None => ("-".to_string(), "not compared".to_string()),
                Some(AspectVerdict::Same) => ("same".into(), "identical".into()),
                Some(AspectVerdict::Differs(ids)) => (
                    ids.join(" "),
                    ids.iter()
                        .map(|i| format!("{i}: {}", meaning(doc.ledger, i)))
                        .collect::<Vec<_>>()
                        .join("\n"),
                ),
                Some(AspectVerdict::Fail) => ("FAIL".into(), "undocumented difference".into()),
            };
            h.push_str(&format!(
                "<td class=\"a {}\" title=\"{}\">{}</td>",
                class_of(v),
                escape(&title),
                escape(&text)
            ));
        }
        h.push_str(&format!(
            "<td class=\"desc\" title=\"{0}\">{0}</td></tr>\n",
            escape(&o.desc)
        ));
    }
    h.push_str("</tbody></table>\n");
    // Interop and the other checks.
    for t in &doc.tables {
        h.push_str(&format!(
            "<h2>{}</h2>\n<table class=\"interop\"><tr>",
            escape(&t.title)
        ));
        for c in &t.head {
            h.push_str(&format!("<th>{}</th>", escape(c)));
        }
        h.push_str("</tr>\n");
        for r in &t.rows {
            h.push_str("<tr>");
            for c in r {
                h.push_str(&format!("<td class=\"{}\">{}</td>", escape(c), escape(c)));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
    }
    let others: Vec<_> = doc
        .checks
        .iter()
        .filter(|c| !c.suite.starts_with("interop") || c.status != Status::Ok)
        .collect();
    if !others.is_empty() {
        h.push_str("<h2>Other checks</h2>\n<table class=\"checks\"><tr><th>suite</th><th>name</th><th>result</th><th>detail</th></tr>\n");
        for c in others {
            let cls = match c.status {
                Status::Ok => "same",
                Status::Diverges(_) => "differs",
                Status::Fail(_) => "fail",
                _ => "na",
            };
            let detail = match c.status.reason() {
                Some(r) if !c.detail.is_empty() && r != c.detail => format!("{r}; {}", c.detail),
                Some(r) => r.to_string(),
                None => c.detail.clone(),
            };
            h.push_str(&format!(
                "<tr><td>{}</td><td class=\"mono\">{}</td><td class=\"{cls}\">{}</td><td>{}</td></tr>\n",
                escape(c.suite),
                escape(&c.name),
                escape(&c.status.word()),
                escape(&detail)
            ));
        }
        h.push_str("</table>\n");
    }
    h.push_str("<details><summary>The whole ledger</summary>\n");
    h.push_str(&ledger_table(doc, &s, false));
    h.push_str("</details>\n");
    h.push_str("<h2>Run</h2>\n<table class=\"meta\">\n");
    for (k, v) in &doc.meta {
        h.push_str(&format!(
            "<tr><td>{}</td><td>{}</td></tr>\n",
            escape(k),
            escape(v)
        ));
    }
    h.push_str("</table>\n");
    // The script's data: `</` never appears inside the script element.
    let data = serde_json::to_string(&data(doc))
        .unwrap_or_else(|_| "{}".into())
        .replace("</", "<\\/");
    h.push_str(&format!(
        "<script type=\"application/json\" id=\"data\">{data}</script>\n<script>\n{JS}</script>\n</body></html>\n"
    ));
    h
}
