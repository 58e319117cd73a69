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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

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

/// The crate roots of the package in `dir`: the `path` of its manifest's `[lib]` and `[[bin]]`
/// sections, and `src/lib.rs`, `src/main.rs`, `src/bin/*.rs`, `src/bin/*/main.rs` that exist.
fn roots(dir: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    let mut section = "";
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if let Some(p) = line.strip_prefix("path = ") {
            if section == "[lib]" || section == "[[bin]]" {
                roots.push(dir.join(p.trim_matches('"')));
            }
        }
    }
    let src = dir.join("src");
    roots.extend(["lib.rs", "main.rs"].map(|f| src.join(f)));
    if let Ok(bin) = std::fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = bin
            .filter_map(|e| e.ok().map(|e| e.path()))
            .map(|p| if p.is_dir() { p.join("main.rs") } else { p })
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    let mut seen = BTreeSet::new();
    roots.retain(|p| p.is_file() && seen.insert(p.clone()));
    roots
}

/// A module path inside one crate root: `(root, ["request", "index"])`.
type ModPath = (usize, Vec<String>);

struct File {
    /// Repository-relative, `/`-separated.
    rel: String,
    root: usize,
    module: Vec<String>,
    parsed: Parsed,
}

struct Crate {
    files: Vec<File>,
    /// Every module (file or inline) → the file it is in.
    modules: HashMap<ModPath, usize>,
    /// The names each module imports with `use` → the path imported.
    bindings: HashMap<ModPath, Vec<(String, Vec<String>)>>,
}

impl Crate {
    fn load(repo: &Path, member: &str) -> Result<Crate, String> {
        let base = if member == "." {
            repo.to_path_buf()
        } else {
            repo.join(member)
        };
        let roots = roots(&base);
        if roots.is_empty() {
            return Err(format!("no crate root in {}", base.display()));
        }
        let mut krate = Crate {
            files: Vec::new(),
            modules: HashMap::new(),
            bindings: HashMap::new(),
        };
        for (root, path) in roots.iter().enumerate() {
            krate.visit(repo, path, root, Vec::new(), true)?;
        }
        for f in &krate.files {
            for u in f.parsed.paths.iter().filter(|p| p.is_use) {
                if let Some(name) = u.bind.clone().filter(|n| n != "_") {
                    let mut m = f.module.clone();
                    m.extend(u.scope.iter().cloned());
                    let list = krate.bindings.entry((f.root, m)).or_default();
                    list.push((name, u.path.clone()));
                }
            }
        }
        Ok(krate)
    }

    /// Reads the module file `path` (module `module` of root `root`) and, through its `mod x;`
    /// declarations, its children.
    fn visit(
        &mut self,
        repo: &Path,
        path: &Path,
        root: usize,
        module: Vec<String>,
        owns_dir: bool,
    ) -> Result<(), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let parsed = parse(&lex(&text));
        let rel = path.strip_prefix(repo).unwrap_or(path);
        let rel = rel.to_string_lossy().replace('\\', "/");
        let id = self.files.len();
        self.modules.insert((root, module.clone()), id);
        for inline in &parsed.inline {
            let mut m = module.clone();
            m.extend(inline.iter().cloned());
            self.modules.insert((root, m), id);
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let children_dir = if owns_dir {
            dir.to_path_buf()
        } else {
            dir.join(path.file_stem().unwrap_or_default())
        };
        let decls = parsed.mods.clone();
        self.files.push(File {
            rel,
            root,
            module: module.clone(),
            parsed,
        });
        for d in decls {
            let mut base = children_dir.clone();
            base.extend(&d.scope);
            let candidates = match &d.path_attr {
                Some(p) if d.scope.is_empty() => vec![dir.join(p)],
                Some(p) => vec![base.join(p)],
                None => vec![
                    base.join(format!("{}.rs", d.name)),
                    base.join(&d.name).join("mod.rs"),
                ],
            };
            let Some(file) = candidates.into_iter().find(|c| c.is_file()) else {
                return Err(format!(
                    "{}:{}: no file for `mod {}`",
                    path.display(),
                    d.line,
                    d.name
                ));
            };
            let mut child = module.clone();
            child.extend(d.scope.iter().cloned());
            child.push(d.name.clone());
            let owns = file.file_name().is_some_and(|n| n == "mod.rs");
            self.visit(repo, &file, root, child, owns)?;
        }
        Ok(())
    }

