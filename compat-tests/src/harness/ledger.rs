//! The divergence ledger (`compat-tests/ledger.json`): the one source of every intentional
//! difference from the C original. `docs/divergences.md` is its rendering ([`Ledger::markdown`],
//! written by `make ledger`; a test fails when the committed page differs).
//!
//! Each entry: `id` (`Dn`), `title`, the page's cells `legacy`, `ours`, `why_safe`, `pinned_by`
//! (markdown, one line each), `scenarios` (catalogue and C-runner scenario ids where the
//! difference shows), `random` (feature names: the entry applies to a random scenario that has
//! any of them), `received` (evidence names of [`super::received`]: over a provider the harness
//! does not control, the entry applies to a scenario whose traces give one of them), `aspects`
//! (the aspects of the comparison, [`super::aspect::Aspect`] keys, in which the difference may
//! show; absent = all) and, for entries the harness cannot observe, `observable: false` with a
//! `note` saying why. A catalogue scenario whose traces differ must be listed by at least one
//! entry; a listed scenario whose traces no longer differ is a stale entry (FAIL).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One ledger entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: String,
    pub title: String,
    pub scenarios: Vec<String>,
    pub random: Vec<String>,
    /// Evidence names ([`super::received::NAMES`]) that make the entry apply in hardware mode.
    pub received: Vec<String>,
    /// Aspects this entry may explain (`wire`, `completion`, `log`, ...; empty = all).
    pub aspects: Vec<String>,
    pub observable: bool,
    pub note: String,
    /// What the C original does (markdown, one table cell).
    pub legacy: String,
    /// What the Rust library does instead.
    pub ours: String,
    /// Why a mixed deployment (C on one side, Rust on the other) stays safe.
    pub why_safe: String,
    /// The tests that pin the difference.
    pub pinned_by: String,
}

/// The text of `docs/divergences.md` around the table (`page` in the ledger file).
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub title: String,
    /// Markdown lines between the title and the table.
    pub intro: Vec<String>,
    /// Markdown lines after the table.
    pub outro: Vec<String>,
}

/// The ledger.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    pub entries: Vec<Entry>,
    pub page: Page,
    pub path: PathBuf,
}

/// The string field `k` of `v` (empty when absent).
fn field(v: &Value, k: &str) -> String {
    v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string()
}

