//! Scenario files: a [`Scenario`] with a flow body as a small line-based text (docs/compat.md,
//! "Scenario files"), and back.
//!
//! [`to_text`] prints the id, the description and every setting of the setup and the flow that
//! differs from its default ([`Setup::default`], [`Flow::default`], [`Xfer::new`]); [`parse`]
//! reads such a text (or one written by hand) and checks it, naming `origin:line` and what was
//! expected on any error. `parse(&to_text(s), _)` gives `s`'s setup, flow and features again
//! and prints the same text. A custom scenario (Rust steps) prints its id, description and
//! setup, with a comment naming the function; it is not a flow.

use std::fmt::Write as _;
use std::time::Duration;

use urma_datapath::spec::{self, Knob};

use super::model::{
    Body, Cancel, CancelAt, DestroyAt, Expect, Expected, Flow, Scenario, Xfer, MIB,
};
use crate::fixture::RecvKind;
use crate::harness::aspect::Aspect;
use crate::harness::ctx::{Delivery, Order, SendVia, Setup};

const KIB: u64 = 1024;
/// Largest buffer a file may ask for (each of source and destination).
const MAX_BUFFER: u64 = 256 * MIB as u64;
/// Largest worker count (the Rust library refuses more than 1024; one more is a case).
const MAX_WORKERS: u64 = 4096;
/// Largest `recv_queue_capacity` (4 recv WRs each are posted at init).
const MAX_CAPACITY: u64 = 1024;
/// Longest wait timeout: the waits of one run must fit in its watchdog budget.
const MAX_WAIT_MS: u64 = 20_000;
/// Longest watchdog budget of one run.
const MAX_BUDGET_S: u64 = 300;
/// Most transfers of one file.
const MAX_XFERS: usize = 256;
/// The provider's own knob keys a file may use besides the fault keys every provider knows
/// (`nocopy` is `copy = no`; `async_post` is not reset between runs).
const OWN_KNOBS: &[&str] = &["rnr_timeout_ms", "delete_timeout_ms"];

/// The default watchdog budget of a run.
const BUDGET: Duration = Duration::from_secs(30);

/// A size as a file writes it: `2MiB+1`, `8MiB-1`, `4KiB`, `1MiB+768KiB+1`, `17`.
fn size(v: u64) -> String {
    let mib = MIB as u64;
    if v < KIB {
        return v.to_string();
    }
    let (q, r) = (v / mib, v % mib);
    if q > 0 && r != 0 && mib - r <= 4096 {
        return format!("{}MiB-{}", q + 1, mib - r);
    }
    let mut parts = Vec::new();
    if q > 0 {
        parts.push(format!("{q}MiB"));
    }
    if r / KIB > 0 {
        parts.push(format!("{}KiB", r / KIB));
    }
    if r % KIB > 0 {
        parts.push((r % KIB).to_string());
    }
    parts.join("+")
}

/// Reads a size: terms joined by `+` or `-`, each a number (decimal or `0x` hex) with an
/// optional `KiB` or `MiB`.
fn read_size(s: &str) -> Result<u64, String> {
    let bad = || format!("a size (such as 4096, 2MiB+1, 8MiB-1, 0x1000), not `{s}`");
    let s = s.trim();
    if s.is_empty() {
        return Err(bad());
    }
    let mut total: i128 = 0;
    let mut sign = 1i128;
    let mut rest = s;
    loop {
        let end = rest.find(['+', '-']).unwrap_or(rest.len());
        let term = rest[..end].trim();
        let (digits, unit) = if let Some(d) = term.strip_suffix("MiB") {
            (d, MIB as i128)
        } else if let Some(d) = term.strip_suffix("KiB") {
            (d, KIB as i128)
        } else {
            (term, 1)
        };
        let n = spec::num(digits)
            .filter(|_| !digits.trim().is_empty())
            .ok_or_else(bad)?;
        total += sign * n as i128 * unit;
        if total.abs() > u64::MAX as i128 {
            return Err(bad());
        }
        if end == rest.len() {
            break;
        }
        sign = if rest.as_bytes()[end] == b'+' { 1 } else { -1 };
        rest = &rest[end + 1..];
    }
    u64::try_from(total).map_err(|_| bad())
}

