//! What the libraries were actually handed: the CRs of a run's `wake` events (each CR the
//! pollers or the scenario passed to `os_transport_wake_up_task`, with its status and the value
//! returned), and the evidence the ledger's `received` predicates match on.
//!
//! Over a provider the harness does not control (hardware mode), error CRs are not only the
//! faults a scenario injects: the provider makes its own (receiver-not-ready retries exhausted,
//! flushes after an error), whenever its transport does. A difference between the libraries is
//! then attributed to the ledger entry for error CRs (D3) from what the traces show the two
//! libraries received, whoever made the CR; see [`evidence`] for the rule.
//!
//! The `wake` events are the evidence rather than the interposition layer's `poll` lines (which
//! carry the same status per CR): a CR polled and held by the harness but never handed over
//! (`undelivered`) reached the application, not the library.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Evidence name: both libraries were handed the same error CR at the same point of a request.
pub const ERROR_CR: &str = "error_cr";

/// Every evidence name [`evidence`] gives (the names a ledger entry's `received` may use).
pub const NAMES: &[&str] = &[ERROR_CR];

/// One CR handed to `os_transport_wake_up_task`, read from a `wake` event of a raw trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handed {
    /// The stream it belongs to: the request key of the event, after the process of a
    /// two-process run (`recv/req:0x41`).
    pub stream: String,
    /// The CR as recorded: side, opcode, status, `user_ctx` or decoded immediate (after the
    /// library's tag when a run uses two libraries).
    pub cr: String,
    /// Its status (0 = `URMA_CR_SUCCESS`).
    pub status: i64,
    /// What `os_transport_wake_up_task` returned.
    pub ret: String,
}

/// Reads one `wake` line, `[<tag>] wake <side> opc=N status=N ... -> R`; None for the other
/// kinds (`undelivered ...`: held and never handed over) and for a line that does not read.
fn parse(line: &str) -> Option<(String, i64, String)> {
    let body = match line.strip_prefix('[') {
        Some(rest) => rest.split_once("] ")?.1,
        None => line,
    };
    let (cr, ret) = body.strip_prefix("wake ")?.rsplit_once(" -> ")?;
    let status = cr
        .split_whitespace()
        .find_map(|w| w.strip_prefix("status="))?
        .parse()
        .ok()?;
    let tag = &line[..line.len() - body.len()];
    Some((format!("{tag}{cr}"), status, ret.to_string()))
}

/// The CRs a run's library (or libraries) were handed, in the order the trace recorded them.
pub fn handed(events: &[Value]) -> Vec<Handed> {
    events
        .iter()
        .filter(|e| e.get("k").and_then(Value::as_str) == Some("wake"))
        .filter_map(|e| {
            let (cr, status, ret) = parse(e.get("line")?.as_str()?)?;
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let stream = match e.get("proc").and_then(Value::as_str) {
                Some(p) => format!("{p}/{key}"),
                None => key.to_string(),
            };
            Some(Handed {
                stream,
                cr,
                status,
                ret,
            })
        })
        .collect()
}

fn by_stream(h: Vec<Handed>) -> BTreeMap<String, Vec<Handed>> {
    let mut m: BTreeMap<String, Vec<Handed>> = BTreeMap::new();
    for x in h {
        m.entry(x.stream.clone()).or_default().push(x);
    }
    m
}

/// The first error CR that both runs were handed at the same point of the same request: in
/// some request stream, the first CR with a non-success status is the same CR (side, opcode,
/// status, `user_ctx` / immediate) in both traces, and every CR handed over before it in that
/// stream is the same with the same return value. From that CR on the libraries met the same
/// error and may react as the ledger documents; before it they behaved alike. None when no such
/// CR exists: no error CR was handed over, only one library got it, or the two got it at
/// different points (then the difference did not start at an error CR).
pub fn common_error_cr(legacy: &[Value], rust: &[Value]) -> Option<Handed> {
    let l = by_stream(handed(legacy));
    let r = by_stream(handed(rust));
    l.iter().find_map(|(stream, ls)| {
        let rs = r.get(stream)?;
        let i = ls.iter().position(|h| h.status != 0)?;
        let j = rs.iter().position(|h| h.status != 0)?;
        (i == j && ls[i].cr == rs[i].cr && ls[..i] == rs[..i]).then(|| ls[i].clone())
    })
}

