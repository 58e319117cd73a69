//! The normaliser: raw trace -> comparable text.
//!
//! * Addresses: the loopback already traces SGEs as `{seg, off, len}` (offset into a
//!   symbolically named segment) and queues/targets by name (`jfs1`, `tjetty1`, ...); API
//!   arguments are recorded symbolically by the runner (`H`, `S1`, `src+0`, ...). No pointer,
//!   thread id or timestamp reaches the normalised form.
//! * Order: the contract orders everything about one request (its WRs, its completions, its
//!   wake-ups, its notify callbacks: §3.2, §5.4) and nothing across requests bound to different
//!   workers. So each section that mixes requests is split into per-request streams
//!   (`req:0x<rid>`; the receive queue's own stream `rq:<queue>`); order inside a stream is kept,
//!   streams are listed sorted by key. API calls are made by the scenario thread and stay in
//!   call order.
//! * Log: the contract fixes levels and the `[ost:<file>:<line>] [PIPLN RH2D] ` prefix, not texts,
//!   and log lines from workers and pollers interleave freely. The implementations word and
//!   split their INFO/DEBUG lines differently (D13), so the normalised form is: the set of
//!   levels present, the exact number of WARN and ERROR messages, and the number of messages
//!   whose prefix is malformed.
//! * Receive-side CRs lose their `user_ctx`: it is the user_ctx of whichever recv WR the
//!   loopback consumed, which depends on the interleaving of requests (the recv WRs themselves
//!   are compared in the `rq:` stream).
//! * The loopback's `poll` lines are dropped (poll timing is the harness's), the `wake` section
//!   records what the poller handed to the library and what it returned.

use std::collections::BTreeMap;

use serde_json::Value;

use super::record::{level_name, ud};

/// The normalised trace: named sections of lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Normalised {
    pub sections: BTreeMap<String, Vec<String>>,
}

/// Section order in the rendered text.
const ORDER: &[&str] = &["api", "notify", "wake", "urma", "data", "log", "note"];

impl Normalised {
    /// The text compared between implementations.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for n in self.ordered_names() {
            out.push_str(&format!("## {n}\n"));
            for l in &self.sections[n] {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    /// The sections of a text made by [`Normalised::render`] (its inverse).
    pub fn parse(text: &str) -> Normalised {
        let mut n = Normalised::default();
        let mut cur: Option<String> = None;
        for l in text.lines() {
            if let Some(name) = l.strip_prefix("## ") {
                n.sections.entry(name.to_string()).or_default();
                cur = Some(name.to_string());
            } else if let Some(c) = &cur {
                n.sections.entry(c.clone()).or_default().push(l.to_string());
            }
        }
        n
    }

    /// The section names in rendering order (api first, note last).
    pub fn ordered_names(&self) -> Vec<&String> {
        let mut names: Vec<&String> = self.sections.keys().collect();
        names.sort_by_key(|n| {
            let base = n.split(':').next().unwrap_or(n);
            // `api:recv` before `api:send`, every api section before the notify ones.
            (
                ORDER.iter().position(|o| *o == base).unwrap_or(99),
                n.to_string(),
            )
        });
        names
    }

    /// Sections whose text differs from `other`'s.
    pub fn differing_sections(&self, other: &Normalised) -> Vec<String> {
        let mut keys: Vec<&String> = self.sections.keys().chain(other.sections.keys()).collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .filter(|k| self.sections.get(*k) != other.sections.get(*k))
            .cloned()
            .collect()
    }
}

fn s(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::String(x)) => x.clone(),
        Some(Value::Null) | None => "null".into(),
        Some(x) => x.to_string(),
    }
}

fn hexv(v: &Value, k: &str) -> Option<u64> {
    v.get(k)
        .and_then(|x| x.as_str())
        .and_then(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).ok())
}

fn sges(v: &Value, k: &str) -> String {
    let Some(a) = v.get(k).and_then(|x| x.as_array()) else {
        return "-".into();
    };
    let items: Vec<String> = a
        .iter()
        .map(|e| {
            // A zero-length SGE's address is not used; only its segment is compared.
            if e.get("len").and_then(|x| x.as_u64()) == Some(0) {
                format!("{}/0", s(e, "seg"))
            } else {
                format!("{}+{}/{}", s(e, "seg"), s(e, "off"), s(e, "len"))
            }
        })
        .collect();
    format!("[{}]", items.join(","))
}

