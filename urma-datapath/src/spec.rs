//! The knob-spec syntax shared by `URMA_LOOPBACK_KNOBS` / `urma_loopback_apply_knobs` and the
//! interposition layer's `URMA_INTERPOSE_KNOBS` / `urma_interpose_apply_knobs`: items
//! `key=value` separated by `,` or `;`. Each library matches the keys it knows; the values are
//! read here, once for both.

use std::ffi::c_int;

use crate::{CR_DROP, CR_DUP, Q_RECV, Q_SEND};

/// One item of a knob spec with its value read: a fault key both libraries know, or another
/// key (the library's own) with its value still unread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob<'a> {
    /// `fail_post=N:STATUS` (queue [`Q_SEND`]) or `fail_recv_post=N:STATUS` ([`Q_RECV`]).
    FailPost {
        queue: c_int,
        nth: u64,
        status: c_int,
    },
    /// `fail_cr=N:CR_STATUS`.
    FailCr { nth: u64, status: u32 },
    /// `drop_cr=N` ([`CR_DROP`]) or `dup_cr=N` ([`CR_DUP`]).
    CrAction { nth: u64, action: c_int },
    /// `hold=0|1` (any number other than 0 holds).
    Hold(bool),
    /// `delay_ms=N`.
    DelayMs(u64),
    /// Any other key, and its value (trimmed, not read).
    Other(&'a str, &'a str),
}

