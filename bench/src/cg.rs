//! Reader of callgrind output files (format of valgrind 3.x, `--dump-instr=no`) and the
//! attribution of instructions to the library under test.
//!
//! Attribution ("library instructions"): the self cost of every function of the library's object,
//! plus the inclusive cost of every call from a library function into another object (libc:
//! malloc/free, pthread, futex syscall wrappers; ld.so: `__tls_get_addr`; the vDSO), except calls
//! into the URMA provider (the loopback `liburma.so.0`, identical work for both libraries: same
//! work requests) and into the benchmark executable (the user's `notify_callback` and log
//! callback). Those two are reported separately.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Costs of one call-graph dump, attributed.
#[derive(Debug, Default, Clone)]
pub struct Attribution {
    /// Event names (`Ir`, then e.g. `sysCount`, `sysTime`).
    pub events: Vec<String>,
    /// Whole-process totals per event.
    pub total: Vec<u64>,
    /// Self cost inside the library object, per event.
    pub lib_self: Vec<u64>,
    /// Inclusive cost of the library's calls into other objects (not provider, not callbacks).
    pub lib_ext: Vec<u64>,
    /// Inclusive cost of the library's calls into the URMA provider.
    pub provider: Vec<u64>,
    /// Inclusive cost of the library's calls into the benchmark (callbacks).
    pub callbacks: Vec<u64>,
    /// Per library function: self cost (event 0).
    pub fn_self: HashMap<String, u64>,
    /// Per external callee called from the library, "name (object)": inclusive cost (event 0).
    pub callee_incl: HashMap<String, u64>,
    /// Per external callee: syscalls (the `sysCount` event when present).
    pub callee_sys: HashMap<String, u64>,
    /// Per object of the process, as the dump names it: self cost (event 0), every caller.
    pub ob_self: HashMap<String, u64>,
    /// Per object: the calls into it from functions of other objects.
    pub ob_calls_in: HashMap<String, u64>,
}

impl Attribution {
    /// Library instructions (event `Ir`): self + external calls.
    pub fn lib_ir(&self) -> u64 {
        self.lib_self.first().copied().unwrap_or(0) + self.lib_ext.first().copied().unwrap_or(0)
    }

    /// Library syscalls (event `sysCount`), if collected.
    pub fn lib_syscalls(&self) -> Option<u64> {
        let i = self.events.iter().position(|e| e == "sysCount")?;
        Some(self.lib_self.get(i).copied().unwrap_or(0) + self.lib_ext.get(i).copied().unwrap_or(0))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ObClass {
    Lib,
    Provider,
    Bench,
    Other,
}

fn add(v: &mut Vec<u64>, costs: &[u64]) {
    if v.len() < costs.len() {
        v.resize(costs.len(), 0);
    }
    for (a, b) in v.iter_mut().zip(costs) {
        *a += b;
    }
}

/// Resolves a compressed name: `(id) name` defines, `(id)` refers, plain `name` is itself.
fn name(table: &mut HashMap<u64, String>, spec: &str) -> String {
    let spec = spec.trim();
    if let Some(rest) = spec.strip_prefix('(') {
        if let Some((id, tail)) = rest.split_once(')') {
            if let Ok(id) = id.parse::<u64>() {
                let tail = tail.trim();
                if tail.is_empty() {
                    return table.get(&id).cloned().unwrap_or_default();
                }
                table.insert(id, tail.to_string());
                return tail.to_string();
            }
        }
    }
    spec.to_string()
}

fn canon(p: &str) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p))
}

fn base(p: &str) -> String {
    Path::new(p)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.to_string())
}