/// The words of the enumerated settings, one table each, read by [`parse`] and written by
/// [`to_text`].
const RECV_KINDS: &[(&str, RecvKind)] = &[
    ("jetty", RecvKind::Jetty),
    ("jfr", RecvKind::Jfr),
    ("jetty-shared-jfr", RecvKind::JettySharedJfr),
];
const SEND_VIAS: &[(&str, SendVia)] = &[
    ("jfs", SendVia::Jfs),
    ("jetty", SendVia::Jetty),
    ("none", SendVia::None),
];
const DESTROYS: &[(&str, DestroyAt)] =
    &[("end", DestroyAt::End), ("inflight", DestroyAt::Inflight)];
const CANCEL_ATS: &[(&str, CancelAt)] = &[
    ("registered", CancelAt::Registered),
    ("before", CancelAt::Before),
    ("after", CancelAt::After),
];
/// A cancel with the sync (`true`) or by id only.
const CANCEL_WITH_SYNC: &[(&str, bool)] = &[("sync", true), ("id", false)];

/// The word of `v` in `choices` (every value of the type has one).
fn name_of<T: PartialEq>(choices: &[(&'static str, T)], v: &T) -> &'static str {
    choices.iter().find(|(_, c)| c == v).map_or("?", |(n, _)| n)
}

/// A key as a file writes it.
fn key(k: u64) -> String {
    format!("{k:#x}")
}

fn order_text(o: Order) -> String {
    match o {
        Order::Fifo => "fifo".into(),
        Order::Reverse => "reverse".into(),
        Order::Shuffle(s) => format!("shuffle {s}"),
    }
}

fn cancel_text(c: Cancel) -> String {
    format!(
        "{}:{}",
        name_of(CANCEL_ATS, &c.at),
        name_of(CANCEL_WITH_SYNC, &c.with_sync)
    )
}

/// The scenario as a file.
pub fn to_text(s: &Scenario) -> String {
    let mut t = String::new();
    let one_line = |v: &str| v.replace(['\n', '\r'], " ");
    let _ = writeln!(t, "id = {}", one_line(&s.id));
    let _ = writeln!(t, "desc = {}", one_line(&s.desc));
    let d = Setup::default();
    if s.setup.recv_kind != d.recv_kind {
        let _ = writeln!(t, "recv = {}", name_of(RECV_KINDS, &s.setup.recv_kind));
    }
    if s.setup.event_mode {
        let _ = writeln!(t, "mode = event");
    }
    if s.setup.buf_len != d.buf_len {
        let _ = writeln!(t, "buffer = {}", size(s.setup.buf_len as u64));
    }
    if s.setup.nocopy {
        let _ = writeln!(t, "copy = no");
    }
    if s.budget != BUDGET {
        let _ = writeln!(t, "budget = {}s", s.budget.as_secs());
    }
    let f = match &s.body {
        Body::Flow(f) => f,
        Body::Custom(st) => {
            let _ = writeln!(
                t,
                "# not a flow: the steps are Rust, fn {} in {}",
                st.name, st.file
            );
            return t;
        }
    };
    let fd = Flow::default();
    if f.workers != fd.workers {
        let _ = writeln!(t, "workers = {}", f.workers);
    }
    if f.capacity != fd.capacity {
        let _ = writeln!(t, "capacity = {}", f.capacity);
    }
    if let Delivery::Held(o) = f.delivery {
        let _ = writeln!(t, "delivery = held {}", order_text(o));
    }
    if let Some(n) = f.dup_held {
        let _ = writeln!(t, "dup_held = {n}");
    }
    if !f.knobs.is_empty() {
        let _ = writeln!(t, "knobs = {}", f.knobs);
    }
    match (f.untimed, f.wait_ms == fd.wait_ms) {
        (true, true) => {
            let _ = writeln!(t, "wait = untimed");
        }
        (true, false) => {
            let _ = writeln!(t, "wait = untimed {}ms", f.wait_ms);
        }
        (false, false) => {
            let _ = writeln!(t, "wait = {}ms", f.wait_ms);
        }
        (false, true) => {}
    }
    if f.via != fd.via {
        let _ = writeln!(t, "send = {}", name_of(SEND_VIAS, &f.via));
    }
    if f.destroy != fd.destroy {
        let _ = writeln!(t, "destroy = {}", name_of(DESTROYS, &f.destroy));
    }
    for x in &f.xfers {
        let _ = write!(t, "xfer len={}", size(x.len as u64));
        if x.recv_len != x.len {
            let _ = write!(t, " recv_len={}", size(x.recv_len as u64));
        }
        let _ = write!(t, " sk={} ck={}", key(x.sk), key(x.ck));
        if x.off != 0 {
            let _ = write!(t, " off={}", size(x.off as u64));
        }
        if x.early {
            let _ = write!(t, " early");
        }
        if x.no_send {
            let _ = write!(t, " nosend");
        }
        if let Some(k) = x.cb_fail {
            let _ = write!(t, " cb_fail={k}");
        }
        if let Some(c) = x.cancel_recv {
            let _ = write!(t, " cancel_recv={}", cancel_text(c));
        }
        if let Some(c) = x.cancel_send {
            let _ = write!(t, " cancel_send={}", cancel_text(c));
        }
        t.push('\n');
    }
    if let Some(e) = &s.expect {
        if let Some(v) = &e.verdict {
            let _ = writeln!(t, "expect = {}", v.text(false));
        }
        for (a, v) in &e.aspects {
            let _ = writeln!(t, "expect {} = {}", a.key(), v.text(true));
        }
    }
    t
}

/// The keys of a file, in the order [`to_text`] writes them.
const KEYS: &str = "id, desc, recv, mode, buffer, copy, budget, workers, capacity, delivery, \
                    dup_held, knobs, wait, send, destroy, xfer, expect";

/// A number in `0..=max`.
fn bounded(v: &str, max: u64, what: &str) -> Result<u64, String> {
    spec::num(v)
        .filter(|n| *n <= max)
        .ok_or_else(|| format!("{what}: a number from 0 to {max}, not `{v}`"))
}

fn one_of<T: Copy>(v: &str, what: &str, choices: &[(&str, T)]) -> Result<T, String> {
    choices
        .iter()
        .find(|(n, _)| *n == v)
        .map(|(_, c)| *c)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
            format!("{what}: one of {}, not `{v}`", names.join(", "))
        })
}

/// Checks a knob spec with the providers' parser: the fault keys, and [`OWN_KNOBS`].
fn check_knobs(v: &str) -> Result<(), String> {
    spec::apply(v, |k| match k {
        Knob::Other(key, val) if OWN_KNOBS.contains(&key) => spec::num(val).map(|_| ()),
        Knob::Other(..) => None,
        _ => Some(()),
    })
    .map(|_| ())
    .map_err(|item| {
        format!(
            "knobs: `{item}` is not a knob spec item (fail_post=N:STATUS, fail_recv_post=N:STATUS, \
             fail_cr=N:CR_STATUS, drop_cr=N, dup_cr=N, hold=0|1, delay_ms=N, {}=N)",
            OWN_KNOBS.join("=N, ")
        )
    })
}

fn read_delivery(v: &str) -> Result<Delivery, String> {
    let w: Vec<&str> = v.split_whitespace().collect();
    Ok(match w.as_slice() {
        ["polled"] => Delivery::Pass,
        ["held", "fifo"] => Delivery::Held(Order::Fifo),
        ["held", "reverse"] => Delivery::Held(Order::Reverse),
        ["held", "shuffle", s] => {
            Delivery::Held(Order::Shuffle(spec::num(s).ok_or_else(|| {
                format!("delivery: held shuffle SEED takes a number, not `{s}`")
            })?))
        }
        _ => {
            return Err(format!(
                "delivery: polled, held fifo, held reverse or held shuffle SEED, not `{v}`"
            ))
        }
    })
}

fn read_wait(v: &str, f: &mut Flow) -> Result<(), String> {
    let ms = |s: &str| {
        s.strip_suffix("ms")
            .and_then(spec::num)
            .filter(|n| *n <= MAX_WAIT_MS)
            .map(|n| n as i64)
            .ok_or_else(|| {
                format!("wait: untimed, Nms (0 to {MAX_WAIT_MS}) or untimed Nms, not `{v}`")
            })
    };
    let w: Vec<&str> = v.split_whitespace().collect();
    match w.as_slice() {
        ["untimed"] => f.untimed = true,
        ["untimed", t] => {
            f.untimed = true;
            f.wait_ms = ms(t)?;
        }
        [t] => f.wait_ms = ms(t)?,
        _ => return ms("").map(|_| ()),
    }
    Ok(())
}

fn read_cancel(v: &str, what: &str) -> Result<Cancel, String> {
    let (at, how) = v.split_once(':').unwrap_or((v, "sync"));
    let at = one_of(at, what, CANCEL_ATS)?;
    let with_sync = one_of(how, what, CANCEL_WITH_SYNC)?;
    Ok(Cancel { at, with_sync })
}

fn read_xfer(v: &str) -> Result<Xfer, String> {
    let mut len = None;
    let mut x = Xfer::new(0, 0, 0);
    let (mut sk, mut ck, mut recv_len) = (None, None, None);
    let u32_size = |k: &str, s: &str| {
        read_size(s)
            .and_then(|n| u32::try_from(n).map_err(|_| format!("at most 4GiB-1, not `{s}`")))
            .map_err(|e| format!("xfer {k}: {e}"))
    };
    for item in v.split_whitespace() {
        let (k, val) = item.split_once('=').unwrap_or((item, ""));
        let seen = match k {
            "len" => len.replace(u32_size(k, val)?).is_some(),
            "recv_len" => recv_len.replace(u32_size(k, val)?).is_some(),
            "sk" | "ck" => {
                let n = spec::num(val)
                    .ok_or_else(|| format!("xfer {k}: a key (0x... or decimal), not `{val}`"))?;
                if k == "sk" {
                    sk.replace(n).is_some()
                } else {
                    ck.replace(n).is_some()
                }
            }
            "off" => {
                let n = read_size(val).map_err(|e| format!("xfer off: {e}"))?;
                if n > MAX_BUFFER {
                    return Err(format!("xfer off: at most {}", size(MAX_BUFFER)));
                }
                x.off = n as usize;
                false
            }
            "early" if val.is_empty() => std::mem::replace(&mut x.early, true),
            "nosend" if val.is_empty() => std::mem::replace(&mut x.no_send, true),
            "cb_fail" => {
                let n = bounded(val, u8::MAX as u64, "xfer cb_fail (a chunk id)")?;
                x.cb_fail.replace(n as u8).is_some()
            }
            "cancel_recv" => x
                .cancel_recv
                .replace(read_cancel(val, "xfer cancel_recv")?)
                .is_some(),
            "cancel_send" => x
                .cancel_send
                .replace(read_cancel(val, "xfer cancel_send")?)
                .is_some(),
            _ => {
                return Err(format!(
                    "xfer: `{item}` is not one of len=SIZE, recv_len=SIZE, sk=KEY, ck=KEY, \
                     off=SIZE, early, nosend, cb_fail=K, cancel_recv=AT[:sync|:id], \
                     cancel_send=AT[:sync|:id]"
                ))
            }
        };
        if seen {
            return Err(format!("xfer: `{k}` given twice"));
        }
    }
    let (Some(len), Some(sk), Some(ck)) = (len, sk, ck) else {
        return Err("xfer: needs len=SIZE, sk=KEY and ck=KEY".into());
    };
    x.len = len;
    x.sk = sk;
    x.ck = ck;
    x.recv_len = recv_len.unwrap_or(len);
    if x.no_send && (x.early || x.cancel_send.is_some()) {
        return Err("xfer: nosend (no send at all) excludes early and cancel_send".into());
    }
    if x.cancel_send.is_some_and(|c| c.at == CancelAt::Registered) {
        return Err("xfer cancel_send: before or after (registered is a recv's point)".into());
    }
    Ok(x)
}

fn read_expected(v: &str, aspect: bool) -> Result<Expected, String> {
    let w: Vec<&str> = v.split_whitespace().collect();
    let ids = |w: &[&str]| -> Result<Expected, String> {
        let mut ids = Vec::new();
        for id in w {
            let ok = id
                .strip_prefix('D')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if !ok {
                return Err(format!(
                    "expect: a ledger entry id (D1, D13, ...), not `{id}`"
                ));
            }
            ids.push(id.to_string());
        }
        if ids.is_empty() {
            return Err("expect: DIVERGES-AS-DOCUMENTED needs the ledger entries".into());
        }
        Ok(Expected::documented(&ids))
    };
    match (aspect, w.as_slice()) {
        (false, ["PASS"]) | (true, ["same"]) => Ok(Expected::Same),
        (_, ["FAIL"]) => Ok(Expected::Fail),
        (false, ["DIVERGES-AS-DOCUMENTED", rest @ ..]) => ids(rest),
        (true, rest) if !rest.is_empty() && rest[0].starts_with('D') => ids(rest),
        (false, _) => Err(format!(
            "expect: PASS, DIVERGES-AS-DOCUMENTED D1 D13 ... or FAIL, not `{v}`"
        )),
        (true, _) => Err(format!(
            "expect ASPECT: same, the ledger entries (D1 D13 ...) or FAIL, not `{v}`"
        )),
    }
}

/// The id a file gets when it names none: `file:<stem of origin>`.
pub(crate) fn file_id(origin: &str) -> String {
    let name = origin.rsplit('/').next().unwrap_or(origin);
    let stem = name.strip_suffix(".scn").unwrap_or(name);
    format!("file:{stem}")
}

/// Reads a scenario file; `origin` names it in errors (`origin:line: ...`).
pub fn parse(text: &str, origin: &str) -> Result<Scenario, String> {
    let mut id = None;
    let mut desc = None;
    let mut setup = Setup::default();
    let mut f = Flow::default();
    let mut budget = BUDGET;
    let mut expect = Expect::default();
    let mut seen: Vec<String> = Vec::new();
    let mut last_line = 0;
    for (n, raw) in text.lines().enumerate() {
        let at = |e: String| format!("{origin}:{}: {e}", n + 1);
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        last_line = n + 1;
        if let Some(rest) = line
            .strip_prefix("xfer ")
            .or((line == "xfer").then_some(""))
        {
            if f.xfers.len() >= MAX_XFERS {
                return Err(at(format!("at most {MAX_XFERS} transfers")));
            }
            f.xfers.push(read_xfer(rest).map_err(at)?);
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(at(format!(
                "expected `key = value` or `xfer ...` (keys: {KEYS})"
            )));
        };
        let (k, v) = (k.trim(), v.trim());
        if seen.iter().any(|s| s == k) {
            return Err(at(format!("`{k}` given twice")));
        }
        seen.push(k.to_string());
        match k {
            "id" if v.is_empty() => return Err(at("id: a scenario id, not nothing".into())),
            "id" => id = Some(v.to_string()),
            "desc" => desc = Some(v.to_string()),
            "recv" => setup.recv_kind = one_of(v, k, RECV_KINDS).map_err(at)?,
            "mode" => {
                setup.event_mode = one_of(v, k, &[("poll", false), ("event", true)]).map_err(at)?
            }
            "buffer" => {
                let b = read_size(v).map_err(|e| at(format!("buffer: {e}")))?;
                if !(1..=MAX_BUFFER).contains(&b) {
                    return Err(at(format!("buffer: 1 to {}", size(MAX_BUFFER))));
                }
                setup.buf_len = b as usize;
            }
            "copy" => setup.nocopy = one_of(v, k, &[("yes", false), ("no", true)]).map_err(at)?,
            "budget" => {
                let s = v
                    .strip_suffix('s')
                    .and_then(spec::num)
                    .filter(|s| (1..=MAX_BUDGET_S).contains(s))
                    .ok_or_else(|| at(format!("budget: Ns, 1 to {MAX_BUDGET_S}, not `{v}`")))?;
                budget = Duration::from_secs(s);
            }
            "workers" => f.workers = bounded(v, MAX_WORKERS, k).map_err(at)? as u32,
            "capacity" => f.capacity = bounded(v, MAX_CAPACITY, k).map_err(at)? as u32,
            "delivery" => f.delivery = read_delivery(v).map_err(at)?,
            "dup_held" => {
                f.dup_held =
                    Some(bounded(v, 1 << 20, "dup_held (a held CR's index)").map_err(at)? as usize)
            }
            "knobs" => {
                check_knobs(v).map_err(at)?;
                f.knobs = v.to_string();
            }
            "wait" => read_wait(v, &mut f).map_err(at)?,
            "send" => f.via = one_of(v, k, SEND_VIAS).map_err(at)?,
            "destroy" => f.destroy = one_of(v, k, DESTROYS).map_err(at)?,
            "expect" => expect.verdict = Some(read_expected(v, false).map_err(at)?),
            _ => {
                let aspect = k
                    .strip_prefix("expect ")
                    .map(str::trim)
                    .and_then(Aspect::from_key);
                match aspect {
                    Some(a) => expect
                        .aspects
                        .push((a, read_expected(v, true).map_err(at)?)),
                    None => {
                        return Err(at(format!(
                            "unknown key `{k}` (keys: {KEYS}; expect ASPECT with ASPECT one of {})",
                            Aspect::ALL.map(|a| a.key()).join(", ")
                        )))
                    }
                }
            }
        }
    }
    let at = |e: String| format!("{origin}:{}: {e}", last_line.max(1));
    if f.xfers.is_empty() {
        return Err(at("a scenario needs at least one `xfer` line".into()));
    }
    for (i, x) in f.xfers.iter().enumerate() {
        let end = x.off as u64 + x.len.max(x.recv_len) as u64;
        if end > setup.buf_len as u64 {
            return Err(at(format!(
                "transfer {i} ends at {} beyond the buffer ({}): set buffer = {}",
                size(end),
                size(setup.buf_len as u64),
                size(end)
            )));
        }
        let held = matches!(f.delivery, Delivery::Held(_));
        for c in [x.cancel_recv, x.cancel_send].into_iter().flatten() {
            if c.at == CancelAt::Before && !held {
                return Err(at(format!(
                    "transfer {i}: a cancel `before` CR delivery needs delivery = held ... \
                     (polled CRs are handed over as they come)"
                )));
            }
            if c.at == CancelAt::After && f.destroy == DestroyAt::Inflight {
                return Err(at(format!(
                    "transfer {i}: a cancel `after` CR delivery never runs with destroy = inflight"
                )));
            }
        }
    }
    if f.dup_held.is_some() && f.delivery == Delivery::Pass {
        return Err(at("dup_held needs delivery = held ...".into()));
    }
    let id = id.unwrap_or_else(|| file_id(origin));
    let mut s = Scenario::flow(&id, desc.as_deref().unwrap_or(""), setup, f);
    s.budget = budget;
    if expect != Expect::default() {
        s.expect = Some(expect);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::random::{self, Draw, Rng};
    use crate::harness::scenario::catalogue;

    fn flows() -> Vec<Scenario> {
        let mut v: Vec<Scenario> = catalogue()
            .into_iter()
            .filter(|s| matches!(s.body, Body::Flow(_)))
            .collect();
        v.extend((0..=499).map(random::scenario));
        v
    }

    #[test]
    fn sizes_read_back() {
        let mib = MIB as u64;
        for (v, t) in [
            (1, "1"),
            (4096, "4KiB"),
            (2 * mib + 1, "2MiB+1"),
            (8 * mib - 1, "8MiB-1"),
            (14 * mib, "14MiB"),
            (mib + 768 * KIB + 1, "1MiB+768KiB+1"),
            (1000, "1000"),
        ] {
            assert_eq!(size(v), t);
            assert_eq!(read_size(t), Ok(v));
        }
        assert_eq!(read_size("0x10 + 1KiB - 2"), Ok(16 + 1024 - 2));
        for bad in [
            "",
            "-1",
            "2MiB+",
            "MiB",
            "1GiB",
            "18446744073709551615+1",
            "x",
        ] {
            assert!(read_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_flow_round_trips() {
        let all = flows();
        assert!(all.len() > 500, "{}", all.len());
        for s in all {
            let text = to_text(&s);
            let p = parse(&text, "t.scn").unwrap_or_else(|e| panic!("{}: {e}\n{text}", s.id));
            assert_eq!(to_text(&p), text, "{} re-prints differently", s.id);
            let (Body::Flow(a), Body::Flow(b)) = (&s.body, &p.body) else {
                panic!("{}: not a flow", s.id)
            };
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{}: flow", s.id);
            assert_eq!(
                format!("{:?}", s.setup),
                format!("{:?}", p.setup),
                "{}: setup",
                s.id
            );
            assert_eq!(s.features, p.features, "{}: features", s.id);
            assert_eq!(
                (p.id.as_str(), p.desc.as_str()),
                (s.id.as_str(), s.desc.as_str())
            );
        }
    }

    #[test]
    fn new_fields_and_expectations_round_trip() {
        let text = "\
# a comment
id = file:x
desc = cancel and expect
delivery = held shuffle 9
wait = untimed 300ms
destroy = end
xfer len=4MiB+1 sk=0x10 ck=0x11 cancel_recv=before:id cancel_send=after:sync
xfer len=1 sk=2 ck=3 off=8MiB recv_len=2 early cb_fail=0 cancel_recv=registered
xfer len=1 sk=4 ck=5 nosend
buffer = 9MiB
expect = DIVERGES-AS-DOCUMENTED D13 D2 D13
expect log = D13
expect wire = same
";
        let s = parse(text, "x.scn").unwrap();
        let Body::Flow(f) = &s.body else { panic!() };
        assert_eq!(f.delivery, Delivery::Held(Order::Shuffle(9)));
        assert!(f.untimed);
        assert_eq!(f.wait_ms, 300);
        assert_eq!(
            f.xfers[0].cancel_recv,
            Some(Cancel {
                at: CancelAt::Before,
                with_sync: false
            })
        );
        assert_eq!(f.xfers[1].recv_len, 2);
        assert_eq!(f.xfers[1].off, 8 * MIB as usize);
        assert!(f.xfers[2].no_send && !f.xfers[1].no_send);
        let e = s.expect.as_ref().unwrap();
        assert_eq!(
            e.verdict,
            Some(Expected::Documented(vec!["D2".into(), "D13".into()]))
        );
        assert_eq!(e.aspects.len(), 2);
        assert!(s.features.contains("cancel"));
        let again = parse(&to_text(&s), "y.scn").unwrap();
        assert_eq!(to_text(&again), to_text(&s));
        assert_eq!(again.expect, s.expect);
    }

    #[test]
    fn errors_name_the_line_and_what_was_expected() {
        let cases = [
            (
                "xfer len=1 sk=1 ck=2\nworkers = many\n",
                "o.scn:2: workers: a number",
            ),
            (
                "xfer len=1 sk=1\n",
                "o.scn:1: xfer: needs len=SIZE, sk=KEY and ck=KEY",
            ),
            ("colour = red\n", "o.scn:1: unknown key `colour`"),
            (
                "knobs = fail_post=x\nxfer len=1 sk=1 ck=2\n",
                "o.scn:1: knobs: `fail_post=x`",
            ),
            (
                "knobs = async_post=1\nxfer len=1 sk=1 ck=2\n",
                "o.scn:1: knobs:",
            ),
            (
                "xfer len=5MiB sk=1 ck=2\n",
                "o.scn:1: transfer 0 ends at 5MiB beyond",
            ),
            (
                "xfer len=1 sk=1 ck=2 cancel_recv=before\n",
                "needs delivery = held",
            ),
            (
                "delivery = held fifo\ndelivery = polled\n",
                "o.scn:2: `delivery` given twice",
            ),
            (
                "# only\n\n",
                "o.scn:1: a scenario needs at least one `xfer`",
            ),
            (
                "expect = OK\nxfer len=1 sk=1 ck=2\n",
                "o.scn:1: expect: PASS",
            ),
            ("just words\n", "o.scn:1: expected `key = value`"),
        ];
        for (text, want) in cases {
            let e = parse(text, "o.scn").err().unwrap_or_default();
            assert!(e.contains(want), "{text:?}: got {e:?}, want {want:?}");
        }
        assert_eq!(
            parse("xfer len=1 sk=1 ck=2\n", "dir/my-case.scn")
                .unwrap()
                .id,
            "file:my-case"
        );
    }

    #[test]
    fn never_panics_on_random_bytes_or_truncations() {
        let mut r = Rng::new(7);
        let texts: Vec<String> = flows().iter().take(80).map(to_text).collect();
        for t in &texts {
            for cut in 0..t.len() {
                if t.is_char_boundary(cut) {
                    let _ = parse(&t[..cut], "cut.scn");
                }
            }
        }
        let alphabet: Vec<u8> = b"=x \n#0123456789abcdefKMiBxferlensk=ck=off:+-_,;.DPASS".to_vec();
        for i in 0..20_000 {
            let n = r.below(200) as usize;
            let bytes: Vec<u8> = (0..n)
                .map(|_| {
                    if i % 2 == 0 {
                        r.next_u64() as u8
                    } else {
                        r.pick(&alphabet)
                    }
                })
                .collect();
            let _ = parse(&String::from_utf8_lossy(&bytes), "rnd.scn");
            // Valid text with random bytes spliced in.
            let t = &texts[i % texts.len()];
            let at = r.below(t.len() as u64 + 1) as usize;
            let mut b = t.as_bytes().to_vec();
            b.splice(at..at, bytes.iter().copied().take(8));
            let _ = parse(&String::from_utf8_lossy(&b), "splice.scn");
        }
    }

    /// The examples of docs/compat.md, "Scenario files": each parses; the printed random
    /// scenario is what `to_text` prints, the checked-in file is the file.
    #[test]
    fn the_documented_examples_are_real() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let doc = std::fs::read_to_string(root.join("../docs/compat.md")).expect("docs/compat.md");
        let section = doc
            .split("\n## Scenario files\n")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("the section Scenario files");
        let blocks: Vec<&str> = section
            .split("```\n")
            .skip(1)
            .step_by(2)
            .filter(|b| b.contains("xfer "))
            .collect();
        assert_eq!(blocks.len(), 2, "{blocks:?}");
        for b in &blocks {
            parse(b, "docs/compat.md").unwrap_or_else(|e| panic!("{e}\n{b}"));
        }
        let checked_in = std::fs::read_to_string(root.join("scenarios/cancel-both-before.scn"))
            .expect("scenarios/cancel-both-before.scn");
        assert_eq!(blocks[0], checked_in);
        assert_eq!(blocks[1], to_text(&random::scenario(20250415)));
    }

    #[test]
    fn custom_cases_print_their_function() {
        let c = catalogue();
        let s = c.iter().find(|s| s.id == "destroy-inflight").unwrap();
        let t = to_text(s);
        assert!(
            t.contains("fn sc_destroy_inflight in compat-tests/src/harness/scenario/lifecycle.rs"),
            "{t}"
        );
    }
}
