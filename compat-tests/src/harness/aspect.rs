//! The aspects of a comparison: what the project promises to keep identical, each judged on its
//! own (`same`, `differs as documented (Dn)`, `FAIL`) so a reader sees at once which part of the
//! behaviour differs and why.
//!
//! Every line of a normalised trace ([`Normalised`]) belongs to exactly one aspect
//! ([`Aspect::of`]); an API call whose result is a completion (a wait, a `wake_up_task` of bad
//! inputs) or a cancellation (`cancel_tasks`, `destroy`) also leaves its call, without the
//! result, in [`Aspect::Api`], so the order of the calls is judged there and their results
//! under their own aspect. [`project`] cuts a trace into its aspects; [`differing`] names the
//! aspects in which two traces differ. The ledger's entries say which aspects they may explain
//! (`aspects` in `compat-tests/ledger.json`).

use std::collections::BTreeMap;

use super::normalise::Normalised;

/// One aspect of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Aspect {
    /// The URMA work requests and completions: opcodes, flags, `user_ctx` (the user_data
    /// encoding), immediates, SGEs, post results, receive WRs, CRs (the `urma` section).
    Wire,
    /// The `notify_callback` invocations: which chunks, in which order, what they returned.
    Delivery,
    /// What `os_transport_wake_up_task` returned for each CR, the waits' results and their
    /// timing class (returned, timed out, still blocked).
    Completion,
    /// `os_transport_cancel_tasks` and `os_transport_destroy` results.
    Cancel,
    /// The calls made, in order, and the results of `init`, `reg_jfc`, `send`, `recv`, `log_reg`.
    Api,
    /// The byte-for-byte check of each transfer's destination.
    Data,
    /// Log levels, WARN/ERROR counts, malformed prefixes.
    Log,
}

impl Aspect {
    /// Every aspect, in report order.
    pub const ALL: [Aspect; 7] = [
        Aspect::Wire,
        Aspect::Delivery,
        Aspect::Completion,
        Aspect::Cancel,
        Aspect::Api,
        Aspect::Data,
        Aspect::Log,
    ];

    /// The key used in the ledger (`aspects`), `report.json`, the page's filters and JUnit.
    pub fn key(self) -> &'static str {
        match self {
            Aspect::Wire => "wire",
            Aspect::Delivery => "delivery",
            Aspect::Completion => "completion",
            Aspect::Cancel => "cancel",
            Aspect::Api => "api",
            Aspect::Data => "data",
            Aspect::Log => "log",
        }
    }

    /// The aspect of a key.
    pub fn from_key(k: &str) -> Option<Aspect> {
        Aspect::ALL.into_iter().find(|a| a.key() == k)
    }

    /// The column title.
    pub fn title(self) -> &'static str {
        match self {
            Aspect::Wire => "wire",
            Aspect::Delivery => "chunk delivery",
            Aspect::Completion => "completion",
            Aspect::Cancel => "cancel / destroy",
            Aspect::Api => "API results",
            Aspect::Data => "data",
            Aspect::Log => "logs",
        }
    }

    /// What the aspect compares, in one line.
    pub fn about(self) -> &'static str {
        match self {
            Aspect::Wire => {
                "WRs posted (opcode, flags, user_ctx = the user_data encoding, immediate, SGEs, \
                 post result) per request, i.e. the chunk sequence on the wire; receive WRs; CRs"
            }
            Aspect::Delivery => {
                "notify_callback invocations: which chunks, in which order, with what return value"
            }
            Aspect::Completion => {
                "wake_up_task results per CR; wait results, status and timing class \
                 (returned, timed out = 1, still blocked)"
            }
            Aspect::Cancel => "cancel_tasks and destroy results",
            Aspect::Api => {
                "the calls made, in order, and the results of init, reg_jfc, send, recv, log_reg"
            }
            Aspect::Data => "destination bytes checked against the source, and the byte after",
            Aspect::Log => "log levels present, WARN and ERROR counts, malformed prefixes",
        }
    }

    /// The aspect of one line of section `section` (`api`, `urma`, `note:recv`, ...) of a
    /// normalised trace. Notes carry their aspect as a `[key] ` prefix ([`note_line`]).
    pub fn of(section: &str, line: &str) -> Aspect {
        match section.split(':').next().unwrap_or(section) {
            "urma" => Aspect::Wire,
            "notify" => Aspect::Delivery,
            "wake" => Aspect::Completion,
            "data" => Aspect::Data,
            "log" => Aspect::Log,
            "note" => line
                .strip_prefix('[')
                .and_then(|r| r.split_once("] "))
                .and_then(|(k, _)| Aspect::from_key(k))
                .unwrap_or(Aspect::Api),
            _ => api_call(line).0,
        }
    }
}

/// The text of a note recorded for `aspect` (`[wire] send WRs posted ...`).
pub fn note_line(aspect: Aspect, text: &str) -> String {
    format!("[{}] {text}", aspect.key())
}

/// An API line's aspect and, for a call judged elsewhere, the call without its result (kept
/// in [`Aspect::Api`] for the order of calls).
fn api_call(line: &str) -> (Aspect, Option<&str>) {
    let call = line.split(" = ").next().unwrap_or(line);
    let call = call.split(" still blocked").next().unwrap_or(call);
    // `[waiter] f(...)`, `[send-lib] f(...)`: the tags, then the function.
    let mut f = call;
    while let Some(rest) = f.strip_prefix('[').and_then(|r| r.split_once("] ")) {
        f = rest.1;
    }
    if f.starts_with("wait_and_free_sync") || f.starts_with("wake_up_task(") {
        (Aspect::Completion, Some(call))
    } else if f.starts_with("cancel_tasks(") || f.starts_with("destroy(") {
        (Aspect::Cancel, Some(call))
    } else {
        (Aspect::Api, None)
    }
}

