//! The reports a run writes, checked as their readers see them.
//!
//! * `report.html` is opened in headless Chromium: every number the page shows (`data-n`)
//!   must equal the count recomputed here from `report.json`'s scenarios and checks (and
//!   `report.json`'s own `summary` and `totals` must agree with it); every matrix row must
//!   carry its scenario's verdicts; a filter given in the URL's hash must show exactly the
//!   scenarios it selects; a screenshot is saved beside the report (`report.png`).
//! * `report.xml` must validate against `compat-tests/junit.xsd` (the JUnit subset Jenkins and
//!   GitLab read) with `xmllint`, and count what `report.json` counts; the schema must reject
//!   the mistakes a CI system cannot read.
//!
//! The reports are those in `$COMPAT_REPORT_DIR` (`report.*` and/or `report-split.*`; `make
//! test` points it at the reports `make compat` and `compat --split` just wrote), else those
//! of a small run made here (6 scenarios, a few seconds). Chromium and xmllint come from
//! `packaging/deps.sh`; without them the checks are skipped with a message unless `CI` or
//! `COMPAT_REPORT_TOOLS_REQUIRED` is set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use compat_tests::lib_under_test::target_dir;
use compat_tests::target;
use serde_json::Value;

/// Whether a missing tool fails the test instead of skipping it.
fn required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var_os("COMPAT_REPORT_TOOLS_REQUIRED").is_some()
}

/// The tool `name` when it runs (`--version`), else None (and a skip message, or a panic when
/// [`required`]).
fn tool(names: &[&str], package: &str) -> Option<String> {
    for n in names {
        let ok = Command::new(n)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if ok {
            return Some(n.to_string());
        }
    }
    let msg = format!(
        "{} not found (Debian package {package}; packaging/deps.sh installs it)",
        names[0]
    );
    assert!(!required(), "{msg}");
    println!("skipped: {msg}");
    None
}

/// The directory with the reports to check: `$COMPAT_REPORT_DIR`, else a small run's.
fn report_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(d) = std::env::var_os("COMPAT_REPORT_DIR") {
            return PathBuf::from(d);
        }
        let out = target_dir().join("compat-report-files");
        let _ = std::fs::remove_dir_all(&out);
        // A PASS, documented differences in every aspect (D1, D2, D5, D12) and a random
        // scenario (the C runner's scenarios are left out: they compile a C program; the
        // reports of `make compat` have them).
        let mut c = target::command(env!("CARGO_BIN_EXE_compat"));
        for s in [
            "len-4m",
            "len-1",
            "destroy-inflight",
            "cb-fail-chunk0",
            "init-workers-1025",
            "rand-1099",
        ] {
            c.args(["--scenario", s]);
        }
        let o = c.arg("--out").arg(&out).output().expect("run compat");
        assert!(
            o.status.success(),
            "compat failed:\n{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        out
    })
}

/// The report stems present in `dir`: `report`, `report-split`.
fn stems(dir: &Path) -> Vec<&'static str> {
    let v: Vec<&str> = ["report", "report-split"]
        .into_iter()
        .filter(|s| dir.join(format!("{s}.json")).exists())
        .collect();
    assert!(!v.is_empty(), "no report.json in {}", dir.display());
    v
}