/// The evidence names the two runs' traces give ([`NAMES`]): [`ERROR_CR`] when they have a
/// [`common_error_cr`].
pub fn evidence(legacy: &[Value], rust: &[Value]) -> BTreeSet<String> {
    let mut s = BTreeSet::new();
    if common_error_cr(legacy, rust).is_some() {
        s.insert(ERROR_CR.to_string());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wake(key: &str, line: &str) -> Value {
        json!({"k": "wake", "key": key, "line": line})
    }

    #[test]
    fn wake_lines_read_with_tags_processes_and_undelivered() {
        let ev = vec![
            json!({"k": "api", "line": "send(..) = 0"}),
            wake(
                "req:0x40",
                "wake send opc=0 status=10 uctx={rid=0x40,t=0,id=7} -> 0",
            ),
            wake(
                "req:0x41",
                "[recv-lib] wake recv opc=1 status=0 imm={rid=0x41,t=0,id=0} -> -1",
            ),
            wake(
                "req:0x41",
                "undelivered recv opc=1 status=9 imm={rid=0x41,t=0,id=1}",
            ),
            json!({"k": "wake", "key": "req:0x41", "proc": "recv",
                   "line": "wake recv opc=1 status=0 imm={rid=0x41,t=1,id=1} -> 0"}),
        ];
        let h = handed(&ev);
        assert_eq!(h.len(), 3, "{h:?}");
        assert_eq!(
            h[0],
            Handed {
                stream: "req:0x40".into(),
                cr: "send opc=0 status=10 uctx={rid=0x40,t=0,id=7}".into(),
                status: 10,
                ret: "0".into(),
            }
        );
        assert_eq!(
            h[1].cr,
            "[recv-lib] recv opc=1 status=0 imm={rid=0x41,t=0,id=0}"
        );
        assert_eq!((h[1].status, h[1].ret.as_str()), (0, "-1"));
        assert_eq!(h[2].stream, "recv/req:0x41");
    }

    /// The send side of `recv-post-fail` over a provider without RNR retries, as recorded: both
    /// libraries are handed the RNR error CR (status 10) of SEND_IMM 0; legacy goes on, Rust
    /// failed the send and finds no request for WRITE 1's CR.
    fn rnr_run(rust: bool) -> Vec<Value> {
        let k = "req:0x40";
        let mut v = vec![
            wake(k, "wake send opc=0 status=0 uctx={rid=0x40,t=0,id=0} -> 0"),
            wake(k, "wake send opc=0 status=10 uctx={rid=0x40,t=0,id=7} -> 0"),
        ];
        if rust {
            v.push(wake(
                k,
                "wake send opc=0 status=0 uctx={rid=0x40,t=0,id=1} -> -1",
            ));
        } else {
            v.push(wake(
                k,
                "wake send opc=0 status=0 uctx={rid=0x40,t=0,id=1} -> 0",
            ));
            v.push(wake(
                k,
                "wake send opc=0 status=10 uctx={rid=0x40,t=0,id=7} -> 0",
            ));
        }
        v
    }

    #[test]
    fn an_error_cr_both_libraries_met_at_the_same_point_is_evidence() {
        let c = common_error_cr(&rnr_run(false), &rnr_run(true)).expect("common error CR");
        assert_eq!(c.cr, "send opc=0 status=10 uctx={rid=0x40,t=0,id=7}");
        assert_eq!(
            evidence(&rnr_run(false), &rnr_run(true)),
            BTreeSet::from([ERROR_CR.to_string()])
        );
        // Its return value may differ (D16: -1 where Rust matched no request).
        let mut r = rnr_run(true);
        r[1] = wake(
            "req:0x40",
            "wake send opc=0 status=10 uctx={rid=0x40,t=0,id=7} -> -1",
        );
        assert!(common_error_cr(&rnr_run(false), &r).is_some());
    }

    #[test]
    fn no_evidence_unless_both_met_the_same_error_cr_after_the_same_crs() {
        let ok = |v: Vec<Value>| -> Vec<Value> {
            v.into_iter()
                .map(|mut e| {
                    let l = e["line"].as_str().unwrap().replace("status=10", "status=0");
                    e["line"] = Value::String(l);
                    e
                })
                .collect()
        };
        // No error CR at all.
        assert!(evidence(&ok(rnr_run(false)), &ok(rnr_run(true))).is_empty());
        // Only one library was handed one.
        assert!(evidence(&rnr_run(false), &ok(rnr_run(true))).is_empty());
        assert!(evidence(&ok(rnr_run(false)), &rnr_run(true)).is_empty());
        // Another error CR (other status, other WR).
        let mut r = rnr_run(true);
        r[1] = wake(
            "req:0x40",
            "wake send opc=0 status=11 uctx={rid=0x40,t=0,id=7} -> 0",
        );
        assert!(evidence(&rnr_run(false), &r).is_empty());
        // The libraries already differed before it (another return value).
        let mut r = rnr_run(true);
        r[0] = wake(
            "req:0x40",
            "wake send opc=0 status=0 uctx={rid=0x40,t=0,id=0} -> -1",
        );
        assert!(evidence(&rnr_run(false), &r).is_empty());
        // At a different point: one more CR before it on one side.
        let mut r = rnr_run(true);
        r.insert(
            0,
            wake(
                "req:0x40",
                "wake send opc=0 status=0 uctx={rid=0x40,t=0,id=0} -> 0",
            ),
        );
        assert!(evidence(&rnr_run(false), &r).is_empty());
        // In another request's stream.
        let mut r = rnr_run(true);
        r[1]["key"] = Value::String("req:0x42".into());
        assert!(evidence(&rnr_run(false), &r).is_empty());
        // Held and never handed over: the library did not receive it.
        let mut l = rnr_run(false);
        let mut r = rnr_run(true);
        for v in [&mut l, &mut r] {
            v[1] = wake(
                "req:0x40",
                "undelivered send opc=0 status=10 uctx={rid=0x40,t=0,id=7}",
            );
        }
        assert!(evidence(&l, &r).is_empty());
    }
}
