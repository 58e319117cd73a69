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

/// The keys whose values differ between two fact sets (or that one lacks), as
/// `key: left | right` lines in key order.
#[allow(dead_code)] // each test binary includes the module; not all of them compare fact sets
pub fn differences(
    left: &BTreeMap<String, String>,
    right: &BTreeMap<String, String>,
) -> Vec<String> {
    let missing = "(missing)".to_string();
    let mut keys: Vec<&String> = left.keys().chain(right.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let (l, r) = (
                left.get(k).unwrap_or(&missing),
                right.get(k).unwrap_or(&missing),
            );
            (l != r).then(|| format!("{k}: {l} | {r}"))
        })
        .collect()
}