fn json_of(dir: &Path, stem: &str) -> Value {
    let p = dir.join(format!("{stem}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).expect("read the report"))
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Runs headless Chromium on `page` + `hash` with `args` (`--dump-dom`, `--screenshot=...`)
/// and returns its output.
fn chromium(exe: &str, page: &Path, hash: &str, args: &[String]) -> String {
    let profile = tempdir("chromium-profile");
    let url = format!(
        "file://{}{hash}",
        page.canonicalize().expect("page").display()
    );
    let o = Command::new("timeout")
        .arg("120")
        .arg(exe)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(&url)
        .output()
        .expect("run chromium");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        o.status.success(),
        "chromium {url} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn tempdir(what: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "compat-{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Every `data-n="key">value<` of the rendered page: key -> the values shown.
fn shown_numbers(dom: &str) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut rest = dom;
    while let Some(i) = rest.find("data-n=\"") {
        rest = &rest[i + 8..];
        let key = rest[..rest.find('"').unwrap_or(0)].to_string();
        let gt = rest.find('>').map(|g| g + 1).unwrap_or(0);
        let val = rest[gt..gt + rest[gt..].find('<').unwrap_or(0)].to_string();
        m.entry(key).or_default().push(val);
    }
    m
}

/// The counts the page must show, computed from the report's scenarios and checks (not from
/// its `summary`): the keys of `present::html::number_keys`.
fn expected_numbers(report: &Value) -> BTreeMap<String, u64> {
    let mut m: BTreeMap<String, u64> = BTreeMap::new();
    let mut bump = |k: String| *m.entry(k).or_default() += 1;
    let scenarios = report["scenarios"].as_array().cloned().unwrap_or_default();
    for s in &scenarios {
        bump("scenarios".into());
        let v = s["verdict"].as_str().unwrap_or("");
        let key = match v.split(' ').next().unwrap_or("") {
            "PASS" => "pass",
            "DIVERGES-AS-DOCUMENTED" => "diverges",
            "FAIL" => "fail",
            "SKIPPED" => "skipped",
            other => panic!("{}: verdict {other}", s["id"]),
        };
        bump(key.into());
        for e in s["ledger"].as_array().into_iter().flatten() {
            bump(format!("entry.{}", e.as_str().unwrap_or("")));
        }
        if let Some(a) = s["aspects"].as_object() {
            for (k, v) in a {
                bump(format!("aspect.{k}.compared"));
                let w = match v["verdict"].as_str() {
                    Some("same") => "same",
                    Some("differs") => "differs",
                    Some("FAIL") => "fail",
                    other => panic!("{}: aspect {k}: {other:?}", s["id"]),
                };
                bump(format!("aspect.{k}.{w}"));
                for e in v["ledger"].as_array().into_iter().flatten() {
                    bump(format!("aspect.{k}.entry.{}", e.as_str().unwrap_or("")));
                }
            }
        }
    }
    for c in report["checks"].as_array().into_iter().flatten() {
        let suite = c["suite"].as_str().unwrap_or("?");
        let v = c["verdict"].as_str().unwrap_or("");
        bump(format!("suite.{suite}.total"));
        let w = match v.split(' ').next().unwrap_or("") {
            "OK" => "ok",
            "DIVERGES-AS-DOCUMENTED" => "diverges",
            "FAIL" => "fail",
            "SKIPPED" => "skipped",
            _ => "not_run",
        };
        bump(format!("suite.{suite}.{w}"));
        if let Some(ids) = v.strip_prefix("DIVERGES-AS-DOCUMENTED ") {
            for id in ids.split(',') {
                bump(format!("entry.{id}"));
            }
        }
        if suite == "run" && w == "fail" {
            bump("run_failures".into());
        }
    }
    for k in TOTALS {
        m.entry(k.into()).or_default();
    }
    // Every aspect of a compared scenario has all four counts, and every suite all six.
    let aspects: Vec<String> = m
        .keys()
        .filter_map(|k| k.strip_prefix("aspect.")?.strip_suffix(".compared"))
        .map(str::to_string)
        .collect();
    for a in aspects {
        for w in ["same", "differs", "fail"] {
            m.entry(format!("aspect.{a}.{w}")).or_default();
        }
    }
    let suites: Vec<String> = m
        .keys()
        .filter_map(|k| k.strip_prefix("suite.")?.strip_suffix(".total"))
        .map(str::to_string)
        .collect();
    for s in suites {
        for w in ["ok", "diverges", "fail", "skipped", "not_run"] {
            m.entry(format!("suite.{s}.{w}")).or_default();
        }
    }
    m
}

/// The scenario counts of the page and of `report.json`'s `summary`.
const TOTALS: [&str; 6] = [
    "scenarios",
    "pass",
    "diverges",
    "fail",
    "skipped",
    "run_failures",
];

/// The start tags of the matrix's scenario rows.
fn rows(dom: &str) -> Vec<&str> {
    dom.split("<tr class=\"sc")
        .skip(1)
        .map(|r| &r[..r.find('>').unwrap_or(r.len())])
        .collect()
}

fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let pat = format!(" {name}=\"");
    let i = tag.find(&pat)? + pat.len();
    Some(&tag[i..i + tag[i..].find('"')?])
}

/// What is wrong with the rendered page `dom` against `report` (empty: nothing).
fn page_problems(dom: &str, report: &Value) -> Vec<String> {
    let mut p = Vec::new();
    if !dom.contains("data-ready=\"1\"") {
        p.push("the page's script did not run".to_string());
    }
    let want = expected_numbers(report);
    let shown = shown_numbers(dom);
    for (k, v) in &want {
        match shown.get(k) {
            Some(vals) if vals.iter().all(|x| x == &v.to_string()) => {}
            Some(vals) => p.push(format!(
                "{k}: the page shows {vals:?}, the report counts {v}"
            )),
            None if *v == 0 && (k.contains(".entry.") || k.starts_with("entry.")) => {}
            None => p.push(format!("{k}: not on the page (the report counts {v})")),
        }
    }
    for k in shown.keys() {
        if !want.contains_key(k) {
            p.push(format!(
                "{k}: on the page ({:?}) but not in the report",
                shown[k]
            ));
        }
    }
    // The report's own summary and totals agree with its scenarios.
    let sum = &report["summary"];
    for k in TOTALS {
        if sum[k].as_u64() != want.get(k).copied() {
            p.push(format!(
                "summary.{k} = {}, the scenarios give {:?}",
                sum[k],
                want.get(k)
            ));
        }
    }
    let t = &report["totals"];
    for k in ["pass", "diverges"] {
        if t[k].as_u64() != want.get(k).copied() {
            p.push(format!(
                "totals.{k} = {}, the scenarios give {:?}",
                t[k],
                want.get(k)
            ));
        }
    }
    // Every row carries its scenario's verdicts.
    let scenarios = report["scenarios"].as_array().cloned().unwrap_or_default();
    let rows = rows(dom);
    if rows.len() != scenarios.len() {
        p.push(format!(
            "{} matrix rows for {} scenarios",
            rows.len(),
            scenarios.len()
        ));
    }
    for (r, s) in rows.iter().zip(&scenarios) {
        let id = s["id"].as_str().unwrap_or("");
        if attr(r, "data-id") != Some(id) {
            p.push(format!(
                "row {:?} where the report has {id}",
                attr(r, "data-id")
            ));
            continue;
        }
        for (a, v) in s["aspects"].as_object().into_iter().flatten() {
            if attr(r, &format!("data-a-{a}")) != v["verdict"].as_str() {
                p.push(format!(
                    "{id}: {a} shown {:?}, the report says {}",
                    attr(r, &format!("data-a-{a}")),
                    v["verdict"]
                ));
            }
        }
    }
    p
}

/// The scenarios the filter `aspect` + `verdict` selects, from the report.
fn selected(report: &Value, aspect: &str, verdict: &str) -> usize {
    report["scenarios"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["aspects"][aspect]["verdict"].as_str() == Some(verdict))
        .count()
}

/// The number after `<b id="shown">`.
fn shown_count(dom: &str) -> Option<usize> {
    let i = dom.find("id=\"shown\">")? + 11;
    dom[i..i + dom[i..].find('<')?].parse().ok()
}

/// Opens `page` with the filter `hash`: exactly `want` rows must stay visible, and the page must
/// say so.
fn filtered(exe: &str, page: &Path, hash: &str, want: usize) {
    let dom = chromium(exe, page, hash, &["--dump-dom".into()]);
    let visible = rows(&dom)
        .iter()
        .filter(|r| attr(r, "hidden").is_none())
        .count();
    assert_eq!(visible, want, "{}{hash}: visible rows", page.display());
    assert_eq!(
        shown_count(&dom),
        Some(want),
        "{}{hash}: the count shown",
        page.display()
    );
}

#[test]
fn page_shows_the_reports_numbers_and_filters_in_chromium() {
    if target::emulated() {
        println!("not run under emulation (runs natively)");
        return;
    }
    let Some(exe) = tool(&["chromium", "chromium-browser"], "chromium") else {
        return;
    };
    let dir = report_dir();
    for stem in stems(dir) {
        let report = json_of(dir, stem);
        let page = dir.join(format!("{stem}.html"));
        let dom = chromium(&exe, &page, "", &["--dump-dom".into()]);
        let problems = page_problems(&dom, &report);
        assert!(
            problems.is_empty(),
            "{}:\n{}",
            page.display(),
            problems.join("\n")
        );
        // The check can fail: one scenario's verdict changed in the report is caught.
        let mut wrong = report.clone();
        if let Some(s) = wrong["scenarios"]
            .as_array_mut()
            .and_then(|a| a.first_mut())
        {
            s["verdict"] = "FAIL".into();
            assert!(
                !page_problems(&dom, &wrong).is_empty(),
                "a wrong count went unnoticed"
            );
        }
        // A filter from the URL's hash: the aspect with documented differences (the wire when
        // it has any), else every scenario with an identical log.
        let (aspect, verdict) = ["wire", "completion", "delivery", "api", "log"]
            .into_iter()
            .find(|a| selected(&report, a, "differs") > 0)
            .map(|a| (a, "differs"))
            .unwrap_or(("log", "same"));
        let want = selected(&report, aspect, verdict);
        let hash = format!("#aspect={aspect}&verdict={verdict}");
        filtered(&exe, &page, &hash, want);
        // Another filter: a ledger entry (of the scenario verdicts) and a kind.
        let scenarios = report["scenarios"].as_array().cloned().unwrap_or_default();
        let has = |s: &Value, e: &str| {
            s["ledger"]
                .as_array()
                .is_some_and(|l| l.iter().any(|x| x == e))
        };
        let pick = scenarios.iter().find_map(|s| {
            let l = s["ledger"].as_array()?;
            let e = l.iter().find(|x| *x != "D13").or(l.first())?.as_str()?;
            Some((e.to_string(), s["kind"].as_str()?.to_string()))
        });
        if let Some((entry, kind)) = pick {
            let want = scenarios
                .iter()
                .filter(|s| has(s, &entry) && s["kind"] == kind.as_str())
                .count();
            let hash = format!("#entry={entry}&kind={kind}");
            filtered(&exe, &page, &hash, want);
        }
        // The screenshot: the filtered matrix with the first selected scenario's traces open.
        let first = report["scenarios"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["aspects"][aspect]["verdict"].as_str() == Some(verdict))
            .and_then(|s| s["id"].as_str())
            .unwrap_or("");
        let png = dir.join(format!("{stem}.png"));
        let _ = std::fs::remove_file(&png);
        chromium(
            &exe,
            &page,
            &format!("{hash}&open={first}"),
            &[
                format!("--screenshot={}", png.display()),
                "--window-size=1400,2200".into(),
            ],
        );
        let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
        assert!(size > 10_000, "{}: {size} bytes", png.display());
        println!("{}: numbers, rows and the filter {hash} ({want} rows) as in {stem}.json; screenshot {}", page.display(), png.display());
    }
}

/// `xmllint --noout --schema compat-tests/junit.xsd <file>`: Ok, or Err(its messages).
fn validate(xmllint: &str, file: &Path) -> Result<(), String> {
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR")).join("junit.xsd");
    let o = Command::new(xmllint)
        .args(["--noout", "--schema"])
        .arg(&xsd)
        .arg(file)
        .output()
        .expect("run xmllint");
    if o.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).into_owned())
    }
}

