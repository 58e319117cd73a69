//! `urma_perftest`, the genuine UMDK core's benchmark tool, as a server and a client process on
//! 127.0.0.1 ([`run_pair`]), and the parser of its report ([`result_row`]).
//!
//! The server is started first and the client only once the server's port listens; both must
//! exit 0 within the pair's limit, and neither may print a failure (`urma_perftest` exits 0
//! after a failed post too, with a result of zeros).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{free_port, spawn, wait_listening, Capture, Ended};

/// How long a server may take to listen.
const LISTEN_WAIT: Duration = Duration::from_secs(30);

/// One test of `urma_perftest` as a server and a client.
pub struct Pair<'a> {
    /// The `urma_perftest` executable.
    pub exe: &'a Path,
    /// The test (`write_lat`, `send_bw`, ...).
    pub test: &'a str,
    /// The device (`-d`).
    pub device: &'a str,
    /// Exchanges (`-n`).
    pub iters: u64,
    /// Message size (`-s`), else the tool's default.
    pub size: Option<u32>,
    /// The logs: `<log>-server.out`, `-server.err`, `-client.out`, `-client.err`.
    pub log: &'a Path,
    /// Bound of the pair once the server listens.
    pub limit: Duration,
}

/// The two ends of a pair that passed.
pub struct PairOutput {
    pub server: Ended,
    pub client: Ended,
}

impl Pair<'_> {
    /// The log file of `side` (`server`, `client`) and stream (`out`, `err`).
    pub fn log_file(&self, side: &str, stream: &str) -> std::path::PathBuf {
        let base = self.log.file_name().unwrap_or_default().to_string_lossy();
        self.log.with_file_name(format!("{base}-{side}.{stream}"))
    }
}

/// Runs `p`: the server, then (once its port listens) the client, each `configure`d (loader
/// path, preload, environment) before it starts. `Err` says which end failed and how, with the
/// end of its output.
pub fn run_pair(p: &Pair, configure: &dyn Fn(&mut Command)) -> Result<PairOutput, String> {
    let port = free_port()?.to_string();
    let iters = p.iters.to_string();
    let size = p.size.map(|s| s.to_string());
    let start = |side: &str| {
        let mut cmd = Command::new(p.exe);
        cmd.args([p.test, "-d", p.device, "-P", &port, "-n", &iters]);
        if let Some(s) = &size {
            cmd.args(["-s", s]);
        }
        if side == "client" {
            cmd.args(["-S", "127.0.0.1"]);
        }
        configure(&mut cmd);
        let capture = Capture::Files {
            out: p.log_file(side, "out"),
            err: p.log_file(side, "err"),
        };
        spawn(
            &format!("urma_perftest {} {side}", p.test),
            &mut cmd,
            capture,
        )
    };
    let mut server = start("server")?;
    if !wait_listening(port.parse().unwrap_or(0), &mut server, LISTEN_WAIT) {
        let end = server.finish(Duration::ZERO);
        return Err(format!(
            "the server did not listen on {port}: {}",
            tail(&end.output())
        ));
    }
    let client = start("client")?;
    let deadline = Instant::now() + p.limit;
    let client = client.finish_by(deadline);
    let server = server.finish_by(deadline);
    for (side, end) in [("client", &client), ("server", &server)] {
        if !end.success() {
            let how = match end.status {
                None => format!("did not finish within {:?} (killed)", p.limit),
                Some(s) => format!("exited with {s}"),
            };
            return Err(format!("{side} {how}: {}", tail(&end.output())));
        }
        if let Some(l) = failure(&end.output()) {
            return Err(format!("{side}: {l}"));
        }
    }
    Ok(PairOutput { server, client })
}

/// The first line of `text` that reports a failure (`Failed ...`, `Couldn't ...`).
pub fn failure(text: &str) -> Option<&str> {
    text.lines()
        .find(|l| l.contains("Failed") || l.contains("Couldn't"))
}

/// The last lines of `text`, on one line.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().rev().take(4).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// The result of a report: the row under the last header (` bytes   iterations ...`), its
/// numbers under the header's column names. Column names hold no spaces (`t_min[us]`) except
/// the bandwidth ones (`BW peak[MB/sec]`), so the header splits on runs of two or more spaces.
/// `None` without a header, or when the row's numbers do not match its columns.
pub fn result_row(text: &str) -> Option<Vec<(String, f64)>> {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .rposition(|l| l.trim_start().starts_with("bytes") && l.contains("iterations"))?;
    let names: Vec<&str> = lines[at]
        .split("  ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let values: Vec<f64> = lines
        .get(at + 1)?
        .split_whitespace()
        .map(|v| v.parse().ok())
        .collect::<Option<Vec<f64>>>()?;
    if values.len() != names.len() {
        return None;
    }
    Some(names.iter().map(|n| n.to_string()).zip(values).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_row_is_read_under_its_header() {
        let lat = "[shim] open\n---\n bytes   iterations  t_min[us]  t_max[us]  t_median[us]  t_avg[us]  t_stdev[us]  99%[us]  99.9%[us]  99.99%[us]  99.999%[us]\n 2       1000        29.68      71408.29    44.15         576.12     3020.43      6120.32  71408.29    71408.29     71408.29\n";
        let row = result_row(lat).unwrap();
        let get = |k: &str| row.iter().find(|(n, _)| n == k).map(|x| x.1);
        assert_eq!(get("bytes"), Some(2.0));
        assert_eq!(get("t_median[us]"), Some(44.15));
        assert_eq!(get("t_avg[us]"), Some(576.12));
        assert_eq!(get("99%[us]"), Some(6120.32));
        let bw = " bytes   iterations  BW peak[MB/sec]  BW average[MB/sec]  MsgRate[Mpps]\n 2097152 1000        6781.80          5747.75             0.002874\n";
        let row = result_row(bw).unwrap();
        assert_eq!(
            row,
            vec![
                ("bytes".to_string(), 2097152.0),
                ("iterations".to_string(), 1000.0),
                ("BW peak[MB/sec]".to_string(), 6781.80),
                ("BW average[MB/sec]".to_string(), 5747.75),
                ("MsgRate[Mpps]".to_string(), 0.002874)
            ]
        );
        assert!(result_row("Failed to run test: 5.\n").is_none());
        assert!(
            result_row(" bytes  iterations  x[us]\n 2 1000\n").is_none(),
            "short row"
        );
        assert_eq!(failure("ok\nFailed to post\n"), Some("Failed to post"));
    }
}
