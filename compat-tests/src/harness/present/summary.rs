//! The counts every rendering shows: scenarios per verdict, each aspect's identical / documented /
//! FAIL counts with the ledger entries behind the differences, the other checks per suite; and
//! the migration summary a run prints at its end.

use std::path::Path;

use super::super::aspect::{Aspect, AspectVerdict};
use super::super::ledger::Ledger;
use super::super::outcome::{Outcome, Verdict};
use super::model::{Doc, Status, RUN};

/// PASS, DIVERGES-AS-DOCUMENTED and FAIL counts of `outcomes`.
pub fn counts(outcomes: &[Outcome]) -> (usize, usize, usize) {
    let n = |f: fn(&Verdict) -> bool| outcomes.iter().filter(|o| f(&o.verdict)).count();
    (
        n(|v| *v == Verdict::Pass),
        n(|v| matches!(v, Verdict::Diverges(_))),
        n(|v| matches!(v, Verdict::Fail(_))),
    )
}

/// One aspect over the compared scenarios.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AspectCount {
    pub aspect: Aspect,
    /// Scenarios whose traces were compared.
    pub compared: usize,
    pub same: usize,
    pub differs: usize,
    pub fail: usize,
    /// Ledger entry -> scenarios whose difference in this aspect it explains, in ledger order.
    pub by_entry: Vec<(String, usize)>,
}

impl AspectCount {
    /// `identical in 170 of 260; differs as documented: D1 (70), D3 (13); FAIL in 1`.
    pub fn sentence(&self) -> String {
        let mut s = format!("identical in {} of {}", self.same, self.compared);
        if !self.by_entry.is_empty() {
            let v: Vec<String> = self
                .by_entry
                .iter()
                .map(|(e, n)| format!("{e} ({n})"))
                .collect();
            s.push_str(&format!("; differs as documented: {}", v.join(", ")));
        }
        if self.fail > 0 {
            s.push_str(&format!("; FAIL in {}", self.fail));
        }
        s
    }
}

/// One suite of checks (interop cells, peer death, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SuiteCount {
    pub suite: String,
    pub total: usize,
    pub ok: usize,
    pub diverges: usize,
    pub fail: usize,
    pub skipped: usize,
    pub not_run: usize,
}

/// The counts of a [`Doc`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub scenarios: usize,
    pub pass: usize,
    pub diverges: usize,
    pub fail: usize,
    pub skipped: usize,
    /// FAILs of the run itself (suite [`RUN`]): counted with the scenarios' in the totals.
    pub run_failures: usize,
    pub aspects: Vec<AspectCount>,
    pub suites: Vec<SuiteCount>,
    /// Ledger entry -> scenarios it explains a difference of (any aspect), in ledger order.
    pub entries: Vec<(String, usize)>,
}