/// How many times `<tag` opens an element in `xml`.
fn count(xml: &str, tag: &str) -> usize {
    xml.matches(&format!("<{tag} ")).count()
        + xml.matches(&format!("<{tag}>")).count()
        + xml.matches(&format!("<{tag}/>")).count()
}

#[test]
fn junit_report_validates_and_counts_what_the_json_counts() {
    let Some(xmllint) = tool(&["xmllint"], "libxml2-utils") else {
        return;
    };
    let dir = report_dir();
    for stem in stems(dir) {
        let file = dir.join(format!("{stem}.xml"));
        if let Err(e) = validate(&xmllint, &file) {
            panic!(
                "{} does not validate against junit.xsd:\n{e}",
                file.display()
            );
        }
        let xml = std::fs::read_to_string(&file).expect("read report.xml");
        let report = json_of(dir, stem);
        let scenarios = report["scenarios"].as_array().cloned().unwrap_or_default();
        let checks = report["checks"].as_array().cloned().unwrap_or_default();
        let verdict = |v: &Value, w: &str| v["verdict"].as_str().unwrap_or("").starts_with(w);
        let n = |w: &str| {
            scenarios.iter().filter(|s| verdict(s, w)).count()
                + checks.iter().filter(|c| verdict(c, w)).count()
        };
        assert_eq!(
            count(&xml, "testcase"),
            scenarios.len() + checks.len(),
            "{stem}: test cases"
        );
        assert_eq!(count(&xml, "failure"), n("FAIL"), "{stem}: failures");
        assert_eq!(count(&xml, "skipped"), n("SKIPPED"), "{stem}: skipped");
        assert_eq!(count(&xml, "error"), n("NOT RUN"), "{stem}: errors");
        for s in &scenarios {
            let id = s["id"].as_str().unwrap_or("");
            assert!(
                xml.contains(&format!("<testcase name=\"{id}\"")),
                "{stem}: no test case {id}"
            );
        }
        assert!(
            xml.contains("<property name=\"aspect.wire\""),
            "{stem}: no aspect property"
        );
    }
}