fn rid_key(v: u64) -> String {
    format!("req:0x{:x}", v & ((1u64 << 60) - 1))
}

/// Normalises one loopback trace line: `(stream key, text)`, or None to drop it.
pub fn urma_line(raw: &Value) -> Option<(String, String)> {
    let ev = raw.get("ev")?.as_str()?;
    match ev {
        "post_send" => {
            let uc = hexv(raw, "user_ctx").unwrap_or(0);
            let imm = hexv(raw, "imm").map(ud).unwrap_or_else(|| "-".into());
            Some((
                rid_key(uc),
                format!(
                    "post_send q={} {} flags=0x{:x} uctx={} target={} imm={} src={} dst={} ret={}",
                    s(raw, "q"),
                    s(raw, "op"),
                    raw.get("flags").and_then(|x| x.as_u64()).unwrap_or(0),
                    ud(uc),
                    s(raw, "target"),
                    imm,
                    sges(raw, "src"),
                    sges(raw, "dst"),
                    s(raw, "ret")
                ),
            ))
        }
        "post_recv" => Some((
            format!("rq:{}", s(raw, "q")),
            format!(
                "post_recv q={} uctx=0x{:x} sge={} ret={}",
                s(raw, "q"),
                hexv(raw, "user_ctx").unwrap_or(0),
                sges(raw, "sge"),
                s(raw, "ret")
            ),
        )),
        "cr" => {
            let s_r = raw.get("s_r").and_then(|x| x.as_u64()).unwrap_or(0);
            if s_r == 1 {
                let imm = hexv(raw, "imm").unwrap_or(0);
                let d = (imm & !((1u64 << 60) - 1)) | crate::oracle::dec(imm & ((1u64 << 60) - 1));
                Some((
                    rid_key(d),
                    format!(
                        "cr recv jfc={} status={} opcode={} jetty={} len={} local={} remote={} imm={} fate={}",
                        s(raw, "jfc"),
                        s(raw, "status"),
                        s(raw, "opcode"),
                        s(raw, "jetty"),
                        s(raw, "len"),
                        s(raw, "local"),
                        s(raw, "remote"),
                        ud(imm),
                        s(raw, "fate")
                    ),
                ))
            } else {
                let uc = hexv(raw, "user_ctx").unwrap_or(0);
                Some((
                    rid_key(uc),
                    format!(
                        "cr send jfc={} status={} opcode={} jetty={} uctx={} len={} local={} fate={}",
                        s(raw, "jfc"),
                        s(raw, "status"),
                        s(raw, "opcode"),
                        s(raw, "jetty"),
                        ud(uc),
                        s(raw, "len"),
                        s(raw, "local"),
                        s(raw, "fate")
                    ),
                ))
            }
        }
        _ => None,
    }
}

/// Stream key of a line recorded by the interposition layer (`"at_poll": true`): its `cr` lines
/// are written when the CR is polled, so against the request's posts they interleave as the
/// pollers ran. A request's posts, its send-side CRs and its receive-side CRs are then three
/// streams (`/post`, `/cr-send`, `/cr-recv`), each in its own, deterministic, order.
fn at_poll_key(key: String, raw: &Value) -> String {
    if !key.starts_with("req:") {
        return key;
    }
    let sub = match (
        raw.get("ev").and_then(|x| x.as_str()),
        raw.get("s_r").and_then(|x| x.as_u64()),
    ) {
        (Some("cr"), Some(1)) => "cr-recv",
        (Some("cr"), _) => "cr-send",
        _ => "post",
    };
    format!("{key}/{sub}")
}