/// Parses one callgrind output file and attributes its costs to `lib`.
pub fn attribute(file: &Path, lib: &Path, bench_exe: &Path) -> Result<Attribution, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let lib = std::fs::canonicalize(lib).map_err(|e| format!("{}: {e}", lib.display()))?;
    let bench_exe = std::fs::canonicalize(bench_exe).unwrap_or_else(|_| bench_exe.to_path_buf());
    let mut obs: HashMap<u64, String> = HashMap::new();
    let mut fns: HashMap<u64, String> = HashMap::new();
    let mut files: HashMap<u64, String> = HashMap::new();
    let mut class_cache: HashMap<String, ObClass> = HashMap::new();
    let mut classify = |ob: &str| -> ObClass {
        *class_cache.entry(ob.to_string()).or_insert_with(|| {
            let c = canon(ob);
            if c == lib {
                ObClass::Lib
            } else if c == bench_exe {
                ObClass::Bench
            } else if base(ob).starts_with("liburma") {
                ObClass::Provider
            } else {
                ObClass::Other
            }
        })
    };

    let mut a = Attribution::default();
    let mut cur_ob = String::new();
    let mut cur_fn = String::new();
    let mut cur_class = ObClass::Other;
    let mut call_ob: Option<String> = None;
    let mut call_fn = String::new();
    let mut in_call = false;
    let mut saw_events = false;

    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let first = line.as_bytes()[0];
        if first.is_ascii_digit() || first == b'+' || first == b'-' || first == b'*' {
            // cost line: position then costs
            let costs: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .map(|t| t.parse::<u64>().unwrap_or(0))
                .collect();
            if in_call {
                in_call = false;
                let target_ob = call_ob.take().unwrap_or_else(|| cur_ob.clone());
                if cur_class == ObClass::Lib {
                    match classify(&target_ob) {
                        ObClass::Lib => {}
                        ObClass::Provider => add(&mut a.provider, &costs),
                        ObClass::Bench => add(&mut a.callbacks, &costs),
                        ObClass::Other => {
                            add(&mut a.lib_ext, &costs);
                            let key = format!("{} ({})", call_fn, base(&target_ob));
                            *a.callee_incl.entry(key.clone()).or_default() +=
                                costs.first().copied().unwrap_or(0);
                            if let Some(i) = a.events.iter().position(|e| e == "sysCount") {
                                *a.callee_sys.entry(key).or_default() +=
                                    costs.get(i).copied().unwrap_or(0);
                            }
                        }
                    }
                }
            } else {
                add(&mut a.total, &costs);
                *a.ob_self.entry(cur_ob.clone()).or_default() +=
                    costs.first().copied().unwrap_or(0);
                if cur_class == ObClass::Lib {
                    add(&mut a.lib_self, &costs);
                    *a.fn_self.entry(cur_fn.clone()).or_default() +=
                        costs.first().copied().unwrap_or(0);
                }
            }
            continue;
        }
        let Some((key, val)) = line.split_once(['=', ':']) else {
            continue;
        };
        match key {
            "events" => {
                a.events = val.split_whitespace().map(str::to_string).collect();
                saw_events = true;
            }
            "ob" => {
                cur_ob = name(&mut obs, val);
                cur_class = classify(&cur_ob);
            }
            "fn" => {
                cur_fn = name(&mut fns, val);
                call_ob = None;
            }
            "fl" | "fi" | "fe" | "cfi" | "cfl" => {
                name(&mut files, val);
            }
            "cob" => call_ob = Some(name(&mut obs, val)),
            "cfn" => call_fn = name(&mut fns, val),
            "calls" => {
                in_call = true;
                let target = call_ob.as_ref().unwrap_or(&cur_ob);
                if *target != cur_ob {
                    let n = val.split_whitespace().next().and_then(|n| n.parse().ok());
                    *a.ob_calls_in.entry(target.clone()).or_default() += n.unwrap_or(0);
                }
            }
            _ => {}
        }
    }
    if !saw_events {
        return Err(format!("{}: not a callgrind output file", file.display()));
    }
    if a.lib_self.first().copied().unwrap_or(0) == 0 {
        return Err(format!(
            "{}: no instruction attributed to {} (wrong object path?)",
            file.display(),
            lib.display()
        ));
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribution_of_a_small_file() {
        let dir = std::env::temp_dir().join(format!("ostbench-cg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("libx.so");
        std::fs::write(&lib, b"").unwrap();
        let exe = dir.join("bench");
        std::fs::write(&exe, b"").unwrap();
        let f = dir.join("cg.out");
        let text = format!(
            "version: 1\nevents: Ir sysCount\n\
             ob=(1) {lib}\nfn=(1) lib_fn\n3 100\ncob=(2) /x/libc.so.6\ncfn=(2) malloc\ncalls=1 0\n3 40 0\n\
             cob=(3) /y/liburma.so.0\ncfn=(3) urma_post_jfs_wr\ncalls=2 0\n3 500 0\n\
             cob=(4) {exe}\ncfn=(4) cb\ncalls=1 0\n3 70\n\
             cfn=(5) lib_inner\ncalls=1 0\n3 9\n\
             fn=(5)\n4 9\n\
             ob=(2)\nfn=(2)\n1 40\ncfn=(6) syscall\ncalls=1 0\n1 3 1\n",
            lib = lib.display(),
            exe = exe.display()
        );
        std::fs::write(&f, text).unwrap();
        let a = attribute(&f, &lib, &exe).unwrap();
        assert_eq!(a.lib_self, vec![109]);
        assert_eq!(a.lib_ext, vec![40, 0]);
        assert_eq!(a.provider, vec![500, 0]);
        assert_eq!(a.callbacks, vec![70]);
        assert_eq!(a.lib_ir(), 149);
        assert_eq!(a.fn_self["lib_fn"], 100);
        assert_eq!(a.callee_incl["malloc (libc.so.6)"], 40);
        assert_eq!(a.total, vec![149]);
        let lib_ob = lib.display().to_string();
        assert_eq!(a.ob_self[&lib_ob], 109);
        assert_eq!(a.ob_self["/x/libc.so.6"], 40);
        assert_eq!(a.ob_calls_in["/x/libc.so.6"], 1);
        assert_eq!(a.ob_calls_in["/y/liburma.so.0"], 2);
        assert_eq!(a.ob_calls_in[&exe.display().to_string()], 1);
        assert_eq!(a.ob_calls_in.get(&lib_ob), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