fn strs(v: &Value, k: &str) -> Vec<String> {
    v.get(k)
        .and_then(|x| x.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `<repo>/compat-tests/ledger.json` (compile-time location), or `$COMPAT_LEDGER`.
pub fn default_path() -> PathBuf {
    match std::env::var_os("COMPAT_LEDGER") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("ledger.json"),
    }
}

impl Ledger {
    /// Parses the ledger text.
    pub fn parse(text: &str, path: &Path) -> Result<Ledger, String> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| format!("{}: {e}", path.display()))?;
        let arr = v
            .get("entries")
            .and_then(|x| x.as_array())
            .ok_or_else(|| format!("{}: no \"entries\" array", path.display()))?;
        let mut entries = Vec::new();
        for e in arr {
            let id = e
                .get("id")
                .and_then(|x| x.as_str())
                .ok_or_else(|| format!("{}: entry without id", path.display()))?
                .to_string();
            entries.push(Entry {
                title: field(e, "title"),
                scenarios: strs(e, "scenarios"),
                random: strs(e, "random"),
                received: strs(e, "received"),
                aspects: strs(e, "aspects"),
                observable: e
                    .get("observable")
                    .and_then(|x| x.as_bool())
                    .unwrap_or(true),
                note: field(e, "note"),
                legacy: field(e, "legacy"),
                ours: field(e, "ours"),
                why_safe: field(e, "why_safe"),
                pinned_by: field(e, "pinned_by"),
                id,
            });
        }
        let page = v.get("page").unwrap_or(&Value::Null);
        Ok(Ledger {
            entries,
            page: Page {
                title: field(page, "title"),
                intro: strs(page, "intro"),
                outro: strs(page, "outro"),
            },
            path: path.to_path_buf(),
        })
    }

    /// Loads the ledger from `path`.
    pub fn load(path: &Path) -> Result<Ledger, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text, path)
    }

    /// Entries that apply to a scenario: listed by id (or `"*"`), or, for a random scenario
    /// (`features` given), whose random predicate matches.
    pub fn applicable(&self, id: &str, features: Option<&BTreeSet<String>>) -> Vec<&Entry> {
        self.entries
            .iter()
            .filter(|e| {
                e.scenarios.iter().any(|s| s == id || s == "*")
                    || features.is_some_and(|f| e.random.iter().any(|r| f.contains(r)))
            })
            .collect()
    }

    /// The ledger for scenario `id` whose libraries were handed CRs giving the evidence names
    /// `received` ([`super::received::evidence`], hardware mode): each entry whose `received`
    /// predicate names one of them applies to `id` as if it listed it.
    pub fn with_received(&self, id: &str, received: &BTreeSet<String>) -> Ledger {
        let mut l = self.clone();
        for e in &mut l.entries {
            if e.received.iter().any(|r| received.contains(r))
                && !e.scenarios.iter().any(|s| s == id)
            {
                e.scenarios.push(id.to_string());
            }
        }
        l
    }

    /// Judges differing aspects: `Ok(entry ids)` when every aspect is explained by an
    /// applicable entry, `Err(unexplained aspects)` otherwise.
    pub fn explain(
        &self,
        id: &str,
        features: Option<&BTreeSet<String>>,
        differing: &[String],
    ) -> Result<Vec<String>, Vec<String>> {
        let app = self.applicable(id, features);
        let mut used: Vec<String> = Vec::new();
        let mut missing = Vec::new();
        for d in differing {
            let cover = covering(&app, d);
            if cover.is_empty() {
                missing.push(d.clone());
            }
            for e in cover {
                if !used.contains(&e.id) {
                    used.push(e.id.clone());
                }
            }
        }
        if missing.is_empty() {
            let order = self.ids();
            used.sort_by_key(|u| order.iter().position(|o| o == u));
            Ok(used)
        } else {
            Err(missing)
        }
    }

    /// The applicable entries that explain a difference in `aspect`, in ledger order (none: the
    /// difference is undocumented).
    pub fn attribute(
        &self,
        id: &str,
        features: Option<&BTreeSet<String>>,
        aspect: &str,
    ) -> Vec<String> {
        covering(&self.applicable(id, features), aspect)
            .into_iter()
            .map(|e| e.id.clone())
            .collect()
    }

    /// Entries listing the catalogue (or C-runner) scenario `id` explicitly.
    pub fn for_scenario(&self, id: &str) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| e.scenarios.iter().any(|s| s == id))
            .map(|e| e.id.clone())
            .collect()
    }

    /// Entries whose random predicate matches `features`.
    pub fn for_features(&self, features: &BTreeSet<String>) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| e.random.iter().any(|f| features.contains(f)))
            .map(|e| e.id.clone())
            .collect()
    }

    /// `docs/divergences.md`: the title, the intro, one table row per entry in the order of
    /// their numbers (D1, D2, ..., D10), the outro. A cell that would break the table (a `|` or
    /// a line break in it) is an error naming the entry and the field.
    pub fn markdown(&self) -> Result<String, String> {
        let mut rows: Vec<&Entry> = self.entries.iter().collect();
        rows.sort_by_key(|e| {
            (
                e.id.trim_start_matches('D').parse::<u32>().ok(),
                e.id.clone(),
            )
        });
        let mut md = format!(
            "# {}

{RENDERED_NOTE}

",
            self.page.title
        );
        for l in &self.page.intro {
            md.push_str(l);
            md.push('\n');
        }
        md.push_str(
            "\n| id | legacy (contract) | ours | why safe in a mixed deployment | pinned by |\n",
        );
        md.push_str("|---|---|---|---|---|\n");
        for e in rows {
            let cells = [
                ("legacy", &e.legacy),
                ("ours", &e.ours),
                ("why_safe", &e.why_safe),
                ("pinned_by", &e.pinned_by),
            ];
            md.push_str(&format!("| {} |", e.id));
            for (field, cell) in cells {
                if cell.trim().is_empty() || cell.contains('|') || cell.contains('\n') {
                    return Err(format!(
                        "{}: {field} is empty or holds a '|' or a line break",
                        e.id
                    ));
                }
                md.push_str(&format!(" {cell} |"));
            }
            md.push('\n');
        }
        md.push('\n');
        for l in &self.page.outro {
            md.push_str(l);
            md.push('\n');
        }
        Ok(md)
    }

    /// Ids in ledger order.
    pub fn ids(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.id.clone()).collect()
    }
}

