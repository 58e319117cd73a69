//! `cargo xtask imports` (also run by `lint`): no module file of a crate uses, directly or through
//! other files, a file that uses it back. Dependency-free: a small lexer and just enough of Rust's
//! path rules, no compiler.
//!
//! The graph of one crate: a node per module file, an edge A → B when A's code names a path that
//! leads into B.
//! * Paths are read from `use` trees and from code: those starting with `crate`, `$crate`, `self`
//!   or `super`, and those starting with the name of a child module or of a name the module
//!   imported with `use`. A path leads as deep as it names modules: `crate::request::index::Early`
//!   is an edge to `request/index.rs`, `crate::request::Slot` one to `request/mod.rs`.
//! * A name a module imports with `use` leads to what that `use` names, so a re-exported item
//!   leads to the file that defines it (`crate::user_data`, when the crate root re-exports another
//!   crate's `user_data`, is no edge at all); a glob `use` is an edge to the module it reads. A
//!   `use` of one bare name (`pub(crate) use say;`, the idiom for a macro) names an item of its
//!   own file.
//! * A `pub use` (any `pub(..)` too) is the module's interface, not a use: it is an edge only when
//!   the file's own code names what it brings in (a glob `pub use` never is).
//! * The crate root is a node like any other, and a child module's `super::` is an edge to its
//!   parent's file like any other: a parent that uses its child and a child that uses its parent
//!   are a circle. An inline `mod x { .. }` belongs to its file.
//! * Not edges: `mod x;` declarations (a parent owns its children, it does not use them), comments
//!   (doc links included), string literals, paths of `pub(in ..)`, and test code: every item under
//!   `#[cfg(test)]` or `#[cfg(all(test, ..))]` (the inline `mod tests { .. }`; a `mod tests;` so
//!   marked is not read at all) and a file that starts with `#![cfg(test)]`.
//!
//! Limits: a `use` inside a function counts as one of its module; a macro counts where it is
//! written, with the paths written in it (`$crate::x` in `macro_rules!` is an edge of the defining
//! file), not where it expands.
//!
//! Module files: the roots are the `path` of the manifest's `[lib]` and `[[bin]]`, `src/lib.rs`,
//! `src/main.rs` and `src/bin/*.rs` (each a crate of its own); `mod x;` in a root or a `mod.rs`
//! is `x.rs` or `x/mod.rs` beside it, in `foo.rs` it is `foo/x.rs` or `foo/x/mod.rs` (inside an
//! inline `mod m { .. }`, one directory `m/` deeper); `#[path = ".."]` is relative to the
//! declaring file's directory.
//!
//! A circle is printed as its files (a strongly connected component of the graph) and, for each
//! edge between them, the first line that makes it.

mod graph;
mod lex;
mod parse;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use graph::Crate;

/// Workspace members whose circles are printed but do not fail the check (every other member
/// is enforced). A member leaves this list once its layering is settled and checked clean; every
/// member is enforced now.
pub const REPORT_ONLY: &[&str] = &[];

/// One circle: its files and the edges between them (`"a.rs:12 -> b.rs"`), repository-relative.
#[derive(Debug, PartialEq)]
pub struct Circle {
    pub files: Vec<String>,
    pub edges: Vec<String>,
}

/// The goal: checks every workspace member and prints what it found; `Err` names the members
/// not in [`REPORT_ONLY`] that have a circle.
pub fn check(repo: &Path) -> Result<(), String> {
    let mut failed = Vec::new();
    for member in workspace_members(repo)? {
        let enforced = !REPORT_ONLY.contains(&member.as_str());
        let (files, circles) =
            crate_circles(repo, &member).map_err(|e| format!("{member}: {e}"))?;
        let name = if member == "." {
            "os-transport (src)"
        } else {
            &member
        };
        if circles.is_empty() {
            eprintln!("imports: {name}: no circle ({files} files)");
            continue;
        }
        let note = if enforced { "" } else { ", report only" };
        eprintln!("imports: {name}: {} circle(s){note}", circles.len());
        for c in &circles {
            eprintln!(
                "  circle of {} files: {}",
                c.files.len(),
                c.files.join(", ")
            );
            for e in &c.edges {
                eprintln!("    {e}");
            }
        }
        if enforced {
            failed.push(name.to_string());
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("import circles in {}", failed.join(", ")))
    }
}

/// The `members` of the workspace manifest (written on one line).
fn workspace_members(repo: &Path) -> Result<Vec<String>, String> {
    let manifest = std::fs::read_to_string(repo.join("Cargo.toml"))
        .map_err(|e| format!("reading Cargo.toml: {e}"))?;
    let list = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("members = ["))
        .ok_or("Cargo.toml: no one-line `members = [..]`")?;
    let list = list.split(']').next().unwrap_or_default();
    Ok(list
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect())
}

/// The number of module files of workspace member `member` (a directory of `repo`) and its
/// circles.
pub fn crate_circles(repo: &Path, member: &str) -> Result<(usize, Vec<Circle>), String> {
    let krate = Crate::load(repo, member)?;
    let edges = krate.edges();
    let mut out = Vec::new();
    for scc in sccs(krate.files.len(), &edges) {
        let inside: BTreeSet<usize> = scc.iter().copied().collect();
        let mut files: Vec<String> = scc.iter().map(|&f| krate.files[f].rel.clone()).collect();
        files.sort();
        let mut list: Vec<(&str, u32, &str)> = edges
            .iter()
            .filter(|((a, b), _)| inside.contains(a) && inside.contains(b))
            .map(|((a, b), line)| (&*krate.files[*a].rel, *line, &*krate.files[*b].rel))
            .collect();
        list.sort();
        let list = list
            .into_iter()
            .map(|(a, line, b)| format!("{a}:{line} -> {b}"))
            .collect();
        out.push(Circle { files, edges: list });
    }
    out.sort_by(|a, b| a.files.cmp(&b.files));
    Ok((krate.files.len(), out))
}

