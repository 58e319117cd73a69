//! A small lexer of Rust source: identifiers, punctuation, lifetimes and literals; comments and strings skipped.

/// A token: an identifier (`$crate` included), a string literal's text, `::`, or one other
/// character. Comments, whitespace, numbers, lifetimes and character literals are dropped.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Str(String),
    PathSep,
    P(char),
}

#[derive(Clone, Debug)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) line: u32,
}

pub(super) fn lex(src: &str) -> Vec<Token> {
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
