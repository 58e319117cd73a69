//! Running the cells' child processes and keeping what they measured: the options of a run
//! ([`Opts`]), the libraries ([`Lib`]) and the genuine URMA core they may run over
//! ([`GenuineCore`]), a cell's configuration ([`Cfg`]), one child started and its result line
//! read ([`spawn_cell`]), and the rows every cell writes and reads ([`BenchRun`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::steal;

pub const MIB: u32 = 1024 * 1024;
/// 2 MiB + 1: two chunks.
pub const LEN2: u32 = 2 * MIB + 1;
/// 14 MiB: seven chunks.
pub const LEN7: u32 = 14 * MIB;

/// Orchestrator options.
pub struct Opts {
    pub full: bool,
    pub out: PathBuf,
    pub reps: usize,
    pub secs: f64,
    pub cg_requests: u64,
    pub cg_reps: usize,
    pub paced_reps: usize,
    pub paced_secs: f64,
    pub alloc_requests: u64,
}

impl Opts {
    pub fn parse(full: bool, args: &[String]) -> Result<Opts, String> {
        let mut o = Opts {
            full,
            out: testkit::target_dir().join("bench"),
            reps: 5,
            secs: 0.4,
            cg_requests: 200,
            cg_reps: 3,
            paced_reps: 3,
            paced_secs: 0.5,
            alloc_requests: 2000,
        };
        let mut it = args.iter();
        while let Some(k) = it.next() {
            let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
            match k.as_str() {
                "--out" => o.out = PathBuf::from(v),
                "--reps" => o.reps = v.parse().map_err(|e| format!("--reps: {e}"))?,
                "--secs" => o.secs = v.parse().map_err(|e| format!("--secs: {e}"))?,
                "--cg-requests" => o.cg_requests = v.parse().map_err(|e| format!("{k}: {e}"))?,
                "--cg-reps" => o.cg_reps = v.parse().map_err(|e| format!("{k}: {e}"))?,
                "--paced-reps" => o.paced_reps = v.parse().map_err(|e| format!("{k}: {e}"))?,
                "--paced-secs" => o.paced_secs = v.parse().map_err(|e| format!("{k}: {e}"))?,
                "--alloc-requests" => {
                    o.alloc_requests = v.parse().map_err(|e| format!("{k}: {e}"))?
                }
                _ => return Err(format!("unknown option {k}")),
            }
        }
        if o.reps == 0 {
            return Err("--reps must be > 0".into());
        }
        Ok(o)
    }
}

/// A library under test, and the URMA library its children load.
#[derive(Clone)]
pub struct Lib {
    /// `rust`, `c`, or `ext` (`LEGACY_LIB`): the `lib` of its rows; over the genuine core
    /// ([`Lib::over`]) with `@umdk` appended.
    pub name: String,
    pub label: String,
    pub path: PathBuf,
    /// `None`: the loopback's standalone `liburma.so.0`; else the genuine core with the loopback
    /// plugin.
    pub core: Option<GenuineCore>,
}

impl Lib {
    /// The same library over the genuine core `core`.
    pub fn over(&self, core: &GenuineCore) -> Lib {
        Lib {
            name: self.genuine_name(),
            label: format!("{} over the genuine core", self.label),
            path: self.path.clone(),
            core: Some(core.clone()),
        }
    }

    /// The name of its rows over the genuine core.
    pub fn genuine_name(&self) -> String {
        format!("{}@umdk", self.name)
    }
}

/// Why the cells over the genuine core did not run when `make bench` found no core.
pub const NO_GENUINE_CORE: &str =
    "not run: no genuine URMA core (set by make bench when UMDK or UMDK_SRC is available)";

/// The genuine UMDK URMA stack, as `make bench` gives it in the environment:
/// `MLCD_UMDK_LIBDIR` (colon-separated: the directory of the genuine `liburma.so.0`, whose
/// `urma/` holds the loopback plugin, and that of `liburma_common.so.0`), `MLCD_UMDK_PRELOAD`
/// (the helper answering the core's device queries, preloaded into every child over the core)
/// and `MLCD_UMDK_PERFTEST` (the core's `urma_perftest`).
#[derive(Clone, Debug)]
pub struct GenuineCore {
    pub libdir: String,
    pub preload: Option<PathBuf>,
    pub perftest: Option<PathBuf>,
}

