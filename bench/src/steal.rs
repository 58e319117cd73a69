//! Host steal time of the guest, from the aggregate `cpu` line of `/proc/stat`: the time the
//! hypervisor kept the guest's virtual CPUs from running while they had work. Reported beside the
//! timed cells because a descheduled vCPU stalls the hand-off between the benchmark's threads for
//! milliseconds, which moves wall-clock numbers far more than the libraries do.
//! See docs/performance.md, "Host steal time".

/// Index of the steal counter on the `cpu` line (user nice system idle iowait irq softirq steal).
const STEAL: usize = 7;

/// The counters of the aggregate `cpu` line of `/proc/stat`, in USER_HZ ticks, in the kernel's
/// order: user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice (a kernel
/// gives as many as it knows; steal came with Linux 2.6.11).
#[derive(Clone, Debug, PartialEq)]
pub struct CpuTimes(pub Vec<u64>);

impl CpuTimes {
    /// The steal counter, `None` when the line has no steal field.
    pub fn steal(&self) -> Option<u64> {
        self.0.get(STEAL).copied()
    }

    /// user + nice + system + idle + iowait + irq + softirq + steal: all the time the CPUs were
    /// given or had stolen. guest and guest_nice are left out: the kernel already counts them in
    /// user and nice.
    fn total(&self) -> u64 {
        self.0.iter().take(STEAL + 1).sum()
    }
}

/// Parses the aggregate `cpu` line (the one labelled `cpu`, not `cpuN`) out of the text of
/// `/proc/stat`.
pub fn parse(stat: &str) -> Result<CpuTimes, String> {
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))
        .ok_or("no aggregate `cpu` line")?;
    let fields = line
        .split_whitespace()
        .skip(1)
        .map(|f| {
            f.parse::<u64>()
                .map_err(|e| format!("`cpu` line field {f:?}: {e}"))
        })
        .collect::<Result<Vec<u64>, String>>()?;
    if fields.len() < 4 {
        return Err(format!(
            "`cpu` line has {} fields, fewer than user nice system idle",
            fields.len()
        ));
    }
    Ok(CpuTimes(fields))
}

/// Reads the aggregate counters now.
pub fn read() -> Result<CpuTimes, String> {
    let text = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    parse(&text).map_err(|e| format!("/proc/stat: {e}"))
}

/// Steal from `before` (a [`read`]) until now.
pub fn since(before: Result<CpuTimes, String>) -> Result<Share, String> {
    let before = before?;
    Share::between(&before, &read()?)
}

/// Steal over an interval, in ticks, of all the time the guest's CPUs were given or had stolen.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Share {
    pub steal: u64,
    pub total: u64,
}

impl Share {
    /// The counters' change from `before` to `after`; an error when either has no steal field or a
    /// counter went backwards (it never does on a sane kernel, and then no share is meaningful).
    pub fn between(before: &CpuTimes, after: &CpuTimes) -> Result<Share, String> {
        let (Some(s0), Some(s1)) = (before.steal(), after.steal()) else {
            return Err(format!(
                "the `cpu` line of /proc/stat has no steal field ({} fields)",
                before.0.len().min(after.0.len())
            ));
        };
        match (
            s1.checked_sub(s0),
            after.total().checked_sub(before.total()),
        ) {
            (Some(steal), Some(total)) => Ok(Share { steal, total }),
            _ => Err("the /proc/stat counters went backwards".into()),
        }
    }

    /// Steal as a percentage of the total; `None` over an interval shorter than a tick.
    pub fn pct(&self) -> Option<f64> {
        (self.total > 0).then(|| self.steal as f64 * 100.0 / self.total as f64)
    }

    /// Both intervals together.
    pub fn add(self, o: Share) -> Share {
        Share {
            steal: self.steal + o.steal,
            total: self.total + o.total,
        }
    }
}

/// Above this share of the guest's CPU time taken by the host over the timed sections, the report
/// says that its wall-clock targets measured the host. A host with spare capacity gives a steal
/// near 0 %; the runs whose wall-clock ratios were unusable showed 20-40 %. 5 % is well clear of
/// the first and well below the second: a marker for the reader, not a calibrated bound.
pub const WARN_PCT: f64 = 5.0;

/// Steal over one timed section of a run.
pub struct Section {
    /// The section's name in the report.
    pub label: &'static str,
    pub share: Result<Share, String>,
}

/// Steal over all the timed sections together (the sum of their ticks); the first section's error
/// when none could be measured.
pub fn over_sections(sections: &[Section]) -> Result<Share, String> {
    let mut sum: Option<Share> = None;
    let mut err = None;
    for s in sections {
        match &s.share {
            Ok(sh) => sum = Some(sum.unwrap_or_default().add(*sh)),
            Err(e) => {
                err.get_or_insert_with(|| e.clone());
            }
        }
    }
    sum.ok_or_else(|| err.unwrap_or_else(|| "no timed section ran".into()))
}

fn fmt_pct(s: &Result<Share, String>) -> String {
    match s.as_ref().ok().and_then(Share::pct) {
        Some(p) => format!("{p:.1} %"),
        None => "n/a".into(),
    }
}

