//! One crate as a graph: its module files (from the roots through `mod` declarations and `#[path]`), and the edges between them that their paths make.

use super::lex::lex;
use super::parse::{parse, Parsed};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The crate roots of the package in `dir`: the `path` of its manifest's `[lib]` and `[[bin]]`
/// sections, and `src/lib.rs`, `src/main.rs`, `src/bin/*.rs`, `src/bin/*/main.rs` that exist.
pub(super) fn roots(dir: &Path) -> Vec<PathBuf> {
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
pub(super) type ModPath = (usize, Vec<String>);

pub(super) struct File {
    /// Repository-relative, `/`-separated.
    pub(super) rel: String,
    pub(super) root: usize,
    pub(super) module: Vec<String>,
    pub(super) parsed: Parsed,
}

pub(super) struct Crate {
    pub(super) files: Vec<File>,
    /// Every module (file or inline) → the file it is in.
    pub(super) modules: HashMap<ModPath, usize>,
    /// The names each module imports with `use` → the path imported.
    pub(super) bindings: HashMap<ModPath, Vec<(String, Vec<String>)>>,
}

impl Crate {
    pub(super) fn load(repo: &Path, member: &str) -> Result<Crate, String> {
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
    pub(super) fn visit(
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
    pub(super) fn edges(&self) -> BTreeMap<(usize, usize), u32> {
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
    pub(super) fn resolve(
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