/// Applies `spec` item by item, in order: `apply` gets the [`Knob`] of each item and returns
/// `None` for a key it does not know or a value it cannot read. Returns the number of items
/// applied, or `Err(item)` for the first item that does not parse (the items before it stay
/// applied).
pub fn apply(spec: &str, mut apply: impl FnMut(Knob<'_>) -> Option<()>) -> Result<usize, String> {
    let mut n = 0;
    for item in items(spec) {
        let (item, k, v) = item?;
        knob(k, v)
            .and_then(&mut apply)
            .ok_or_else(|| item.to_string())?;
        n += 1;
    }
    Ok(n)
}

/// The [`Knob`] of `key=value`; `None` when the value of a shared key does not parse.
fn knob<'a>(key: &'a str, v: &'a str) -> Option<Knob<'a>> {
    let post = |queue| post_fault(v).map(|(nth, status)| Knob::FailPost { queue, nth, status });
    Some(match key {
        "fail_post" => post(Q_SEND)?,
        "fail_recv_post" => post(Q_RECV)?,
        "fail_cr" => cr_fault(v).map(|(nth, status)| Knob::FailCr { nth, status })?,
        "drop_cr" => Knob::CrAction {
            nth: num(v)?,
            action: CR_DROP,
        },
        "dup_cr" => Knob::CrAction {
            nth: num(v)?,
            action: CR_DUP,
        },
        "hold" => Knob::Hold(num(v)? != 0),
        "delay_ms" => Knob::DelayMs(num(v)?),
        _ => Knob::Other(key, v),
    })
}

/// The items of `spec` as `(item, key, value)`, trimmed, empty items skipped; `Err(item)`
/// for an item without `=`.
pub fn items(spec: &str) -> impl Iterator<Item = Result<(&str, &str, &str), String>> {
    spec.split([',', ';'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| match item.split_once('=') {
            Some((k, v)) => Ok((item, k.trim(), v.trim())),
            None => Err(item.to_string()),
        })
}

/// An unsigned number, decimal or `0x` hexadecimal.
pub fn num(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// `N:STATUS` of `fail_post` / `fail_recv_post`: the WR number and the status the post call
/// returns, an `int` as in the C API (`urma_status_t`), so negative values are accepted
/// (`-1`), as are `0x` hexadecimal ones up to `0x7fffffff`; a value outside `int` is
/// rejected, not truncated.
pub fn post_fault(v: &str) -> Option<(u64, i32)> {
    let (n, st) = v.split_once(':')?;
    let st = st.trim();
    let st = match st.strip_prefix('-') {
        Some(abs) => i32::try_from(-i64::try_from(num(abs)?).ok()?).ok()?,
        None => i32::try_from(num(st)?).ok()?,
    };
    Some((num(n)?, st))
}

/// `N:CR_STATUS` of `fail_cr`: the send WR number and its CR status (`uint32_t`); a value
/// outside `uint32_t` is rejected, not truncated.
pub fn cr_fault(v: &str) -> Option<(u64, u32)> {
    let (n, st) = v.split_once(':')?;
    Some((num(n)?, u32::try_from(num(st)?).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_fault_status_is_a_signed_int() {
        assert_eq!(super::post_fault("3:-1"), Some((3, -1)));
        assert_eq!(super::post_fault("1:4096"), Some((1, 4096)));
        assert_eq!(super::post_fault("0x2:0x7fffffff"), Some((2, i32::MAX)));
        assert_eq!(super::post_fault("2:-2147483648"), Some((2, i32::MIN)));
        // Outside int: rejected, not truncated to another status.
        assert_eq!(super::post_fault("2:0xffffffff"), None);
        assert_eq!(super::post_fault("2:-2147483649"), None);
        assert_eq!(super::post_fault("2:--1"), None);
        assert_eq!(super::post_fault("-1:5"), None, "WR numbers are unsigned");
        assert_eq!(super::post_fault("2"), None);
    }

    #[test]
    fn cr_fault_status_fits_uint32() {
        assert_eq!(super::cr_fault("1:4"), Some((1, 4)));
        assert_eq!(super::cr_fault("1:0xffffffff"), Some((1, u32::MAX)));
        assert_eq!(super::cr_fault("1:0x100000000"), None);
        assert_eq!(super::cr_fault("1:-1"), None);
    }

    #[test]
    fn apply_reads_the_shared_keys_and_stops_at_the_first_bad_item() {
        use super::Knob;
        let mut seen = Vec::new();
        let r = super::apply(
            "fail_post=2:-1; fail_recv_post=0x3:7, fail_cr=4:9,drop_cr=5,dup_cr=6,hold=2,\
             delay_ms=10,own=x",
            |k| {
                seen.push(format!("{k:?}"));
                Some(())
            },
        );
        assert_eq!(r, Ok(8));
        let want = [
            Knob::FailPost {
                queue: Q_SEND,
                nth: 2,
                status: -1,
            },
            Knob::FailPost {
                queue: Q_RECV,
                nth: 3,
                status: 7,
            },
            Knob::FailCr { nth: 4, status: 9 },
            Knob::CrAction {
                nth: 5,
                action: CR_DROP,
            },
            Knob::CrAction {
                nth: 6,
                action: CR_DUP,
            },
            Knob::Hold(true),
            Knob::DelayMs(10),
            Knob::Other("own", "x"),
        ];
        assert_eq!(seen, want.map(|k| format!("{k:?}")));
        // A bad shared value, a key the library refuses, an item without '=': Err(item), with
        // the items before it applied and none after it.
        for (bad, applied) in [
            ("hold=1,fail_cr=1:0x100000000,hold=0", 1),
            ("delay_ms=1 , mine = 3 ,hold=0", 1),
            ("junk", 0),
            ("drop_cr=-1", 0),
        ] {
            let mut n = 0;
            let r = super::apply(bad, |k| {
                if let Knob::Other(..) = k {
                    return None;
                }
                n += 1;
                Some(())
            });
            let item = bad.split(',').nth(applied).unwrap().trim();
            assert_eq!(r, Err(item.to_string()), "{bad}");
            assert_eq!(n, applied, "{bad}");
        }
    }

    #[test]
    fn items_split_trim_and_reject_an_item_without_a_value() {
        let v: Vec<_> = super::items(" a=1 ;b = 2,, ").collect();
        assert_eq!(v, vec![Ok(("a=1", "a", "1")), Ok(("b = 2", "b", "2"))]);
        assert_eq!(
            super::items("a=1,junk").nth(1),
            Some(Err("junk".to_string()))
        );
    }
}