/// The strongly connected components of more than one node (Tarjan).
fn sccs(n: usize, edges: &BTreeMap<(usize, usize), u32>) -> Vec<Vec<usize>> {
    struct Tarjan<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            for &w in &self.adj[v] {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w] = false;
                    scc.push(w);
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    self.out.push(scc);
                }
            }
        }
    }
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges.keys() {
        adj[a].push(b);
    }
    let mut t = Tarjan {
        adj: &adj,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    t.out
}

#[cfg(test)]
mod tests {
    use super::lex::{lex, Tok};
    use super::*;
    use std::path::PathBuf;

    /// A throw-away crate `k` under a fresh directory: `files` are `(path under k/src, text)`.
    fn tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let repo =
            std::env::temp_dir().join(format!("xtask-imports-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&repo);
        for (path, text) in files {
            let p = repo.join("k/src").join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        repo
    }

    #[test]
    fn finds_a_circle_and_names_its_edges() {
        let repo = tree(
            "circle",
            &[
                // The root is a node like any other: its code calls `r`, which uses the root.
                (
                    "lib.rs",
                    "mod a;\nmod b;\nmod p;\nmod r;\npub fn guard() {}\nfn on_load() { r::load(); }\n",
                ),
                ("r.rs", "pub fn load() {\n    crate::guard();\n}\n"),
                ("a.rs", "use crate::b::B;\npub struct A;\n"),
                ("b.rs", "pub struct B;\nfn f() -> crate::a::A { crate::a::A }\n"),
                // A parent whose code uses its child's item, the child using the parent's
                // through `super::`.
                (
                    "p/mod.rs",
                    "mod c;\npub use c::C;\npub struct P;\npub fn make() -> C { C(P) }\n",
                ),
                ("p/c.rs", "pub struct C(pub super::P);\n"),
            ],
        );
        let (files, circles) = crate_circles(&repo, "k").unwrap();
        assert_eq!(files, 6);
        let circle = |files: [&str; 2], edges: [&str; 2]| Circle {
            files: files.map(String::from).to_vec(),
            edges: edges.map(String::from).to_vec(),
        };
        assert_eq!(
            circles,
            [
                circle(
                    ["k/src/a.rs", "k/src/b.rs"],
                    ["k/src/a.rs:1 -> k/src/b.rs", "k/src/b.rs:2 -> k/src/a.rs"]
                ),
                circle(
                    ["k/src/lib.rs", "k/src/r.rs"],
                    [
                        "k/src/lib.rs:6 -> k/src/r.rs",
                        "k/src/r.rs:2 -> k/src/lib.rs"
                    ]
                ),
                circle(
                    ["k/src/p/c.rs", "k/src/p/mod.rs"],
                    [
                        "k/src/p/c.rs:1 -> k/src/p/mod.rs",
                        "k/src/p/mod.rs:2 -> k/src/p/c.rs"
                    ]
                ),
            ]
        );
        std::fs::remove_dir_all(repo).unwrap();
    }

    #[test]
    fn accepts_an_acyclic_tree() {
        let repo = tree(
            "acyclic",
            &[
                (
                    "lib.rs",
                    "mod a;\nmod b;\nmod split;\npub use ext::util as helper;\n\
                     pub(crate) use say;\nmacro_rules! say { () => {} }\n",
                ),
                // Uses `b` and the root, whose names lead elsewhere or stay in the root.
                (
                    "a.rs",
                    "use crate::{b, helper};\nuse crate::say;\nfn f() { b::g(); }\n\
                     mod inner { use super::super::b::g; }\n",
                ),
                // Names `a` only in comments, strings and test code, and through a `use` of
                // another crate.
                (
                    "b.rs",
                    "//! See [`crate::a`].\n/* crate::a::f */\npub fn g() { let _ = \"crate::a\"; }\n\
                     pub fn h() -> char { '\"' }\nuse other::a;\nfn k() { a::x(); }\n\
                     #[cfg(test)]\nmod tests { use crate::a; }\n\
                     #[cfg(all(test, unix))]\nfn only_in_tests() { crate::a::f(); }\n\
                     #[cfg(test)]\nmod more_tests;\n",
                ),
                // `split.rs` with its child in `split/`: the child uses the parent; the parent
                // only re-exports the child's item.
                ("split.rs", "pub mod node;\npub use node::Node;\npub struct Plan;\n"),
                ("split/node.rs", "use super::Plan;\nuse crate::b::g;\npub struct Node(Plan);\n"),
            ],
        );
        let (files, circles) = crate_circles(&repo, "k").unwrap();
        assert_eq!(files, 5);
        assert_eq!(circles, vec![]);
        std::fs::remove_dir_all(repo).unwrap();
    }

    #[test]
    fn reads_paths_past_literals_and_lifetimes() {
        let toks = lex("fn f<'a>(x: &'a u8) -> char { let s = r#\"crate::a\"#; 'x' }\ncrate::b::c");
        let idents: Vec<&str> = toks
            .iter()
            .filter_map(|t| match &t.tok {
                Tok::Ident(s) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            idents,
            ["fn", "f", "x", "u8", "char", "let", "s", "crate", "b", "c"]
        );
        assert_eq!(toks.last().unwrap().line, 2);
    }
}
