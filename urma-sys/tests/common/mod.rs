//! What more than one test of urma-sys shares (included with `mod common;`).

use std::collections::BTreeMap;

/// The facts a generated C program printed, one `key<TAB>value` line each.
pub fn tab_separated_facts(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .map(|l| {
            let (k, v) = l
                .split_once('\t')
                .unwrap_or_else(|| panic!("not a `key<TAB>value` line: {l:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}