/// The entries of `app` that may explain a difference in `aspect`.
fn covering<'a>(app: &[&'a Entry], aspect: &str) -> Vec<&'a Entry> {
    app.iter()
        .copied()
        .filter(|e| e.aspects.is_empty() || e.aspects.iter().any(|s| s == aspect))
        .collect()
}

/// The line under the title of the rendered page.
pub const RENDERED_NOTE: &str = "<!-- Rendered from compat-tests/ledger.json by `make ledger`: edit the \
                                 ledger, not this page (docs/compat.md, \"Adding a ledger entry\"). -->";

/// `<repo>/docs/divergences.md`.
pub fn divergences_md_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("docs")
        .join("divergences.md")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_the_entries_in_number_order_and_refuses_a_broken_cell() {
        let cells = r#""legacy":"a","ours":"b","why_safe":"c","pinned_by":"d""#;
        let json = format!(
            r#"{{"page":{{"title":"T","intro":["i"],"outro":["o"]}},"entries":[
            {{"id":"D10","title":"t",{cells}}},{{"id":"D2","title":"t",{cells}}}]}}"#
        );
        let l = Ledger::parse(&json, Path::new("x")).unwrap();
        let md = l.markdown().unwrap();
        assert!(md.starts_with("# T\n\n<!--"), "{md}");
        let d2 = md.find("| D2 | a | b | c | d |").expect("D2 row");
        let d10 = md.find("| D10 |").expect("D10 row");
        assert!(d2 < d10, "{md}");
        assert!(md.ends_with("|\n\no\n"), "{md}");
        let broken = json.replacen(r#""ours":"b""#, r#""ours":"x | y""#, 1);
        let err = Ledger::parse(&broken, Path::new("x"))
            .unwrap()
            .markdown()
            .unwrap_err();
        assert!(err.contains("D10: ours"), "{err}");
    }

    #[test]
    fn predicates() {
        let l = Ledger::parse(
            r#"{"entries":[{"id":"D1","title":"t","scenarios":["len-1"],"random":["send_len_le_2mib"]}]}"#,
            Path::new("x"),
        )
        .unwrap();
        assert_eq!(l.for_scenario("len-1"), vec!["D1"]);
        assert!(l.for_scenario("len-2m+1").is_empty());
        let f: BTreeSet<String> = ["send_len_le_2mib".to_string()].into();
        assert_eq!(l.for_features(&f), vec!["D1"]);
        let l = Ledger::parse(
            r#"{"entries":[{"id":"D1","scenarios":["a"]},{"id":"D13","scenarios":["*"],"aspects":["log"]}]}"#,
            Path::new("x"),
        )
        .unwrap();
        assert_eq!(
            l.explain("b", None, &["log".into()]),
            Ok(vec!["D13".to_string()])
        );
        assert_eq!(
            l.explain("b", None, &["api".into(), "log".into()]),
            Err(vec!["api".to_string()])
        );
        assert_eq!(
            l.explain("a", None, &["api".into(), "log".into()]),
            Ok(vec!["D1".to_string(), "D13".to_string()])
        );
        assert_eq!(l.attribute("a", None, "log"), vec!["D1", "D13"]);
        assert_eq!(l.attribute("a", None, "wire"), vec!["D1"]);
        assert!(l.attribute("b", None, "wire").is_empty());
    }
}