impl Summary {
    /// The counts of `doc`.
    pub fn of(doc: &Doc) -> Summary {
        let (pass, diverges, fail) = counts(doc.outcomes);
        let skipped = doc
            .outcomes
            .iter()
            .filter(|o| matches!(o.verdict, Verdict::Skipped(_)))
            .count();
        let order = doc.ledger.ids();
        let rank = |e: &String| order.iter().position(|o| o == e).unwrap_or(usize::MAX);
        let aspects = Aspect::ALL
            .into_iter()
            .map(|a| {
                let mut c = AspectCount {
                    aspect: a,
                    compared: 0,
                    same: 0,
                    differs: 0,
                    fail: 0,
                    by_entry: Vec::new(),
                };
                for v in doc.outcomes.iter().filter_map(|o| verdict_of(o, a)) {
                    c.compared += 1;
                    match v {
                        AspectVerdict::Same => c.same += 1,
                        AspectVerdict::Fail => c.fail += 1,
                        AspectVerdict::Differs(ids) => {
                            c.differs += 1;
                            for id in ids {
                                bump(&mut c.by_entry, id);
                            }
                        }
                    }
                }
                c.by_entry.sort_by_key(|(e, _)| rank(e));
                c
            })
            .collect();
        let mut entries = Vec::new();
        for o in doc.outcomes {
            if let Verdict::Diverges(ids) = &o.verdict {
                for id in ids {
                    bump(&mut entries, id);
                }
            }
        }
        for c in &doc.checks {
            if let Status::Diverges(ids) = &c.status {
                for id in ids {
                    bump(&mut entries, id);
                }
            }
        }
        entries.sort_by_key(|(e, _)| rank(e));
        let mut suites: Vec<SuiteCount> = Vec::new();
        for c in &doc.checks {
            let i = match suites.iter().position(|s| s.suite == c.suite) {
                Some(i) => i,
                None => {
                    suites.push(SuiteCount {
                        suite: c.suite.to_string(),
                        ..Default::default()
                    });
                    suites.len() - 1
                }
            };
            let s = &mut suites[i];
            s.total += 1;
            match c.status {
                Status::Ok => s.ok += 1,
                Status::Diverges(_) => s.diverges += 1,
                Status::Fail(_) => s.fail += 1,
                Status::Skipped(_) => s.skipped += 1,
                Status::NotRun(_) => s.not_run += 1,
            }
        }
        let run_failures = suites
            .iter()
            .filter(|s| s.suite == RUN)
            .map(|s| s.fail)
            .sum();
        Summary {
            scenarios: doc.outcomes.len(),
            pass,
            diverges,
            fail,
            skipped,
            run_failures,
            aspects,
            suites,
            entries,
        }
    }

    /// The suite `name`'s counts (zero when it has no check).
    pub fn suite(&self, name: &str) -> SuiteCount {
        self.suites
            .iter()
            .find(|s| s.suite == name)
            .cloned()
            .unwrap_or_else(|| SuiteCount {
                suite: name.to_string(),
                ..Default::default()
            })
    }

    /// Whether anything FAILed: a scenario, a check, the run.
    pub fn failed(&self) -> bool {
        self.fail > 0 || self.suites.iter().any(|s| s.fail > 0)
    }
}

fn bump(v: &mut Vec<(String, usize)>, id: &str) {
    match v.iter_mut().find(|(e, _)| e == id) {
        Some((_, n)) => *n += 1,
        None => v.push((id.to_string(), 1)),
    }
}

/// The verdict of aspect `a` of `o` (None: the traces were not compared).
pub fn verdict_of(o: &Outcome, a: Aspect) -> Option<&AspectVerdict> {
    o.aspects.iter().find(|(x, _)| *x == a).map(|(_, v)| v)
}

/// The one-line meaning of ledger entry `id` (its title).
pub fn meaning<'a>(ledger: &'a Ledger, id: &str) -> &'a str {
    ledger
        .entries
        .iter()
        .find(|e| e.id == id)
        .map(|e| e.title.as_str())
        .unwrap_or("(not in the ledger)")
}

/// The migration summary printed at the end of a run: the verdicts, each aspect's sentence,
/// the other checks, the documented differences seen with their meaning, the FAILs, and where
/// the reports are (`dir`).
pub fn migration(doc: &Doc, dir: &Path) -> String {
    let s = Summary::of(doc);
    let mut t = format!(
        "\nMigration summary (C reference -> Rust): {} scenarios: {} PASS, {} DIVERGES-AS-DOCUMENTED, {} FAIL, {} SKIPPED\n",
        s.scenarios, s.pass, s.diverges, s.fail, s.skipped
    );
    for a in &s.aspects {
        t.push_str(&format!("  {:<20}{}\n", a.aspect.title(), a.sentence()));
    }
    for c in s.suites.iter().filter(|c| c.suite != RUN) {
        let mut parts = vec![format!("{} of {} OK", c.ok, c.total)];
        for (n, w) in [
            (c.diverges, "as documented"),
            (c.fail, "FAIL"),
            (c.skipped, "SKIPPED"),
            (c.not_run, "NOT RUN"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {w}"));
            }
        }
        t.push_str(&format!("  {:<20}{}\n", c.suite, parts.join(", ")));
    }
    if !s.entries.is_empty() {
        t.push_str("Documented differences seen (docs/divergences.md):\n");
        for (id, n) in &s.entries {
            t.push_str(&format!(
                "  {id:<4} {n:>4} x  {}\n",
                meaning(doc.ledger, id)
            ));
        }
    }
    let fails: Vec<String> = doc
        .outcomes
        .iter()
        .filter(|o| matches!(o.verdict, Verdict::Fail(_)))
        .map(|o| o.id.clone())
        .chain(
            doc.checks
                .iter()
                .filter(|c| matches!(c.status, Status::Fail(_)))
                .map(|c| format!("{} {}", c.suite, c.name)),
        )
        .collect();
    if !fails.is_empty() {
        t.push_str(&format!("FAIL: {}\n", fails.join(", ")));
    }
    t.push_str(&format!(
        "Reports: {} (open in a browser), {}.md, {}.json, {}.xml (JUnit)\n",
        doc.path(dir, "html").display(),
        doc.stem,
        doc.stem,
        doc.stem
    ));
    t
}

