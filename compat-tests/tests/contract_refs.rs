//! The 1.0 contract (`docs/contract.md`) is cited by section all over the code and docs ("§4.1",
//! "§10 #7"). Every such citation must name a section, subsection or defect the contract has, so
//! that renumbering the contract, or citing a section that does not exist, fails here.

use compat_tests::repo;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Sections ("4"), subsections ("4.1") and defects ("10 #7") of the contract.
fn contract_anchors() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo().join("docs/contract.md")).expect("docs/contract.md");
    let mut anchors = BTreeSet::new();
    let mut section = String::new();
    for line in text.lines() {
        let heading = line
            .strip_prefix("### ")
            .or_else(|| line.strip_prefix("## "));
        if let Some(h) = heading {
            let num: String = h
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let num = num.trim_end_matches('.').to_string();
            if !num.is_empty() {
                if !num.contains('.') {
                    section = num.clone();
                }
                anchors.insert(num);
            }
        } else if section == "10" {
            // Defect rows: "| 7 | ... |".
            if let Some(rest) = line.strip_prefix("| ") {
                let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
                if !n.is_empty() {
                    anchors.insert(format!("10 #{n}"));
                }
            }
        }
    }
    anchors
}

/// Every citation in `text`: "§N", "§N.M", "§10 #K" (the first number of a "#K-#L" range).
fn citations(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices('§') {
        let rest = text[i + '§'.len_utf8()..].trim_start_matches(' ');
        let num: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let num = num.trim_end_matches('.').to_string();
        if num.is_empty() {
            continue;
        }
        if num == "10" {
            let after = rest[num.len()..].trim_start_matches(' ');
            if let Some(d) = after.strip_prefix('#') {
                let k: String = d.chars().take_while(char::is_ascii_digit).collect();
                if !k.is_empty() {
                    out.push(format!("10 #{k}"));
                    continue;
                }
            }
        }
        out.push(num);
    }
    out
}

fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if p.is_dir() {
            // Build output, vendored crates and the fuzz corpus hold no citations of ours.
            if !matches!(
                name.as_str(),
                "target" | "vendor" | "seeds" | "corpus" | "build"
            ) {
                text_files(&p, out);
            }
        } else {
            out.push(p);
        }
    }
}

#[test]
fn every_contract_citation_names_an_existing_section() {
    let anchors = contract_anchors();
    for must in [
        "1", "1.2", "1.11", "4.3", "6.4", "10", "10 #1", "10 #27", "11",
    ] {
        assert!(
            anchors.contains(must),
            "docs/contract.md lost §{must}; found {anchors:?}"
        );
    }
    let root = repo();
    let mut files = vec![root.join("README.md")];
    for d in [
        "docs",
        "src",
        "tests",
        "compat-tests",
        "legacy-c",
        "fuzz",
        "bench",
    ] {
        text_files(&root.join(d), &mut files);
    }
    let mut checked = 0;
    let mut missing = Vec::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue; // not UTF-8 text
        };
        for c in citations(&text) {
            checked += 1;
            if !anchors.contains(&c) {
                missing.push(format!(
                    "{}: §{c}",
                    f.strip_prefix(&root).unwrap_or(f).display()
                ));
            }
        }
    }
    println!("{checked} citations of docs/contract.md checked");
    assert!(
        checked > 100,
        "only {checked} citations found: is the walk broken?"
    );
    assert!(
        missing.is_empty(),
        "citations of sections docs/contract.md does not have:\n{}",
        missing.join("\n")
    );
}

#[test]
fn citation_parser_reads_sections_subsections_and_defects() {
    assert_eq!(
        citations("see §4.1, §10 #7 and §10 #8-#15; §1–§8; § 2.3."),
        ["4.1", "10 #7", "10 #8", "1", "8", "2.3"]
    );
}
