//! The callgrind cell: library instructions and syscalls per request of each library (2 and 7
//! chunks, no-copy, depth 1, workers 1, event-mode pollers), one child per repetition under
//! `valgrind --tool=callgrind`, its window delimited by client requests and attributed by
//! [`crate::cg`]; the instructions target and where each library spends them.

use std::ffi::{c_char, CString};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::cell::{About, Cell, Measure, Target};
use crate::cg;
use crate::child::{Needs, Window};
use crate::orch::report::fmt_num;
use crate::orch::run::{chunks, num, spawn_cell, BenchRun, Cfg, Lib, Runner, LEN2, LEN7};

extern "C" {
    fn ostbench_cg_zero();
    fn ostbench_cg_dump(reason: *const c_char);
}

/// One callgrind child's attribution.
pub struct CgResult {
    lib: String,
    len: u32,
    pub requests: u64,
    pub attr: cg::Attribution,
}

/// The cell; it keeps each child's attribution for its section's breakdown.
#[derive(Default)]
pub struct Callgrind {
    results: Vec<CgResult>,
}

/// The configuration of a request length's cell.
pub fn cfg(len: u32) -> Cfg {
    Cfg {
        len,
        depth: 1,
        workers: 1,
        copy: false,
        event: true,
        rate: 0,
    }
}

const ABOUT: About = About {
    name: "callgrind",
    timed: None,
    quick: true,
    measures: &[Measure::window_needing(
        "callgrind",
        Needs {
            callgrind: true,
            ..Needs::NOTHING
        },
        window,
    )],
};

impl Cell for Callgrind {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn run(&mut self, ctx: &mut BenchRun) {
        if !available() {
            ctx.fail(
                "valgrind (with <valgrind/callgrind.h>) is not available: no instruction counts"
                    .into(),
            );
            return;
        }
        let dir = fresh_dir(ctx, "callgrind");
        for rep in 0..ctx.opts.cg_reps {
            for len in [LEN2, LEN7] {
                for lib in ctx.libs.clone() {
                    if let Some(r) = count(ctx, "callgrind", &lib, len, rep, &dir) {
                        self.results.push(r);
                    }
                }
            }
        }
    }

    fn targets(&self, ctx: &BenchRun, base: &Lib) -> Vec<Target> {
        let l7 = cfg(LEN7);
        let ir_rust = ctx.med("callgrind", "rust", l7, "lib_ir_per_req");
        let ir_c = ctx.med("callgrind", &base.name, l7, "lib_ir_per_req");
        let r = ir_c / ir_rust;
        vec![Target {
            name: "C ÷ Rust instructions per 7-chunk request (callgrind)",
            value: format!("{} ({} ÷ {})", fmt_num(r), fmt_num(ir_c), fmt_num(ir_rust)),
            threshold: "≥ 3.5",
            ok: (!r.is_nan()).then_some(r >= 3.5),
        }]
    }

    fn section(&self, ctx: &BenchRun, _base: &Lib, md: &mut String) {
        let (cgs, libs) = (&self.results, &ctx.libs);
        let _ = writeln!(
            md,
            "## Instructions per request (callgrind; no-copy, depth 1, workers 1, event-mode pollers; median of {} runs of {} requests)\n",
            ctx.opts.cg_reps,
            ctx.opts.cg_requests
        );
        let _ = writeln!(
            md,
            "Library instructions = self cost in the library object + inclusive cost of its calls into libc/ld.so/vDSO; \
             calls into the URMA provider and into the application's callbacks are excluded (shown apart).\n"
        );
        let _ = writeln!(md, "| chunks | library | lib instr/request | lib instr/chunk | lib syscalls/request | provider instr/request | whole process instr/request |\n|---|---|---|---|---|---|---|");
        for len in [LEN2, LEN7] {
            let c = cfg(len);
            for l in libs {
                let ir = ctx.med("callgrind", &l.name, c, "lib_ir_per_req");
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    chunks(len),
                    l.label,
                    fmt_num(ir),
                    fmt_num(ir / chunks(len) as f64),
                    fmt_num(ctx.med("callgrind", &l.name, c, "lib_syscalls_per_req")),
                    fmt_num(ctx.med("callgrind", &l.name, c, "provider_ir_per_req")),
                    fmt_num(ctx.med("callgrind", &l.name, c, "process_ir_per_req")),
                );
            }
        }
        let _ = writeln!(md);
        // breakdown, 7-chunk
        for l in libs {
            let mut runs: Vec<&CgResult> = cgs
                .iter()
                .filter(|r| r.len == LEN7 && r.lib == l.name)
                .collect();
            runs.sort_by_key(|r| r.attr.lib_ir() / r.requests.max(1));
            let Some(r) = runs.get(runs.len() / 2).copied() else {
                continue;
            };
            let label = libs
                .iter()
                .find(|l| l.name == r.lib)
                .map(|l| l.label.clone())
                .unwrap_or_default();
            let n = r.requests as f64;
            let _ = writeln!(
                md,
                "### Where {label} spends its instructions (7-chunk request, per request)\n"
            );
            let _ = writeln!(md, "| own function (self) | instr | | external callee (inclusive) | instr | syscalls |\n|---|---|---|---|---|---|");
            let mut own: Vec<_> = r.attr.fn_self.iter().collect();
            own.sort_by(|a, b| b.1.cmp(a.1));
            let mut ext: Vec<_> = r.attr.callee_incl.iter().collect();
            ext.sort_by(|a, b| b.1.cmp(a.1));
            for i in 0..12 {
                let o = own
                    .get(i)
                    .map(|(f, v)| (short(f), fmt_num(**v as f64 / n)))
                    .unwrap_or_default();
                let e = ext
                    .get(i)
                    .map(|(f, v)| {
                        (
                            short(f),
                            fmt_num(**v as f64 / n),
                            fmt_num(r.attr.callee_sys.get(*f).copied().unwrap_or(0) as f64 / n),
                        )
                    })
                    .unwrap_or_default();
                if o.0.is_empty() && e.0.is_empty() {
                    break;
                }
                let _ = writeln!(md, "| {} | {} | | {} | {} | {} |", o.0, o.1, e.0, e.1, e.2);
            }
            let _ = writeln!(md);
        }
    }
}