#[test]
fn junit_schema_rejects_what_ci_cannot_read() {
    let Some(xmllint) = tool(&["xmllint"], "libxml2-utils") else {
        return;
    };
    let d = tempdir("junit");
    let good = "<testsuites tests=\"1\" failures=\"1\" errors=\"0\" skipped=\"0\"><testsuite name=\"s\" tests=\"1\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"0.1\"><testcase name=\"a\" classname=\"s\" time=\"0.1\"><properties><property name=\"k\" value=\"v\"/></properties><failure message=\"m\">text</failure></testcase></testsuite></testsuites>";
    let f = d.join("good.xml");
    std::fs::write(&f, good).expect("write");
    validate(&xmllint, &f).unwrap_or_else(|e| panic!("a well-formed report rejected: {e}"));
    for (what, bad) in [
        (
            "a test case without a name",
            good.replace("testcase name=\"a\" ", "testcase "),
        ),
        (
            "a count that is not a number",
            good.replace(
                "tests=\"1\" failures=\"1\" errors=\"0\" skipped=\"0\" time",
                "tests=\"one\" failures=\"1\" errors=\"0\" skipped=\"0\" time",
            ),
        ),
        (
            "two results in one test case",
            good.replace("</failure>", "</failure><skipped/>"),
        ),
        (
            "a failure outside a test case",
            good.replace("</testcase>", "</testcase><failure/>"),
        ),
        (
            "a suite without counts",
            good.replace(
                " tests=\"1\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"0.1\">",
                ">",
            ),
        ),
    ] {
        let f = d.join("bad.xml");
        std::fs::write(&f, &bad).expect("write");
        assert!(validate(&xmllint, &f).is_err(), "junit.xsd accepts {what}");
    }
    let _ = std::fs::remove_dir_all(&d);
}