/// `uasid<n>:<id>` (an object of another process, as the loopback names it) -> `peer:<id>`.
fn peer_names(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find("uasid") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 5..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with(':') {
            out.push_str("peer:");
            rest = &after[digits + 1..];
        } else {
            out.push_str("uasid");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Normalises a raw trace. `lib_names` maps log slots to section names.
pub fn normalise(events: &[Value], lib_names: &[(u64, &str)]) -> Normalised {
    let mut n = Normalised::default();
    let mut streams: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut levels: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let mut malformed: BTreeMap<String, usize> = BTreeMap::new();
    for e in events {
        let k = e.get("k").and_then(|x| x.as_str()).unwrap_or("");
        // Events of a two-process run carry their process; its sections stay apart.
        let sec = |base: &str| match e.get("proc").and_then(|x| x.as_str()) {
            Some(p) => format!("{base}:{p}"),
            None => base.to_string(),
        };
        match k {
            "api" | "data" | "note" => n.sections.entry(sec(k)).or_default().push(s(e, "line")),
            "notify" => {
                let rid = e.get("rid").and_then(|x| x.as_u64()).unwrap_or(0);
                streams
                    .entry((sec("notify"), format!("req:0x{rid:x}")))
                    .or_default()
                    .push(s(e, "line"));
            }
            "wake" => {
                streams
                    .entry((sec("wake"), s(e, "key")))
                    .or_default()
                    .push(s(e, "line"));
            }
            "urma" => {
                if let Some(raw) = e.get("raw") {
                    if let Some((key, line)) = urma_line(raw) {
                        // Across processes a WR's CR comes with the peer's acknowledgement,
                        // after later posts of the same queue or before them: as for the
                        // layer's lines, posts and CRs are streams of their own.
                        let key = if e.get("at_poll") == Some(&Value::Bool(true))
                            || e.get("proc").is_some()
                        {
                            at_poll_key(key, raw)
                        } else {
                            key
                        };
                        // The other process's objects are named by its uasid, which the
                        // provider hands out per run.
                        let line = if e.get("proc").is_some() {
                            peer_names(&line)
                        } else {
                            line
                        };
                        streams.entry((sec("urma"), key)).or_default().push(line);
                    }
                }
            }
            "log" => {
                let slot = e.get("lib").and_then(|x| x.as_u64()).unwrap_or(0);
                let name = lib_names
                    .iter()
                    .find(|(s, _)| *s == slot)
                    .map(|(_, n)| *n)
                    .unwrap_or("lib");
                let sec = if lib_names.len() > 1 {
                    sec(&format!("log:{name}"))
                } else {
                    sec("log")
                };
                let lvl = e.get("level").and_then(|x| x.as_i64()).unwrap_or(0);
                *levels
                    .entry(sec.clone())
                    .or_default()
                    .entry(level_name(lvl))
                    .or_default() += 1;
                if e.get("ok").and_then(|x| x.as_bool()) == Some(false) {
                    *malformed.entry(sec).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    for ((sec, key), lines) in streams {
        let v = n.sections.entry(sec).or_default();
        let mut i = 0;
        while i < lines.len() {
            let mut j = i + 1;
            while j < lines.len() && lines[j] == lines[i] {
                j += 1;
            }
            if j - i > 1 {
                v.push(format!("{key} | {} (x{})", lines[i], j - i));
            } else {
                v.push(format!("{key} | {}", lines[i]));
            }
            i = j;
        }
    }
    for (sec, m) in levels {
        let v = n.sections.entry(sec.clone()).or_default();
        let present: Vec<&str> = m.keys().map(String::as_str).collect();
        v.push(format!("levels present: {}", present.join(" ")));
        for (lvl, c) in &m {
            if lvl == "WARN" || lvl == "ERROR" {
                v.push(format!("{lvl} x{c}"));
            }
        }
        if let Some(bad) = malformed.get(&sec) {
            v.push(format!("malformed prefix x{bad}"));
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn streams_are_canonical_and_ordered_inside() {
        let a = vec![
            json!({"k":"notify","rid":2,"line":"b0"}),
            json!({"k":"notify","rid":1,"line":"a0"}),
            json!({"k":"notify","rid":2,"line":"b1"}),
            json!({"k":"log","lib":0,"level":65280,"ok":true}),
        ];
        let b = vec![
            json!({"k":"notify","rid":1,"line":"a0"}),
            json!({"k":"log","lib":0,"level":65280,"ok":true}),
            json!({"k":"notify","rid":2,"line":"b0"}),
            json!({"k":"notify","rid":2,"line":"b1"}),
        ];
        let na = normalise(&a, &[(0, "x")]);
        assert_eq!(na, normalise(&b, &[(0, "x")]));
        let c = vec![
            json!({"k":"notify","rid":2,"line":"b1"}),
            json!({"k":"notify","rid":2,"line":"b0"}),
        ];
        assert_ne!(normalise(&c, &[]), normalise(&a[..3], &[]));
        assert!(na.render().contains("## log\nlevels present: INFO\n"));
        assert_eq!(Normalised::parse(&na.render()), na);
    }

    #[test]
    fn urma_lines_key_by_request() {
        let w = json!({"ev":"post_send","q":"jfs1","op":"WRITE","opcode":0,"flags":32,"user_ctx":"0x300000123456789a","target":"tjetty1","imm":null,"src":[{"seg":"seg1","off":2097152,"len":5}],"dst":[{"seg":"seg3","off":2097152,"len":5}],"ret":0});
        let (k, l) = urma_line(&w).unwrap();
        assert_eq!(k, "req:0x123456789a");
        assert!(l.contains("src=[seg1+2097152/5]"), "{l}");
        let r = json!({"ev":"cr","jfc":"jfc1","s_r":1,"status":0,"opcode":1,"jetty":1,"user_ctx":"0x0000000000000005","len":0,"local":"jetty1","remote":"jfs1","imm":"0x0abcde0000012345","fate":"deliver"});
        let (k, l) = urma_line(&r).unwrap();
        assert_eq!(k, "req:0xabcde12345");
        assert!(!l.contains("uctx"));
        assert!(urma_line(&json!({"ev":"poll"})).is_none());
    }

    #[test]
    fn other_processes_objects_lose_their_uasid() {
        assert_eq!(
            peer_names("local=jetty1 remote=uasid3:2 x=uasid q=uasid7"),
            "local=jetty1 remote=peer:2 x=uasid q=uasid7"
        );
    }

    #[test]
    fn processes_of_a_split_run_keep_their_own_sections() {
        let a = vec![
            json!({"k":"api","line":"init","proc":"recv"}),
            json!({"k":"api","line":"init","proc":"send"}),
            json!({"k":"notify","rid":1,"line":"n","proc":"recv"}),
            json!({"k":"log","lib":0,"level":65280,"ok":true,"proc":"send"}),
        ];
        let n = normalise(&a, &[(0, "x")]);
        let keys: Vec<&str> = n.sections.keys().map(String::as_str).collect();
        assert_eq!(keys, ["api:recv", "api:send", "log:send", "notify:recv"]);
        // The order in which the two processes' events were concatenated does not matter.
        let mut b = a.clone();
        b.swap(0, 1);
        assert_eq!(normalise(&b, &[(0, "x")]), n);
        assert!(n
            .render()
            .contains("## api:recv\ninit\n## api:send\ninit\n"));
    }

    #[test]
    fn layer_lines_split_posts_from_crs() {
        let post = json!({"ev":"post_send","q":"jfs1","op":"WRITE","opcode":0,"flags":32,"user_ctx":"0x0000000000000007","target":"tjetty1","imm":null,"src":[],"dst":[],"ret":0});
        let cr = json!({"ev":"cr","jfc":"jfc2","s_r":0,"status":0,"opcode":0,"jetty":0,"user_ctx":"0x0000000000000007","len":0,"local":"jfs1","remote":null,"imm":null,"fate":"deliver"});
        let raw = |v: &Value| json!({"k":"urma","raw":v,"at_poll":true});
        // The CR polled before or after a later post of the same request: same text.
        let a = normalise(&[raw(&post), raw(&cr), raw(&post)], &[]);
        let b = normalise(&[raw(&post), raw(&post), raw(&cr)], &[]);
        assert_eq!(a, b);
        assert!(
            a.render().contains("req:0x7/cr-send | cr send"),
            "{}",
            a.render()
        );
        // The loopback's lines (generation order) keep one stream per request.
        let c = normalise(
            &[json!({"k":"urma","raw":post}), json!({"k":"urma","raw":cr})],
            &[],
        );
        let d = normalise(
            &[json!({"k":"urma","raw":cr}), json!({"k":"urma","raw":post})],
            &[],
        );
        assert_ne!(c, d);
    }
}