    /// Every edge between two files, with the first line that makes it.
    fn edges(&self) -> BTreeMap<(usize, usize), u32> {
        let mut edges = BTreeMap::new();
        for (from, f) in self.files.iter().enumerate() {
            for p in &f.parsed.paths {
                // A re-export is the module's interface, not a use, unless the file's own code
                // names it too.
                let used_here = |name: &String| f.parsed.idents.contains(name);
                if p.export && !p.bind.as_ref().is_some_and(used_here) {
                    continue;
                }
                let mut scope = f.module.clone();
                scope.extend(p.scope.iter().cloned());
                let Some((m, _)) = self.resolve(f.root, &scope, &p.path, 0) else {
                    continue;
                };
                let to = self.modules[&(f.root, m)];
                if to != from {
                    let line = edges.entry((from, to)).or_insert(p.line);
                    *line = (*line).min(p.line);
                }
            }
        }
        edges
    }

    /// Where `path`, written in module `scope`, leads: `None` out of the crate (another crate, a
    /// type or a local name), else the deepest module it names and whether it names that module
    /// itself (`true`) or an item in it.
    fn resolve(
        &self,
        root: usize,
        scope: &[String],
        path: &[String],
        hops: u32,
    ) -> Option<(Vec<String>, bool)> {
        if hops > 16 {
            return None;
        }
        let first = path.first()?.as_str();
        let supers = path.iter().take_while(|s| *s == "super").count();
        let (mut cur, rest) = match first {
            "crate" | "$crate" => (Vec::new(), &path[1..]),
            "self" => (scope.to_vec(), &path[1..]),
            "super" if supers <= scope.len() => {
                (scope[..scope.len() - supers].to_vec(), &path[supers..])
            }
            "super" | "" => return None,
            _ => (scope.to_vec(), path),
        };
        let relative = rest.len() == path.len();
        for (k, seg) in rest.iter().enumerate() {
            let mut next = cur.clone();
            next.push(seg.clone());
            if self.modules.contains_key(&(root, next.clone())) {
                cur = next;
                continue;
            }
            let bound = self
                .bindings
                .get(&(root, cur.clone()))
                .and_then(|list| list.iter().find(|(name, _)| name == seg).map(|(_, p)| p));
            if let Some(target) = bound {
                if target.len() == 1 && target[0] == *seg {
                    // `use say;`: an item of this module.
                    return Some((cur, false));
                }
                match self.resolve(root, &cur, target, hops + 1)? {
                    (m, true) => {
                        cur = m;
                        continue;
                    }
                    (m, false) => return Some((m, false)),
                }
            }
            if relative && k == 0 {
                return None;
            }
            return Some((cur, false));
        }
        Some((cur, true))
    }
}

/// A token: an identifier (`$crate` included), a string literal's text, `::`, or one other
/// character. Comments, whitespace, numbers, lifetimes and character literals are dropped.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    PathSep,
    P(char),
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: u32,
}

fn lex(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let is_ident = |ch: char| ch == '_' || ch.is_alphanumeric();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1u32);
    // Skips a string literal whose opening quote is at `i` (raw with `hashes` `#`s, or not);
    // returns its text and the index after it.
    let string = |mut i: usize, raw: Option<usize>, line: &mut u32| -> (String, usize) {
        let mut s = String::new();
        i += 1;
        while i < c.len() {
            let ch = c[i];
            if ch == '"' {
                let hashes = raw.unwrap_or(0);
                if (1..=hashes).all(|k| at(i + k) == '#') {
                    return (s, i + 1 + hashes);
                }
            } else if ch == '\\' && raw.is_none() {
                s.push(ch);
                i += 1;
            }
            if at(i) == '\n' {
                *line += 1;
            }
            s.push(at(i));
            i += 1;
        }
        (s, i)
    };
    while i < c.len() {
        let ch = c[i];
        let start = line;
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += u32::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if ch == '"' {
            let (s, next) = string(i, None, &mut line);
            out.push(Token {
                tok: Tok::Str(s),
                line: start,
            });
            i = next;
        } else if ch == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime / label ('a).
            if at(i + 1) == '\\' {
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while is_ident(at(i)) {
                    i += 1;
                }
            }
        } else if ch.is_ascii_digit() {
            while is_ident(at(i)) {
                i += 1;
            }
        } else if is_ident(ch) {
            let begin = i;
            while is_ident(at(i)) {
                i += 1;
            }
            let word: String = c[begin..i].iter().collect();
            let hashes = (0..).take_while(|&k| at(i + k) == '#').count();
            if matches!(word.as_str(), "r" | "br" | "cr") && at(i + hashes) == '"' {
                let (s, next) = string(i + hashes, Some(hashes), &mut line);
                out.push(Token {
                    tok: Tok::Str(s),
                    line: start,
                });
                i = next;
            } else if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                let (s, next) = string(i, None, &mut line);
                out.push(Token {
                    tok: Tok::Str(s),
                    line: start,
                });
                i = next;
            } else if word == "b" && at(i) == '\'' {
                i += if at(i + 1) == '\\' { 3 } else { 2 };
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if word == "r" && hashes == 1 && is_ident(at(i + 1)) {
                // A raw identifier: r#name.
                let begin = i + 1;
                i = begin;
                while is_ident(at(i)) {
                    i += 1;
                }
                out.push(Token {
                    tok: Tok::Ident(c[begin..i].iter().collect()),
                    line: start,
                });
            } else {
                out.push(Token {
                    tok: Tok::Ident(word),
                    line: start,
                });
            }
        } else if ch == '$'
            && c[i + 1..].starts_with(&['c', 'r', 'a', 't', 'e'])
            && !is_ident(at(i + 6))
        {
            out.push(Token {
                tok: Tok::Ident("$crate".into()),
                line: start,
            });
            i += 6;
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Token {
                tok: Tok::PathSep,
                line: start,
            });
            i += 2;
        } else {
            out.push(Token {
                tok: Tok::P(ch),
                line: start,
            });
            i += 1;
        }
    }
    out
}