/// The report's line on steal: over the timed sections, each section, and the whole run.
pub fn line(sections: &[Section], run: &Result<Share, String>) -> String {
    let timed = over_sections(sections);
    if let Err(e) = &timed {
        return format!("host steal: not available ({e})");
    }
    let per: Vec<String> = sections
        .iter()
        .map(|s| format!("{} {}", s.label, fmt_pct(&s.share)))
        .collect();
    format!(
        "host steal during timed cells: {} (per section: {}; whole run, callgrind and allocation counts included: {})",
        fmt_pct(&timed),
        per.join(", "),
        fmt_pct(run)
    )
}

/// The sentence printed above the targets when the timed sections' steal exceeds [`WARN_PCT`].
pub fn warning(sections: &[Section]) -> Option<String> {
    let pct = over_sections(sections).ok()?.pct()?;
    (pct > WARN_PCT).then(|| {
        format!(
            "The wall-clock targets of this run were measured on a host that took {pct:.1} % of \
             the guest's CPU time during the timed cells, so their PASS/FAIL says more about the \
             host than about the libraries; the deterministic ones (instructions, allocations) \
             are unaffected."
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "cpu  4982559 63579 1176144 2612356 17195 0 11843 445517 0 0\n\
                          cpu0 2518027 31090 584927 1285304 9388 0 5167 220084 0 0\n\
                          cpu1 2464532 32489 591216 1327051 7806 0 6675 225432 0 0\n\
                          intr 1 2 3\nctxt 99\n";

    #[test]
    fn aggregate_line_counters() {
        let t = parse(SAMPLE).unwrap();
        assert_eq!(
            t.0,
            vec![4982559, 63579, 1176144, 2612356, 17195, 0, 11843, 445517, 0, 0]
        );
        assert_eq!(t.steal(), Some(445517));
        assert_eq!(t.total(), 9309193);
    }

    #[test]
    fn guest_time_is_not_counted_twice() {
        let t = parse("cpu 10 0 0 80 0 0 0 10 7 3\n").unwrap();
        assert_eq!(t.total(), 100);
    }

    #[test]
    fn share_of_an_interval() {
        let a = parse("cpu 100 0 50 800 0 0 0 50 0 0\n").unwrap();
        let b = parse("cpu 160 0 70 900 0 0 0 70 0 0\n").unwrap();
        let s = Share::between(&a, &b).unwrap();
        assert_eq!(
            s,
            Share {
                steal: 20,
                total: 200
            }
        );
        assert_eq!(s.pct(), Some(10.0));
        let two = s.add(Share {
            steal: 0,
            total: 200,
        });
        assert_eq!(two.pct(), Some(5.0));
        assert_eq!(Share::between(&a, &a).unwrap().pct(), None);
    }

    #[test]
    fn a_line_without_steal_is_unavailable_not_zero() {
        // Linux before 2.6.11: user nice system idle iowait irq softirq.
        let old = parse("cpu 100 0 50 800 4 0 2\ncpu0 100 0 50 800 4 0 2\n").unwrap();
        assert_eq!(old.steal(), None);
        let err = Share::between(&old, &old).unwrap_err();
        assert!(err.contains("no steal field"), "{err}");
        let new = parse("cpu 100 0 50 800 4 0 2 9\n").unwrap();
        assert!(Share::between(&old, &new).is_err());
    }

    #[test]
    fn malformed_stat_is_an_error() {
        assert!(parse("cpu0 1 2 3 4 5 6 7 8\n").is_err());
        assert!(parse("cpu 1 2 x 4 5 6 7 8\n").is_err());
        assert!(parse("cpu 1 2 3\n").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn counters_going_backwards_are_an_error() {
        let a = parse("cpu 100 0 50 800 0 0 0 50\n").unwrap();
        let b = parse("cpu 100 0 50 800 0 0 0 40\n").unwrap();
        assert!(Share::between(&a, &b).is_err());
    }

    fn section(label: &'static str, share: Result<Share, String>) -> Section {
        Section { label, share }
    }

    #[test]
    fn report_line_and_warning() {
        let quiet = [
            section(
                "tput",
                Ok(Share {
                    steal: 1,
                    total: 100,
                }),
            ),
            section(
                "latency",
                Ok(Share {
                    steal: 3,
                    total: 100,
                }),
            ),
        ];
        let run = Ok(Share {
            steal: 6,
            total: 400,
        });
        assert_eq!(
            line(&quiet, &run),
            "host steal during timed cells: 2.0 % (per section: tput 1.0 %, latency 3.0 %; \
             whole run, callgrind and allocation counts included: 1.5 %)"
        );
        assert_eq!(warning(&quiet), None);
        let stolen = [
            section(
                "tput",
                Ok(Share {
                    steal: 30,
                    total: 100,
                }),
            ),
            section("latency", Err("gone".into())),
        ];
        assert!(line(&stolen, &run).contains("tput 30.0 %, latency n/a"));
        let w = warning(&stolen).unwrap();
        assert!(w.contains("took 30.0 % of the guest's CPU time"), "{w}");
    }

    #[test]
    fn report_line_without_steal() {
        let none = [section(
            "paced",
            Err("the `cpu` line of /proc/stat has no steal field (7 fields)".into()),
        )];
        let l = line(&none, &Err("x".into()));
        assert!(
            l.starts_with("host steal: not available (the `cpu` line"),
            "{l}"
        );
        assert_eq!(warning(&none), None);
        assert!(line(&[], &Err("x".into())).contains("not available"));
    }
}