impl GenuineCore {
    /// The core of the environment: `Ok(None)` without `MLCD_UMDK_LIBDIR`, an error when the
    /// variables name files that are not there.
    pub fn from_env() -> Result<Option<GenuineCore>, String> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let Some(libdir) = var("MLCD_UMDK_LIBDIR") else {
            return Ok(None);
        };
        let core_dir = std::env::split_paths(&libdir)
            .find(|d| d.join("liburma.so.0").exists())
            .ok_or_else(|| format!("MLCD_UMDK_LIBDIR={libdir}: no liburma.so.0 in it"))?;
        let plugins = std::fs::read_dir(core_dir.join("urma"))
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("liburma"))
                    .count()
            })
            .unwrap_or(0);
        if plugins == 0 {
            return Err(format!(
                "MLCD_UMDK_LIBDIR={libdir}: {} has no plugin in urma/",
                core_dir.display()
            ));
        }
        let file = |k: &str| -> Result<Option<PathBuf>, String> {
            match var(k).map(PathBuf::from) {
                Some(p) if !p.is_file() => Err(format!("{k}={}: no such file", p.display())),
                p => Ok(p),
            }
        };
        Ok(Some(GenuineCore {
            libdir,
            preload: file("MLCD_UMDK_PRELOAD")?,
            perftest: file("MLCD_UMDK_PERFTEST")?,
        }))
    }

    /// Puts the core first on `cmd`'s loader path (before `rest`, the loader path it would have
    /// without the core), its preload helper in `cmd`'s `LD_PRELOAD` (after `preload`), and
    /// enables the loopback plugin (`URMA_LOOPBACK=1`).
    pub fn apply(&self, cmd: &mut Command, rest: &str, preload: Option<&str>) {
        let path = if rest.is_empty() {
            self.libdir.clone()
        } else {
            format!("{}:{rest}", self.libdir)
        };
        // The loopback plugin makes its device only when asked (docs/umdk-core.md).
        cmd.env("LD_LIBRARY_PATH", path).env("URMA_LOOPBACK", "1");
        let helper = self.preload.as_ref().map(|p| p.display().to_string());
        let all: Vec<String> = preload
            .map(str::to_string)
            .into_iter()
            .chain(helper)
            .collect();
        if !all.is_empty() {
            cmd.env("LD_PRELOAD", all.join(":"));
        }
    }

    /// Whether the object `ob` (a path) is the core: a `liburma*` file directly in one of its
    /// directories (its plugins are in their `urma/`).
    pub fn is_core_object(&self, ob: &str) -> bool {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let ob = canon(Path::new(ob));
        // The object is a `liburma*` file of one of the directories, reached through any name
        // there (the core is often `liburma.so.0`, a link to `liburma.so.0.0.3` elsewhere).
        std::env::split_paths(&self.libdir).any(|d| {
            std::fs::read_dir(&d)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("liburma"))
                .any(|e| canon(&e.path()) == ob)
        })
    }

    /// The report's line on it.
    pub fn describe(&self) -> String {
        let show = |p: &Option<PathBuf>| {
            p.as_ref()
                .map_or_else(|| "none".to_string(), |p| format!("`{}`", p.display()))
        };
        format!(
            "libraries `{}`, preload {}, urma_perftest {}",
            self.libdir,
            show(&self.preload),
            show(&self.perftest)
        )
    }
}

pub fn libs() -> Vec<Lib> {
    let mut v = vec![
        Lib {
            name: "rust".into(),
            label: "Rust".into(),
            path: testkit::rust_lib_path(),
            core: None,
        },
        Lib {
            name: "c".into(),
            label: "C ref (-O2)".into(),
            path: PathBuf::from(env!("OSTBENCH_LEGACY_O2")),
            core: None,
        },
    ];
    if let Some(p) = std::env::var_os("LEGACY_LIB").filter(|p| !p.is_empty()) {
        v.push(Lib {
            name: "ext".into(),
            label: "LEGACY_LIB".into(),
            path: PathBuf::from(p),
            core: None,
        });
    }
    v
}

/// The result line of a child: `key=value` pairs.
pub type Res = HashMap<String, String>;

/// The number `k` of a result line.
pub fn num(r: &Res, k: &str) -> Result<f64, String> {
    r.get(k)
        .ok_or_else(|| format!("result has no {k}"))?
        .parse::<f64>()
        .map_err(|e| format!("{k}: {e}"))
}

