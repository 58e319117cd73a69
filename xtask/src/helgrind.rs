//! Reading a Helgrind log (`valgrind --tool=helgrind`, after suppressions).
//!
//! Helgrind prints each error context after a separator line `==PID== ------…`; a context ends
//! at the next separator, a thread announcement or the summary. A context is ours when a frame of
//! the library (`os_transport::`) appears before its `Address 0x…` description, i.e. in the stack
//! of the access or of the conflicting access, not only in the allocation stack.

use std::collections::BTreeMap;

/// What the log says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Error contexts left after suppressions.
    pub contexts: usize,
    /// Contexts with an `os_transport::` frame in the access or the conflicting access stack.
    pub ours: usize,
    /// `os_transport::… (file.rs:N)` frames on the first lines of "Possible data race" reports,
    /// with how often each appears.
    pub race_frames: BTreeMap<String, usize>,
    /// The `ERROR SUMMARY` line.
    pub summary: Option<String>,
    /// Whether the replay ran to its end ("replayed … inputs, teardown ok").
    pub finished: bool,
}

/// The text after Valgrind's `==PID== ` prefix, if the line has one.
fn body(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("==")?;
    let (pid, text) = rest.split_once("== ").or_else(|| {
        // a bare separator or empty line: `==PID==`
        rest.strip_suffix("==").map(|p| (p, ""))
    })?;
    pid.bytes().all(|b| b.is_ascii_digit()).then_some(text)
}

fn is_separator(line: &str) -> bool {
    body(line).is_some_and(|t| t.len() >= 10 && t.bytes().all(|b| b == b'-'))
}

/// The first `os_transport::path::name (file.rs:N)` frame in `line`.
fn frame(line: &str) -> Option<String> {
    let start = line.find("os_transport::")?;
    let rest = &line[start..];
    let open = rest.find(" (")?;
    let close = rest[open..].find(')')? + open;
    let loc = &rest[open + 2..close];
    loc.contains(".rs:").then(|| rest[..=close].to_string())
}

/// Parses a Helgrind log.
pub fn parse(log: &str) -> Report {
    let mut r = Report::default();
    let (mut in_ctx, mut hit, mut stop) = (false, false, false);
    let flush = |in_ctx: &mut bool, hit: &mut bool, stop: &mut bool, r: &mut Report| {
        if *in_ctx && *hit {
            r.ours += 1;
        }
        *in_ctx = false;
        *hit = false;
        *stop = false;
    };
    let lines: Vec<&str> = log.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.contains("replayed ") && line.contains(" inputs, teardown ok") {
            r.finished = true;
        }
        if line.contains("ERROR SUMMARY") {
            r.summary = Some(line.to_string());
        }
        if line.contains("Possible data race") {
            for l in lines.iter().skip(i + 1).take(3) {
                if let Some(f) = frame(l) {
                    *r.race_frames.entry(f).or_default() += 1;
                }
            }
        }
        if is_separator(line) {
            r.contexts += 1;
            flush(&mut in_ctx, &mut hit, &mut stop, &mut r);
            in_ctx = true;
            continue;
        }
        if line.contains("---Thread-Announcement")
            || line.contains("ERROR SUMMARY")
            || line.contains("For lists of detected")
        {
            flush(&mut in_ctx, &mut hit, &mut stop, &mut r);
            continue;
        }
        if in_ctx && line.contains("Address 0x") {
            stop = true;
        }
        if in_ctx && !stop && line.contains("os_transport::") {
            hit = true;
        }
    }
    flush(&mut in_ctx, &mut hit, &mut stop, &mut r);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
==7== ---Thread-Announcement------------------------------------------
==7== Thread #2 was created
==7== ----------------------------------------------------------------
==7== Possible data race during read of size 8 at 0x10 by thread #2
==7==    at 0x1: os_transport::pool::Pool::take (pool.rs:41)
==7==    by 0x2: start_thread (pthread_create.c:442)
==7==  Address 0x10 is 0 bytes inside a block of size 64 alloc'd
==7==    at 0x3: malloc (vg_replace_malloc.c:1)
==7== ----------------------------------------------------------------
==7== Possible data race during write of size 4 at 0x20 by thread #3
==7==    at 0x4: memcpy (string.c:1)
==7==    by 0x9: start_thread (pthread_create.c:442)
==7==  Address 0x20 is 0 bytes inside a block of size 8 alloc'd
==7==    at 0x5: os_transport::table::Table::grow (table.rs:9)
==7== 
replayed 12 inputs, teardown ok
==7== ERROR SUMMARY: 2 errors from 2 contexts (suppressed: 5 from 5)
";

    #[test]
    fn counts_contexts_and_ours_only_before_the_address() {
        let r = parse(LOG);
        assert_eq!(r.contexts, 2);
        // The second context has our frame only in the allocation stack.
        assert_eq!(r.ours, 1);
        assert!(r.finished);
        assert_eq!(
            r.summary.as_deref(),
            Some("==7== ERROR SUMMARY: 2 errors from 2 contexts (suppressed: 5 from 5)")
        );
        assert_eq!(
            r.race_frames.into_iter().collect::<Vec<_>>(),
            vec![("os_transport::pool::Pool::take (pool.rs:41)".to_string(), 1)]
        );
    }

    #[test]
    fn an_unfinished_clean_log() {
        let r = parse("==1== ERROR SUMMARY: 0 errors from 0 contexts\n");
        assert_eq!((r.contexts, r.ours, r.finished), (0, 0, false));
    }
}