#[cfg(test)]
mod tests {
    use super::super::model::Check;
    use super::*;

    fn outcome(id: &str, verdict: Verdict, aspects: &[(Aspect, AspectVerdict)]) -> Outcome {
        let mut o = Outcome::new(id, "catalogue", "d", verdict);
        o.aspects = aspects.to_vec();
        o
    }

    #[test]
    fn counts_per_aspect_and_entry() {
        let ledger = Ledger::parse(
            r#"{"entries":[{"id":"D1","title":"one chunk","scenarios":["a"]},{"id":"D13","title":"logs","scenarios":["*"],"aspects":["log"]}]}"#,
            Path::new("x"),
        )
        .unwrap();
        let same = |a| (a, AspectVerdict::Same);
        let outcomes = vec![
            outcome(
                "a",
                Verdict::Diverges(vec!["D1".into(), "D13".into()]),
                &[
                    (Aspect::Wire, AspectVerdict::Differs(vec!["D1".into()])),
                    (
                        Aspect::Log,
                        AspectVerdict::Differs(vec!["D1".into(), "D13".into()]),
                    ),
                ],
            ),
            outcome(
                "b",
                Verdict::Diverges(vec!["D13".into()]),
                &[
                    same(Aspect::Wire),
                    (Aspect::Log, AspectVerdict::Differs(vec!["D13".into()])),
                ],
            ),
            outcome(
                "c",
                Verdict::Fail("x".into()),
                &[(Aspect::Wire, AspectVerdict::Fail)],
            ),
            outcome("d", Verdict::Skipped("y".into()), &[]),
        ];
        let doc = Doc {
            title: "t".into(),
            stem: "report",
            meta: vec![],
            outcomes: &outcomes,
            ledger: &ledger,
            checks: vec![Check {
                suite: RUN,
                name: "ledger".into(),
                status: Status::Fail("stale".into()),
                detail: String::new(),
            }],
            tables: vec![],
            seconds: 1.0,
        };
        let s = Summary::of(&doc);
        assert_eq!(
            (s.scenarios, s.pass, s.diverges, s.fail, s.skipped),
            (4, 0, 2, 1, 1)
        );
        assert_eq!(s.run_failures, 1);
        assert!(s.failed());
        let wire = &s.aspects[0];
        assert_eq!(
            (wire.compared, wire.same, wire.differs, wire.fail),
            (3, 1, 1, 1)
        );
        assert_eq!(
            wire.sentence(),
            "identical in 1 of 3; differs as documented: D1 (1); FAIL in 1"
        );
        let log = s.aspects.iter().find(|a| a.aspect == Aspect::Log).unwrap();
        assert_eq!(log.by_entry, vec![("D1".into(), 1), ("D13".into(), 2)]);
        assert_eq!(s.entries, vec![("D1".into(), 1), ("D13".into(), 2)]);
        let m = migration(&doc, Path::new("/out"));
        assert!(m.contains("wire                identical in 1 of 3"), "{m}");
        assert!(m.contains("D13     2 x  logs"), "{m}");
        assert!(m.contains("FAIL: c, run ledger"), "{m}");
    }
}