/// One CSV row (long format).
pub struct Row {
    pub kind: &'static str,
    pub lib: String,
    pub len: u32,
    pub copy: bool,
    pub event: bool,
    pub depth: usize,
    pub workers: u32,
    pub rate: u32,
    pub rep: usize,
    pub metric: String,
    pub value: f64,
}

impl Row {
    /// Whether this row is `metric` of `lib` in configuration `c` of `kind`.
    pub fn is(&self, kind: &str, lib: &str, c: Cfg, metric: &str) -> bool {
        self.kind == kind
            && self.lib == lib
            && self.len == c.len
            && self.copy == c.copy
            && self.event == c.event
            && self.depth == c.depth
            && self.workers == c.workers
            && self.rate == c.rate
            && self.metric == metric
    }
}

/// What a run measured so far, and its options and libraries.
pub struct BenchRun {
    pub opts: Opts,
    pub libs: Vec<Lib>,
    /// The genuine URMA core of `make bench`, if it gave one.
    pub genuine: Option<GenuineCore>,
    pub rows: Vec<Row>,
    /// Broken measurements (the run's exit status is 1).
    pub errors: Vec<String>,
    /// The report's notes.
    pub log: Vec<String>,
    /// Host steal over each timed section, in the order they ran.
    pub steal: Vec<steal::Section>,
}

/// The configuration of a cell's child (and the configuration columns of its rows).
#[derive(Clone, Copy)]
pub struct Cfg {
    pub len: u32,
    pub depth: usize,
    pub workers: u32,
    pub copy: bool,
    pub event: bool,
    /// Offered load of a paced cell in pairs/s; 0 for the closed-loop cells.
    pub rate: u32,
}

impl Cfg {
    /// Its options of `ostbench cell`.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--len".into(),
            self.len.to_string(),
            "--depth".into(),
            self.depth.to_string(),
            "--workers".into(),
            self.workers.to_string(),
            "--copy".into(),
            (self.copy as u8).to_string(),
            "--event".into(),
            (self.event as u8).to_string(),
            "--rate".into(),
            self.rate.to_string(),
        ]
    }
}

/// The chunks of a request of `len` bytes.
pub fn chunks(len: u32) -> u32 {
    len.div_ceil(2 * MIB)
}

fn ld_library_path() -> String {
    let mut p = testkit::profile_dir().display().to_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        p.push(':');
        p.push_str(&old.to_string_lossy());
    }
    p
}

/// How a child runs: plainly, with the allocation counter preloaded, or under callgrind (its
/// output file).
pub enum Runner<'a> {
    Native,
    Preload,
    Callgrind(&'a Path),
}

/// Runs `ostbench cell --kind KIND --lib <lib> <extra>` (over `lib.core` when it has one) and
/// reads its result line. A one-process child says whether the loopback it ran over was the
/// plugin of a genuine core (`plugin=1`); a result over the other URMA library than `lib`'s is
/// an error.
pub fn spawn_cell(lib: &Lib, kind: &str, extra: &[String], runner: Runner) -> Result<Res, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = match runner {
        Runner::Callgrind(out) => {
            let mut c = Command::new("valgrind");
            c.args([
                "--tool=callgrind",
                "--dump-instr=no",
                "--collect-systime=yes",
                "--separate-threads=no",
            ])
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(&exe);
            c
        }
        _ => testkit::target::command(&exe),
    };
    cmd.arg("cell")
        .args(["--kind", kind, "--lib"])
        .arg(&lib.path)
        .args(extra)
        .env("LD_LIBRARY_PATH", ld_library_path())
        .env_remove("LD_PRELOAD");
    let alloc = matches!(runner, Runner::Preload).then_some(env!("OSTBENCH_ALLOC_SO"));
    match &lib.core {
        Some(core) => core.apply(&mut cmd, &ld_library_path(), alloc),
        None => {
            if let Some(a) = alloc {
                cmd.env("LD_PRELOAD", a);
            }
        }
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("RESULT ") {
            if !out.status.success() {
                break;
            }
            let r: Res = rest
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let want = if lib.core.is_some() { "1" } else { "0" };
            return match r.get("plugin") {
                Some(p) if p != want => Err(format!(
                    "{} {kind} {}: ran over the {} liburma.so.0 (plugin={p})",
                    lib.name,
                    extra.join(" "),
                    if p == "1" { "genuine" } else { "standalone" }
                )),
                None if lib.core.is_some() => Err(format!(
                    "{} {kind}: the child does not say which liburma.so.0 it ran over",
                    lib.name
                )),
                _ => Ok(r),
            };
        }
        if let Some(rest) = line.strip_prefix("ERROR ") {
            return Err(format!("{} {kind} {}: {rest}", lib.name, extra.join(" ")));
        }
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
    Err(format!(
        "{} {kind} {}: child exited with {} and no result; stderr tail: {}",
        lib.name,
        extra.join(" "),
        out.status,
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    ))
}

