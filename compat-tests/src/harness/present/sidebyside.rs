//! Two normalised traces side by side: per section, the lines aligned by a longest common
//! subsequence, each row marked same (`=`), only in the C reference's trace (`-`), only in the
//! Rust library's (`+`) or changed (`~`, a C line facing the Rust line that replaced it), with
//! the aspect the line belongs to.

use super::super::aspect::Aspect;
use super::super::normalise::Normalised;

/// One row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// `=`, `-`, `+` or `~`.
    pub tag: char,
    pub left: Option<String>,
    pub right: Option<String>,
    pub aspect: Aspect,
}

/// One section's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub rows: Vec<Row>,
}

/// Above this many line pairs a section is aligned line by line instead.
const LCS_LIMIT: usize = 4_000_000;

/// The edit script turning `a` into `b`: `=` (both), `-` (a only), `+` (b only).
fn script(a: &[String], b: &[String]) -> Vec<(char, usize, usize)> {
    let (n, m) = (a.len(), b.len());
    if n * m > LCS_LIMIT {
        let mut v = Vec::new();
        for i in 0..n.max(m) {
            match (i < n, i < m) {
                (true, true) if a[i] == b[i] => v.push(('=', i, i)),
                (true, true) => {
                    v.push(('-', i, 0));
                    v.push(('+', 0, i));
                }
                (true, false) => v.push(('-', i, 0)),
                _ => v.push(('+', 0, i)),
            }
        }
        return v;
    }
    // l[i][j]: LCS length of a[i..] and b[j..].
    let mut l = vec![0u32; (n + 1) * (m + 1)];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            l[i * (m + 1) + j] = if a[i] == b[j] {
                l[(i + 1) * (m + 1) + j + 1] + 1
            } else {
                l[(i + 1) * (m + 1) + j].max(l[i * (m + 1) + j + 1])
            };
        }
    }
    let (mut i, mut j, mut v) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            v.push(('=', i, j));
            i += 1;
            j += 1;
        } else if j == m || (i < n && l[(i + 1) * (m + 1) + j] >= l[i * (m + 1) + j + 1]) {
            v.push(('-', i, 0));
            i += 1;
        } else {
            v.push(('+', 0, j));
            j += 1;
        }
    }
    v
}

/// The rows of one section.
fn rows(name: &str, a: &[String], b: &[String]) -> Vec<Row> {
    let mut out = Vec::new();
    let ed = script(a, b);
    let mut k = 0;
    while k < ed.len() {
        if ed[k].0 == '=' {
            let line = a[ed[k].1].clone();
            out.push(Row {
                tag: '=',
                aspect: Aspect::of(name, &line),
                left: Some(line.clone()),
                right: Some(line),
            });
            k += 1;
            continue;
        }
        // A run of deletions and insertions: paired up as changes, the rest left or right.
        let start = k;
        while k < ed.len() && ed[k].0 != '=' {
            k += 1;
        }
        let dels: Vec<&String> = ed[start..k]
            .iter()
            .filter(|e| e.0 == '-')
            .map(|e| &a[e.1])
            .collect();
        let ins: Vec<&String> = ed[start..k]
            .iter()
            .filter(|e| e.0 == '+')
            .map(|e| &b[e.2])
            .collect();
        for i in 0..dels.len().max(ins.len()) {
            let (l, r) = (dels.get(i), ins.get(i));
            let tag = match (l, r) {
                (Some(_), Some(_)) => '~',
                (Some(_), None) => '-',
                _ => '+',
            };
            let any = l.or(r).map(|s| s.as_str()).unwrap_or("");
            out.push(Row {
                tag,
                aspect: Aspect::of(name, any),
                left: l.map(|s| s.to_string()),
                right: r.map(|s| s.to_string()),
            });
        }
    }
    out
}

/// The sections of two rendered traces (the C reference's, the Rust library's), in rendering
/// order, each with its rows.
pub fn build(legacy: &str, rust: &str) -> Vec<Section> {
    let (a, b) = (Normalised::parse(legacy), Normalised::parse(rust));
    let mut all = Normalised::default();
    for k in a.sections.keys().chain(b.sections.keys()) {
        all.sections.entry(k.clone()).or_default();
    }
    let empty = Vec::new();
    all.ordered_names()
        .into_iter()
        .map(|name| Section {
            name: name.clone(),
            rows: rows(
                name,
                a.sections.get(name).unwrap_or(&empty),
                b.sections.get(name).unwrap_or(&empty),
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_with_changes_marked() {
        let a = "## api\ninit = 0\nsend = ERR\nwait = 1\ndestroy = 0\n## log\nWARN x1\n";
        let b =
            "## api\ninit = 0\nsend = 0\nwait = 0\nwait2 = 0\ndestroy = 0\n## urma\nreq | post\n";
        let s = build(a, b);
        let names: Vec<&str> = s.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["api", "urma", "log"]);
        let tags: String = s[0].rows.iter().map(|r| r.tag).collect();
        assert_eq!(tags, "=~~+=");
        assert_eq!(s[0].rows[1].left.as_deref(), Some("send = ERR"));
        assert_eq!(s[0].rows[1].right.as_deref(), Some("send = 0"));
        assert_eq!(s[1].rows[0].tag, '+');
        assert_eq!(s[1].rows[0].aspect, Aspect::Wire);
        assert_eq!(s[2].rows[0].tag, '-');
        assert_eq!(s[2].rows[0].aspect, Aspect::Log);
        // Identical traces: every row the same.
        assert!(build(a, a)
            .iter()
            .all(|x| x.rows.iter().all(|r| r.tag == '=')));
    }
}