/// `mod name;` in inline module `scope` of its file.
#[derive(Clone, Debug)]
struct ModDecl {
    scope: Vec<String>,
    name: String,
    path_attr: Option<String>,
    line: u32,
}

/// A path the file names, in inline module `scope` of the file. For a `use`, `bind` is the name
/// it brings into scope (`None` for a glob) and `export` says it is a `pub` (re-export) one.
#[derive(Debug)]
struct Named {
    scope: Vec<String>,
    path: Vec<String>,
    is_use: bool,
    export: bool,
    bind: Option<String>,
    line: u32,
}

/// What one file declares and names, test code left out.
#[derive(Debug, Default)]
struct Parsed {
    mods: Vec<ModDecl>,
    /// The inline modules, as paths from the file's module.
    inline: Vec<Vec<String>>,
    paths: Vec<Named>,
    /// Every other identifier of the file's code (outside `use` and `mod` declarations).
    idents: BTreeSet<String>,
}

const EOF: Tok = Tok::P('\0');

fn parse(toks: &[Token]) -> Parsed {
    let t = |i: usize| toks.get(i).map_or(&EOF, |t| &t.tok);
    let ident = |i: usize| match t(i) {
        Tok::Ident(s) => Some(s.as_str()),
        _ => None,
    };
    let mut out = Parsed::default();
    // One entry per open `{`: the inline module it opens, if it does.
    let mut braces: Vec<Option<String>> = Vec::new();
    let scope = |braces: &[Option<String>]| braces.iter().flatten().cloned().collect::<Vec<_>>();
    let mut path_attr = None;
    // The index of the token after the last `pub` / `pub(..)`.
    let mut after_pub = usize::MAX;
    let mut i = 0;
    while i < toks.len() {
        match t(i) {
            Tok::P('#') => {
                let inner = *t(i + 1) == Tok::P('!');
                let open = i + 1 + usize::from(inner);
                if *t(open) != Tok::P('[') {
                    i += 1;
                    continue;
                }
                let close = matching(toks, open);
                let attr = &toks[open + 1..close.min(toks.len())];
                if cfg_test(attr) {
                    if inner {
                        if braces.is_empty() {
                            // `#![cfg(test)]`: the whole file is test code.
                            return Parsed::default();
                        }
                        // Inside an inline module: the rest of that module (its `}` pops it).
                        i = end_of_block(toks, close + 1);
                    } else {
                        i = end_of_item(toks, close + 1);
                    }
                    continue;
                }
                if let [a, b, c] = attr {
                    if let (Tok::Ident(k), Tok::P('='), Tok::Str(p)) = (&a.tok, &b.tok, &c.tok) {
                        if k == "path" {
                            path_attr = Some(p.clone());
                        }
                    }
                }
                i = close + 1;
            }
            Tok::Ident(k) if k == "mod" && ident(i + 1).is_some() => {
                let name = ident(i + 1).unwrap_or_default().to_string();
                match t(i + 2) {
                    Tok::P(';') => out.mods.push(ModDecl {
                        scope: scope(&braces),
                        name,
                        path_attr: path_attr.take(),
                        line: toks[i].line,
                    }),
                    Tok::P('{') => {
                        path_attr = None;
                        braces.push(Some(name));
                        out.inline.push(scope(&braces));
                    }
                    _ => {}
                }
                i += 3;
            }
            Tok::Ident(k) if k == "pub" => {
                after_pub = if *t(i + 1) == Tok::P('(') {
                    matching(toks, i + 1) + 1
                } else {
                    i + 1
                };
                i += 1;
            }
            Tok::Ident(k) if k == "use" && *t(i + 1) != Tok::P('<') => {
                let mut leaves = Vec::new();
                let end = use_tree(toks, i + 1, Vec::new(), &mut leaves);
                for (path, bind) in leaves {
                    out.paths.push(Named {
                        scope: scope(&braces),
                        path,
                        is_use: true,
                        export: after_pub == i,
                        bind,
                        line: toks[i].line,
                    });
                }
                i = end;
            }
            Tok::P('{') => {
                braces.push(None);
                i += 1;
            }
            Tok::P('}') => {
                braces.pop();
                path_attr = None;
                i += 1;
            }
            Tok::Ident(first)
                if *t(i + 1) == Tok::PathSep
                    && i.checked_sub(1).map(t) != Some(&Tok::PathSep)
                    && i.checked_sub(1).and_then(ident) != Some("in") =>
            {
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while *t(j) == Tok::PathSep {
                    let Some(seg) = ident(j + 1) else { break };
                    path.push(seg.to_string());
                    j += 2;
                }
                out.paths.push(Named {
                    scope: scope(&braces),
                    path,
                    is_use: false,
                    export: false,
                    bind: None,
                    line: toks[i].line,
                });
                i = j;
            }
            Tok::P(';') => {
                path_attr = None;
                i += 1;
            }
            Tok::Ident(name) => {
                out.idents.insert(name.clone());
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// Reads the use tree at `i` under `prefix`; pushes each leaf `(path, name bound)`; returns the
/// index after the tree (after its `;` at the top level).
fn use_tree(
    toks: &[Token],
    mut i: usize,
    mut path: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    let t = |i: usize| toks.get(i).map_or(&EOF, |t| &t.tok);
    let top = path.is_empty();
    if *t(i) == Tok::PathSep {
        // `::name`: another crate.
        path.push(String::new());
        i += 1;
    }
    let end = |i: usize| {
        if top && *t(i) == Tok::P(';') {
            i + 1
        } else {
            i
        }
    };
    loop {
        match t(i) {
            Tok::Ident(seg) => {
                path.push(seg.clone());
                i += 1;
                if *t(i) == Tok::PathSep {
                    i += 1;
                    continue;
                }
                let mut bind = None;
                if path.last().is_some_and(|s| s == "self") {
                    path.pop();
                }
                if let (Tok::Ident(a), Tok::Ident(alias)) = (t(i), t(i + 1)) {
                    if a == "as" {
                        bind = Some(alias.clone());
                        i += 2;
                    }
                }
                let bind = bind.or_else(|| path.last().cloned());
                out.push((path, bind));
                return end(i);
            }
            Tok::P('*') => {
                out.push((path, None));
                return end(i + 1);
            }
            Tok::P('{') => {
                i += 1;
                while !matches!(t(i), Tok::P('}') | Tok::P('\0')) {
                    i = use_tree(toks, i, path.clone(), out);
                    if *t(i) == Tok::P(',') {
                        i += 1;
                    }
                }
                return end(i + 1);
            }
            _ => return end(i),
        }
    }
}

/// Whether attribute tokens (between `[` and `]`) are `cfg(test)` or `cfg(all(.., test, ..))`.
fn cfg_test(attr: &[Token]) -> bool {
    let toks: Vec<&Tok> = attr.iter().map(|t| &t.tok).collect();
    let test = Tok::Ident("test".into());
    match toks.as_slice() {
        [Tok::Ident(cfg), Tok::P('('), rest @ ..] if cfg == "cfg" => match rest {
            [t, Tok::P(')')] => **t == test,
            [Tok::Ident(all), Tok::P('('), args @ ..] if all == "all" => {
                let mut depth = 0;
                args.iter().any(|t| {
                    match t {
                        Tok::P('(') => depth += 1,
                        Tok::P(')') => depth -= 1,
                        _ => {}
                    }
                    depth == 0 && **t == test
                })
            }
            _ => false,
        },
        _ => false,
    }
}

/// The index of the bracket closing the one at `open` (or the end).
fn matching(toks: &[Token], open: usize) -> usize {
    let mut depth = 0i32;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match t.tok {
            Tok::P('(' | '[' | '{') => depth += 1,
            Tok::P(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// The index after the item starting at `i`: after its `;`, or after its `{ .. }` body.
fn end_of_item(toks: &[Token], mut i: usize) -> usize {
    while i < toks.len() {
        match toks[i].tok {
            Tok::P(';') => return i + 1,
            Tok::P('{') => return matching(toks, i) + 1,
            Tok::P('(' | '[') => i = matching(toks, i) + 1,
            _ => i += 1,
        }
    }
    i
}

/// The index of the `}` closing the block that `i` is in.
fn end_of_block(toks: &[Token], mut i: usize) -> usize {
    while i < toks.len() {
        match toks[i].tok {
            Tok::P('}') => return i,
            Tok::P('(' | '[' | '{') => i = matching(toks, i) + 1,
            _ => i += 1,
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

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