/// The median (NaN when empty).
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The configuration columns of the rows that describe the host, not a cell.
pub const HOST: Cfg = Cfg {
    len: 0,
    depth: 0,
    workers: 0,
    copy: false,
    event: false,
    rate: 0,
};

impl BenchRun {
    /// The rows of a steal measurement: steal and all CPU ticks over the interval, and the share.
    pub fn push_steal(&mut self, kind: &'static str, share: &Result<steal::Share, String>) {
        let Ok(s) = share else { return };
        self.push(kind, "host", HOST, 0, "host_steal_ticks", s.steal as f64);
        self.push(kind, "host", HOST, 0, "cpu_ticks", s.total as f64);
        if let Some(p) = s.pct() {
            self.push(kind, "host", HOST, 0, "host_steal_pct", p);
        }
    }

    /// Keeps one measured value.
    pub fn push(
        &mut self,
        kind: &'static str,
        lib: &str,
        c: Cfg,
        rep: usize,
        metric: &str,
        value: f64,
    ) {
        self.rows.push(Row {
            kind,
            lib: lib.to_string(),
            len: c.len,
            copy: c.copy,
            event: c.event,
            depth: c.depth,
            workers: c.workers,
            rate: c.rate,
            rep,
            metric: metric.to_string(),
            value,
        });
    }

    /// Values of `metric` over the reps of one configuration.
    pub fn values(&self, kind: &str, lib: &str, c: Cfg, metric: &str) -> Vec<f64> {
        self.rows
            .iter()
            .filter(|r| r.is(kind, lib, c, metric))
            .map(|r| r.value)
            .collect()
    }

    /// The median of [`BenchRun::values`].
    pub fn med(&self, kind: &str, lib: &str, c: Cfg, metric: &str) -> f64 {
        median(&mut self.values(kind, lib, c, metric))
    }

    /// Lowest and highest per-repetition ratio Rust ÷ `base` of `metric` in one configuration.
    pub fn ratio_spread(&self, kind: &str, base: &Lib, c: Cfg, metric: &str) -> (f64, f64) {
        self.ratio_spread_of(kind, ("rust", &base.name), c, metric)
    }

    /// Lowest and highest per-repetition ratio `num` ÷ `den` (library names) of `metric` in one
    /// configuration.
    pub fn ratio_spread_of(
        &self,
        kind: &str,
        (num, den): (&str, &str),
        c: Cfg,
        metric: &str,
    ) -> (f64, f64) {
        let rv = self.values(kind, num, c, metric);
        let bv = self.values(kind, den, c, metric);
        let per: Vec<f64> = rv.iter().zip(&bv).map(|(a, b)| a / b).collect();
        let lo = per.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = per.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    }

    /// A note of the report.
    pub fn note(&mut self, s: String) {
        eprintln!("ostbench: {s}");
        self.log.push(s);
    }

    /// A broken measurement.
    pub fn fail(&mut self, s: String) {
        eprintln!("ostbench: MEASUREMENT ERROR: {s}");
        self.errors.push(s);
    }

    /// The library the ratios are against: `LEGACY_LIB` when given, else the C reference.
    pub fn baseline(&self) -> Lib {
        self.libs
            .iter()
            .find(|l| l.name == "ext")
            .or_else(|| self.libs.iter().find(|l| l.name == "c"))
            .cloned()
            .expect("C library")
    }
}

/// The libraries in the order of repetition `rep`: the order rotates with the repetition, so that
/// no library always runs first (interleaving).
pub fn interleaved(libs: &[Lib], rep: usize) -> Vec<Lib> {
    let mut order = libs.to_vec();
    let n = order.len();
    order.rotate_left(rep % n);
    order
}