/// The lines of each aspect of `n`, each prefixed by its section (`api | ...`), in section
/// order and, inside a section, in trace order. Every aspect has an entry.
pub fn project(n: &Normalised) -> BTreeMap<Aspect, Vec<String>> {
    let mut out: BTreeMap<Aspect, Vec<String>> =
        Aspect::ALL.into_iter().map(|a| (a, Vec::new())).collect();
    for (sec, lines) in &n.sections {
        for l in lines {
            let a = Aspect::of(sec, l);
            if sec.split(':').next() == Some("api") {
                if let (_, Some(call)) = api_call(l) {
                    out.entry(Aspect::Api)
                        .or_default()
                        .push(format!("{sec} | {call}"));
                }
            }
            out.entry(a).or_default().push(format!("{sec} | {l}"));
        }
    }
    out
}

/// The aspects in which `a` and `b` differ, in report order.
pub fn differing(a: &Normalised, b: &Normalised) -> Vec<Aspect> {
    let (pa, pb) = (project(a), project(b));
    Aspect::ALL
        .into_iter()
        .filter(|x| pa.get(x) != pb.get(x))
        .collect()
}

/// The verdict of one aspect of a compared scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AspectVerdict {
    /// Identical on both libraries.
    Same,
    /// Different, explained by these ledger entries.
    Differs(Vec<String>),
    /// Different, and no applicable ledger entry explains it.
    Fail,
}

impl AspectVerdict {
    /// The word of `report.json` and the page: `same`, `differs`, `FAIL`.
    pub fn word(&self) -> &'static str {
        match self {
            AspectVerdict::Same => "same",
            AspectVerdict::Differs(_) => "differs",
            AspectVerdict::Fail => "FAIL",
        }
    }

    /// The ledger entries that explain it (empty unless [`AspectVerdict::Differs`]).
    pub fn entries(&self) -> &[String] {
        match self {
            AspectVerdict::Differs(v) => v,
            _ => &[],
        }
    }

    /// `same`, `differs as documented (D1, D13)`, `FAIL (undocumented difference)`.
    pub fn text(&self) -> String {
        match self {
            AspectVerdict::Same => "same".into(),
            AspectVerdict::Differs(v) => format!("differs as documented ({})", v.join(", ")),
            AspectVerdict::Fail => "FAIL (undocumented difference)".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(secs: &[(&str, &[&str])]) -> Normalised {
        Normalised {
            sections: secs
                .iter()
                .map(|(s, l)| (s.to_string(), l.iter().map(|x| x.to_string()).collect()))
                .collect(),
        }
    }

    #[test]
    fn every_section_has_its_aspect() {
        assert_eq!(Aspect::of("urma:send", "x"), Aspect::Wire);
        assert_eq!(Aspect::of("notify", "x"), Aspect::Delivery);
        assert_eq!(Aspect::of("wake", "x"), Aspect::Completion);
        assert_eq!(Aspect::of("data", "x"), Aspect::Data);
        assert_eq!(Aspect::of("log", "x"), Aspect::Log);
        assert_eq!(Aspect::of("api", "send(H, ..) = 0 sync=S1"), Aspect::Api);
        assert_eq!(
            Aspect::of(
                "api",
                "wait_and_free_sync_timeout(.., 30 ms)(H, S1) = 1 status=0"
            ),
            Aspect::Completion
        );
        assert_eq!(
            Aspect::of(
                "api",
                "[waiter] wait_and_free_sync(H, S1) still blocked 500 ms after destroy"
            ),
            Aspect::Completion
        );
        assert_eq!(
            Aspect::of("api:send", "[send-lib] destroy(H) = 0"),
            Aspect::Cancel
        );
        assert_eq!(
            Aspect::of("api", "cancel_tasks(H, NULL, 0xe1) = 0 *sync=-"),
            Aspect::Cancel
        );
        assert_eq!(
            Aspect::of("api", "wake_up_task(H, NULL) = -1"),
            Aspect::Completion
        );
        assert_eq!(
            Aspect::of("note", &note_line(Aspect::Wire, "send WRs posted: 3")),
            Aspect::Wire
        );
        for a in Aspect::ALL {
            assert_eq!(Aspect::from_key(a.key()), Some(a));
        }
    }

    #[test]
    fn a_wait_result_differs_in_completion_only_and_the_call_order_in_api() {
        let a = norm(&[(
            "api",
            &[
                "recv(H) = 0 sync=S1",
                "wait_and_free_sync(H, S1) = 1 status=0",
            ],
        )]);
        let b = norm(&[(
            "api",
            &[
                "recv(H) = 0 sync=S1",
                "wait_and_free_sync(H, S1) = ERR status=0",
            ],
        )]);
        assert_eq!(differing(&a, &b), vec![Aspect::Completion]);
        // The same calls in another order: the API aspect differs, the results do not.
        let c = norm(&[(
            "api",
            &[
                "wait_and_free_sync(H, S1) = 1 status=0",
                "recv(H) = 0 sync=S1",
            ],
        )]);
        assert_eq!(differing(&a, &c), vec![Aspect::Api]);
        assert!(differing(&a, &a).is_empty());
    }

    #[test]
    fn wire_and_log_are_apart() {
        let a = norm(&[
            ("urma", &["req:0x1 | post_send WRITE"]),
            ("log", &["WARN x1"]),
        ]);
        let b = norm(&[
            ("urma", &["req:0x1 | post_send WRITE"]),
            ("log", &["WARN x2"]),
        ]);
        assert_eq!(differing(&a, &b), vec![Aspect::Log]);
        let c = norm(&[("log", &["WARN x1"])]);
        assert_eq!(differing(&a, &c), vec![Aspect::Wire]);
    }
}
