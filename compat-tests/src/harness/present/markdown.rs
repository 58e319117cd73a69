//! `<stem>.md`: the run's summary and the scenarios x aspects matrix. The traces are in
//! `<stem>.html` (side by side) and `<stem>.json`.

use super::super::aspect::{Aspect, AspectVerdict};
use super::super::outcome::Verdict;
use super::model::{Doc, Status};
use super::summary::{meaning, verdict_of, Summary};

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The text of one aspect's cell: `=`, the ledger entries, `FAIL`, or `-` (not compared).
pub fn aspect_cell(v: Option<&AspectVerdict>) -> String {
    match v {
        None => "-".into(),
        Some(AspectVerdict::Same) => "=".into(),
        Some(AspectVerdict::Differs(ids)) => ids.join(" "),
        Some(AspectVerdict::Fail) => "**FAIL**".into(),
    }
}

/// The Markdown of `doc`.
pub fn render(doc: &Doc) -> String {
    let s = Summary::of(doc);
    let mut md = format!("# {}\n\n", doc.title);
    let wire = &s.aspects[0];
    md.push_str(&format!(
        "**Wire** (the WRs each library posts: opcodes, flags, user_data encoding, immediates, \
         SGEs, i.e. the chunk sequence): {}.\n\n",
        wire.sentence()
    ));
    for (e, _) in &wire.by_entry {
        md.push_str(&format!("* {e}: {}\n", cell(meaning(doc.ledger, e))));
    }
    if !wire.by_entry.is_empty() {
        md.push('\n');
    }
    md.push_str(&format!(
        "Scenarios: {} — {} PASS, {} DIVERGES-AS-DOCUMENTED, {} FAIL, {} SKIPPED{}. \
         Side-by-side traces: `{}.html`; everything machine-readable: `{}.json`, \
         JUnit: `{}.xml`.\n\n",
        s.scenarios,
        s.pass,
        s.diverges,
        s.fail,
        s.skipped,
        if s.run_failures > 0 {
            format!("; {} FAIL of the run itself", s.run_failures)
        } else {
            String::new()
        },
        doc.stem,
        doc.stem,
        doc.stem
    ));
    md.push_str("## Aspects\n\n| aspect | compares | identical | differs as documented | FAIL |\n|---|---|---|---|---|\n");
    for a in &s.aspects {
        let by: Vec<String> = a
            .by_entry
            .iter()
            .map(|(e, n)| format!("{e} ({n})"))
            .collect();
        md.push_str(&format!(
            "| {} | {} | {} of {} | {} | {} |\n",
            a.aspect.title(),
            cell(a.aspect.about()),
            a.same,
            a.compared,
            if by.is_empty() {
                "-".into()
            } else {
                by.join(", ")
            },
            a.fail
        ));
    }
    if !s.suites.is_empty() {
        md.push_str("\n| checks | total | OK | as documented | FAIL | SKIPPED | NOT RUN |\n|---|---|---|---|---|---|---|\n");
        for c in &s.suites {
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                c.suite, c.total, c.ok, c.diverges, c.fail, c.skipped, c.not_run
            ));
        }
    }
    if !s.entries.is_empty() {
        md.push_str("\n## Documented differences seen (docs/divergences.md)\n\n| entry | scenarios | meaning | aspects it may show in |\n|---|---|---|---|\n");
        for (id, n) in &s.entries {
            let aspects = doc
                .ledger
                .entries
                .iter()
                .find(|e| &e.id == id)
                .map(|e| {
                    if e.aspects.is_empty() {
                        "all".to_string()
                    } else {
                        e.aspects.join(", ")
                    }
                })
                .unwrap_or_default();
            md.push_str(&format!(
                "| {id} | {n} | {} | {aspects} |\n",
                cell(meaning(doc.ledger, id))
            ));
        }
    }
    md.push_str("\n## Run\n\n| | |\n|---|---|\n");
    for (k, v) in &doc.meta {
        md.push_str(&format!("| {} | `{}` |\n", cell(k), cell(v)));
    }
    md.push_str(&format!("| run time | {:.1} s |\n", doc.seconds));
    md.push_str("\n## Scenarios x aspects\n\n`=` identical, `Dn` differs as documented by ledger entry Dn, `FAIL` undocumented difference, `-` not compared.\n\n| scenario | kind | verdict |");
    for a in Aspect::ALL {
        md.push_str(&format!(" {} |", a.title()));
    }
    md.push_str(" description |\n|---|---|---|");
    md.push_str(&"---|".repeat(Aspect::ALL.len() + 1));
    md.push('\n');
    for o in doc.outcomes {
        md.push_str(&format!(
            "| `{}` | {} | {} |",
            o.id,
            o.kind,
            o.verdict.word()
        ));
        for a in Aspect::ALL {
            md.push_str(&format!(" {} |", aspect_cell(verdict_of(o, a))));
        }
        md.push_str(&format!(" {} |\n", cell(&o.desc)));
    }
    for t in &doc.tables {
        md.push_str(&format!("\n## {}\n\n|", t.title));
        for h in &t.head {
            md.push_str(&format!(" {} |", cell(h)));
        }
        md.push_str("\n|");
        md.push_str(&"---|".repeat(t.head.len()));
        md.push('\n');
        for r in &t.rows {
            md.push('|');
            for c in r {
                md.push_str(&format!(" {} |", cell(c)));
            }
            md.push('\n');
        }
    }
    let attention: Vec<String> = doc
        .outcomes
        .iter()
        .filter_map(|o| match &o.verdict {
            Verdict::Fail(w) | Verdict::Skipped(w) => Some(format!(
                "* `{}` {}: {}{}",
                o.id,
                o.verdict.word(),
                w,
                o.seed
                    .map(|x| format!(" (replay: `compat --scenario rand-{x}`)"))
                    .unwrap_or_default()
            )),
            _ => None,
        })
        .chain(doc.checks.iter().filter_map(|c| match &c.status {
            Status::Fail(w) | Status::Skipped(w) | Status::NotRun(w) => Some(format!(
                "* {} `{}` {}: {w}",
                c.suite,
                c.name,
                c.status.word()
            )),
            _ => None,
        }))
        .collect();
    if !attention.is_empty() {
        md.push_str("\n## FAIL, SKIPPED, NOT RUN\n\n");
        md.push_str(&attention.join("\n"));
        md.push('\n');
    }
    md
}
