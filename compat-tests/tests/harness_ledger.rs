//! The divergence ledger twin (`compat-tests/ledger.json`) and `docs/divergences.md` name the
//! same entries, and the twin only names scenarios that exist.

use std::collections::BTreeSet;

use compat_tests::harness::{aspect, crunner, ledger, scenario};

#[test]
fn ledger_twin_matches_divergences_md() {
    let md = std::fs::read_to_string(ledger::divergences_md_path()).expect("docs/divergences.md");
    let doc: BTreeSet<String> = ledger::doc_ids(&md).into_iter().collect();
    assert!(!doc.is_empty(), "no Dn rows found in docs/divergences.md");
    let l = ledger::Ledger::load(&ledger::default_path()).expect("ledger.json");
    let twin: BTreeSet<String> = l.ids().into_iter().collect();
    assert_eq!(twin.len(), l.entries.len(), "duplicate ids in ledger.json");
    let only_doc: Vec<_> = doc.difference(&twin).collect();
    let only_twin: Vec<_> = twin.difference(&doc).collect();
    assert!(
        only_doc.is_empty() && only_twin.is_empty(),
        "docs/divergences.md only: {only_doc:?}; ledger.json only: {only_twin:?}"
    );
}

#[test]
fn ledger_names_existing_scenarios_and_explains_observable_entries() {
    let l = ledger::Ledger::load(&ledger::default_path()).expect("ledger.json");
    let mut ids: BTreeSet<String> = scenario::catalogue().into_iter().map(|s| s.id).collect();
    ids.extend(crunner::SCENARIOS.iter().map(|(id, _)| id.to_string()));
    for e in &l.entries {
        for s in &e.scenarios {
            assert!(
                s == "*" || ids.contains(s),
                "{}: unknown scenario {s}",
                e.id
            );
        }
        assert!(!e.title.is_empty(), "{}: no title", e.id);
        for a in &e.aspects {
            assert!(
                aspect::Aspect::from_key(a).is_some(),
                "{}: unknown aspect {a}",
                e.id
            );
        }
        if e.observable {
            assert!(
                !e.scenarios.is_empty(),
                "{}: observable but lists no scenario",
                e.id
            );
        } else {
            assert!(!e.note.is_empty(), "{}: unobservable without a note", e.id);
        }
    }
}

#[test]
fn catalogue_ids_are_unique_and_described() {
    let cat = scenario::catalogue();
    let ids: BTreeSet<&str> = cat.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids.len(), cat.len(), "duplicate scenario ids");
    for s in &cat {
        assert!(!s.desc.is_empty() && !s.desc.contains('\n'), "{}", s.id);
    }
    for required in [
        "len-1",
        "len-2m",
        "len-2m+1",
        "len-4m",
        "len-6m+5",
        "len-14m",
        "len-14m+1",
        "key-0",
        "key-2^20-1",
        "key-2^20",
        "key-2^40-1",
        "key-2^40",
        "recv-reverse",
        "dup-recv-cr",
        "unknown-cr",
        "early-send-imm",
        "post-fail-first",
        "post-fail-mid-write",
        "post-fail-send-imm",
        "error-cr",
        "cb-fail-chunk0",
        "wait-timeout-0",
        "wait-timeout-short",
        "cancel-before",
        "cancel-after",
        "destroy-inflight",
        "init-twice",
        "init-workers-0",
        "recv-capacity-0",
        "recv-capacity-1",
        "recv-capacity-64",
        "recv-jetty",
        "recv-jfr-only",
        "concurrent-64x4",
        "log-levels",
        "event-mode",
    ] {
        assert!(ids.contains(required), "catalogue lacks {required}");
    }
}