/// Whether instruction counts can be taken: valgrind runs and the client requests are compiled
/// in.
pub fn available() -> bool {
    std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok()
        && env!("OSTBENCH_HAVE_VALGRIND") == "1"
}

/// `<out>/<name>`, emptied: where a cell's callgrind files go.
pub fn fresh_dir(ctx: &BenchRun, name: &str) -> PathBuf {
    let dir = ctx.opts.out.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create callgrind dir");
    dir
}

/// One callgrind child: `lib` for requests of `len` bytes in the cell's configuration
/// ([`cfg()`]), repetition `rep`, its output file in `dir`. Keeps its per-request counts as rows
/// of `kind` (`lib_ir_per_req`, `lib_syscalls_per_req`, `provider_ir_per_req`: the library's
/// calls into `liburma*` objects, `process_ir_per_req`) and returns its attribution; a broken
/// child is `ctx.fail`ed.
pub fn count(
    ctx: &mut BenchRun,
    kind: &'static str,
    lib: &Lib,
    len: u32,
    rep: usize,
    dir: &Path,
) -> Option<CgResult> {
    let c = cfg(len);
    let file = dir.join(format!("{}-{}chunks-{rep}.out", lib.name, chunks(len)));
    let mut extra = c.args();
    extra.extend([
        "--requests".into(),
        ctx.opts.cg_requests.to_string(),
        "--warmup".into(),
        "20".into(),
    ]);
    let t = Instant::now();
    let r = match spawn_cell(lib, "callgrind", &extra, Runner::Callgrind(&file)) {
        Ok(r) => r,
        Err(e) => {
            ctx.fail(e);
            return None;
        }
    };
    let requests = num(&r, "requests").unwrap_or(0.0) as u64;
    // The window dump is "<file>.1"; the final dump at exit is "<file>".
    let dump = PathBuf::from(format!("{}.1", file.display()));
    let exe = std::env::current_exe().expect("exe");
    let attr = match cg::attribute(&dump, &lib.path, &exe) {
        Ok(a) if requests > 0 => a,
        Ok(_) => {
            ctx.fail(format!("{kind} {}: 0 requests", lib.name));
            return None;
        }
        Err(e) => {
            ctx.fail(e);
            return None;
        }
    };
    let n = requests as f64;
    let per = attr.lib_ir() as f64 / n;
    ctx.push(kind, &lib.name, c, rep, "lib_ir_per_req", per);
    if let Some(s) = attr.lib_syscalls() {
        ctx.push(
            kind,
            &lib.name,
            c,
            rep,
            "lib_syscalls_per_req",
            s as f64 / n,
        );
    }
    let pv = attr.provider.first().copied().unwrap_or(0);
    ctx.push(
        kind,
        &lib.name,
        c,
        rep,
        "provider_ir_per_req",
        pv as f64 / n,
    );
    let total = attr.total.first().copied().unwrap_or(0);
    ctx.push(
        kind,
        &lib.name,
        c,
        rep,
        "process_ir_per_req",
        total as f64 / n,
    );
    ctx.note(format!(
        "{kind} rep {rep} {} {} chunks: {per:.0} lib instructions/request ({:.1} s)",
        lib.name,
        chunks(len),
        t.elapsed().as_secs_f64()
    ));
    Some(CgResult {
        lib: lib.name.clone(),
        len,
        requests,
        attr,
    })
}

fn short(f: &str) -> String {
    let s: String = f.chars().take(90).collect();
    s.replace('|', "\\|")
}

fn window(w: &mut Window) -> Result<(), String> {
    let cfg = w.cfg;
    w.d.drain()?;
    let reason = CString::new("window").expect("cstr");
    // SAFETY: client request; no arguments.
    unsafe { ostbench_cg_zero() };
    w.d.fill(cfg.depth)?;
    for _ in 0..cfg.requests.saturating_sub(cfg.depth as u64) {
        w.d.step()?;
    }
    w.d.drain()?;
    // SAFETY: valid C string.
    unsafe { ostbench_cg_dump(reason.as_ptr()) };
    w.kv("requests", cfg.requests.max(cfg.depth as u64).to_string());
    Ok(())
}
