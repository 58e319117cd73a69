//! What a module file says about the others: its `mod` declarations, the names it imports with `use`, and the paths in its code, with test code left out.

use super::lex::{Tok, Token};
use std::collections::BTreeSet;

/// `mod name;` in inline module `scope` of its file.
#[derive(Clone, Debug)]
pub(super) struct ModDecl {
    pub(super) scope: Vec<String>,
    pub(super) name: String,
    pub(super) path_attr: Option<String>,
    pub(super) line: u32,
}

/// A path the file names, in inline module `scope` of the file. For a `use`, `bind` is the name
/// it brings into scope (`None` for a glob) and `export` says it is a `pub` (re-export) one.
#[derive(Debug)]
pub(super) struct Named {
    pub(super) scope: Vec<String>,
    pub(super) path: Vec<String>,
    pub(super) is_use: bool,
    pub(super) export: bool,
    pub(super) bind: Option<String>,
    pub(super) line: u32,
}

/// What one file declares and names, test code left out.
#[derive(Debug, Default)]
pub(super) struct Parsed {
    pub(super) mods: Vec<ModDecl>,
    /// The inline modules, as paths from the file's module.
    pub(super) inline: Vec<Vec<String>>,
    pub(super) paths: Vec<Named>,
    /// Every other identifier of the file's code (outside `use` and `mod` declarations).
    pub(super) idents: BTreeSet<String>,
}

pub(super) const EOF: Tok = Tok::P('\0');

pub(super) fn parse(toks: &[Token]) -> Parsed {
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
pub(super) fn use_tree(
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
pub(super) fn cfg_test(attr: &[Token]) -> bool {
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
pub(super) fn matching(toks: &[Token], open: usize) -> usize {
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
pub(super) fn end_of_item(toks: &[Token], mut i: usize) -> usize {
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
pub(super) fn end_of_block(toks: &[Token], mut i: usize) -> usize {
    while i < toks.len() {
        match toks[i].tok {
            Tok::P('}') => return i,
            Tok::P('(' | '[' | '{') => i = matching(toks, i) + 1,
            _ => i += 1,
        }
    }
    i
}
