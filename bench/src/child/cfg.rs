//! The options of a cell's child process (the command line of `ostbench cell`).

use std::path::PathBuf;

use testkit::os_transport::DEFAULT_CHUNK_SIZE;

/// Cell parameters (command line of `ostbench cell`).
#[derive(Debug, Clone)]
pub struct CellCfg {
    /// The measurement (`--kind`), one of a registered cell's.
    pub kind: String,
    pub lib: PathBuf,
    pub len: u32,
    pub depth: usize,
    pub workers: u32,
    pub nocopy: bool,
    pub event: bool,
    /// Timed window (requests/s, paced, idle, two-process).
    pub secs: f64,
    /// Requests in the window (allocations, callgrind).
    pub requests: u64,
    pub warmup: u64,
    /// Offered load in pairs/s (paced).
    pub rate: u64,
}

impl CellCfg {
    pub fn parse(args: &[String]) -> Result<CellCfg, String> {
        let mut c = CellCfg {
            kind: "tput".into(),
            lib: PathBuf::new(),
            len: DEFAULT_CHUNK_SIZE + 1,
            depth: 1,
            workers: 1,
            nocopy: true,
            event: false,
            secs: 0.5,
            requests: 200,
            warmup: 0,
            rate: 0,
        };
        let mut it = args.iter();
        while let Some(k) = it.next() {
            let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
            let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{k} {v}: {e}"));
            match k.as_str() {
                "--kind" => c.kind = v.clone(),
                "--lib" => c.lib = PathBuf::from(v),
                "--len" => c.len = num(v)? as u32,
                "--depth" => c.depth = num(v)? as usize,
                "--workers" => c.workers = num(v)? as u32,
                "--copy" => c.nocopy = num(v)? == 0,
                "--event" => c.event = num(v)? != 0,
                "--secs" => c.secs = v.parse().map_err(|e| format!("--secs {v}: {e}"))?,
                "--requests" => c.requests = num(v)?,
                "--warmup" => c.warmup = num(v)?,
                "--rate" => c.rate = num(v)?,
                _ => return Err(format!("unknown option {k}")),
            }
        }
        if c.lib.as_os_str().is_empty() {
            return Err("--lib is required".into());
        }
        if c.depth == 0 || c.depth > 1024 || c.workers == 0 || c.len == 0 {
            return Err("bad depth/workers/len".into());
        }
        if c.warmup == 0 {
            c.warmup = (4 * c.depth as u64).max(32);
        }
        Ok(c)
    }
}
