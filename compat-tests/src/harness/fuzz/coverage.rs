//! SanitizerCoverage's inline 8-bit counters of every instrumented module of the process.
//!
//! A module built with `-fsanitize-coverage=inline-8bit-counters,pc-table` (clang) or
//! `-Cpasses=sancov-module` with the same LLVM options (rustc) calls, from its constructor,
//! `__sanitizer_cov_8bit_counters_init(start, end)` and `__sanitizer_cov_pcs_init(start, end)`.
//! The `fuzz-compat` binary defines both and exports them, so the libraries it dlopens (and the
//! loopback `liburma.so.0` it links) bind to them; they land in [`register_counters`] and
//! [`register_pcs`]: a fixed table of lock-free slots, usable before `main` and from a
//! constructor run inside `dlopen`, a range registered twice kept once.
//!
//! Each region is attributed to its module by `dladdr` (the file that holds the counters) and
//! [`Module::of`]; [`Coverage`] keeps, per counter, the AFL-style buckets of hit counts seen
//! (1, 2, 3, 4-7, 8-15, 16-31, 32-127, 128+) and tells whether a run reached a new one.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

const SLOTS: usize = 64;

struct Table {
    n: AtomicUsize,
    start: [AtomicUsize; SLOTS],
    end: [AtomicUsize; SLOTS],
}

impl Table {
    const fn new() -> Table {
        Table {
            n: AtomicUsize::new(0),
            start: [const { AtomicUsize::new(0) }; SLOTS],
            end: [const { AtomicUsize::new(0) }; SLOTS],
        }
    }

    fn add(&self, start: usize, end: usize) {
        if start == 0 || end <= start {
            return;
        }
        let n = self.n.load(Ordering::Acquire).min(SLOTS);
        if (0..n).any(|i| self.start[i].load(Ordering::Acquire) == start) {
            return;
        }
        let i = self.n.fetch_add(1, Ordering::AcqRel);
        if i < SLOTS {
            self.end[i].store(end, Ordering::Release);
            self.start[i].store(start, Ordering::Release);
        }
    }

    fn ranges(&self) -> Vec<(usize, usize)> {
        let n = self.n.load(Ordering::Acquire).min(SLOTS);
        (0..n)
            .map(|i| {
                (
                    self.start[i].load(Ordering::Acquire),
                    self.end[i].load(Ordering::Acquire),
                )
            })
            .filter(|&(s, e)| s != 0 && e > s)
            .collect()
    }
}

static COUNTERS: Table = Table::new();
static PCS: Table = Table::new();

/// What `__sanitizer_cov_8bit_counters_init(start, end)` registers.
pub fn register_counters(start: usize, end: usize) {
    COUNTERS.add(start, end);
}

/// What `__sanitizer_cov_pcs_init(start, end)` registers (the PC table: two words per counter).
pub fn register_pcs(start: usize, end: usize) {
    PCS.add(start, end);
}

/// The module a counter region belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Module {
    /// The C reference (legacy-c's fuzz flavour).
    Legacy,
    /// The Rust library.
    Rust,
    /// The loopback URMA provider (`liburma.so.0`).
    Loopback,
    /// The fuzzer itself (the harness).
    Harness,
}

impl Module {
    /// Every module, in report order.
    pub const ALL: [Module; 4] = [
        Module::Legacy,
        Module::Rust,
        Module::Loopback,
        Module::Harness,
    ];

    /// The modules whose new coverage keeps an input.
    pub const LIBRARIES: [Module; 3] = [Module::Legacy, Module::Rust, Module::Loopback];

    /// One word (`legacy`, `rust`, `loopback`, `harness`).
    pub fn key(self) -> &'static str {
        match self {
            Module::Legacy => "legacy",
            Module::Rust => "rust",
            Module::Loopback => "loopback",
            Module::Harness => "harness",
        }
    }

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Module::Legacy => "C reference",
            Module::Rust => "Rust library",
            Module::Loopback => "loopback",
            Module::Harness => "harness",
        }
    }

    /// The module of the file `file` (as `dladdr` names it): one of the two libraries under test
    /// by path, the loopback by its file name, anything else the harness.
    pub fn of(file: &Path, legacy: &Path, rust: &Path) -> Module {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let f = canon(file);
        if f == canon(legacy) {
            Module::Legacy
        } else if f == canon(rust) {
            Module::Rust
        } else if f
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("liburma"))
        {
            Module::Loopback
        } else {
            Module::Harness
        }
    }
}

/// The file holding address `addr` (`dladdr`), if any.
fn file_of(addr: usize) -> Option<PathBuf> {
    // SAFETY: dladdr only reads the loader's tables; `info` is a plain C struct it fills in.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `addr` is only compared with the loaded objects' ranges, never dereferenced.
    let ok = unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) };
    if ok == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr set dli_fname to the object's NUL-terminated name, valid while it is loaded
    // (the libraries are never unloaded).
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    let name = name.to_string_lossy().into_owned();
    if name.is_empty() {
        // The main program: /proc/self/exe.
        return std::env::current_exe().ok();
    }
    Some(PathBuf::from(name))
}

/// The load address of the file holding `addr` (`dladdr`'s `dli_fbase`).
fn base_of(addr: usize) -> Option<usize> {
    // SAFETY: as in `file_of`: dladdr only reads the loader's tables.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `addr` is never dereferenced.
    let ok = unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) };
    (ok != 0).then_some(info.dli_fbase as usize)
}

/// The AFL bucket bit of a hit count (0 for none).
pub fn bucket(c: u8) -> u8 {
    match c {
        0 => 0,
        1 => 1,
        2 => 2,
        3 => 4,
        4..=7 => 8,
        8..=15 => 16,
        16..=31 => 32,
        32..=127 => 64,
        _ => 128,
    }
}

struct Region {
    module: Module,
    counters: &'static [AtomicU8],
    /// Buckets seen, per counter.
    seen: Vec<u8>,
}

/// What a run reached first, in the libraries and the loopback.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Novelty {
    /// A counter reached a hit-count bucket it never had.
    pub buckets: bool,
    /// A counter moved that never had (a new edge).
    pub edges: bool,
}

/// The counters of the process's modules and what has been seen of them.
pub struct Coverage {
    regions: Vec<Region>,
    legacy: PathBuf,
    rust: PathBuf,
}

impl Coverage {
    /// Coverage attributed with the two libraries' paths (call [`Coverage::refresh`] after a
    /// library was loaded).
    pub fn new(legacy: &Path, rust: &Path) -> Coverage {
        let mut c = Coverage {
            regions: Vec::new(),
            legacy: legacy.to_path_buf(),
            rust: rust.to_path_buf(),
        };
        c.refresh();
        c
    }

    /// Picks up the regions registered since the last call.
    pub fn refresh(&mut self) {
        for (s, e) in COUNTERS.ranges().into_iter().skip(self.regions.len()) {
            let module = file_of(s)
                .map(|f| Module::of(&f, &self.legacy, &self.rust))
                .unwrap_or(Module::Harness);
            // SAFETY: [s, e) is a module's counter array, registered by its constructor, alive as
            // long as the module (never unloaded); AtomicU8 has u8's layout, and the instrumented
            // code's plain increments and these relaxed loads and stores race benignly on bytes.
            let counters = unsafe { std::slice::from_raw_parts(s as *const AtomicU8, e - s) };
            self.regions.push(Region {
                module,
                counters,
                seen: vec![0; e - s],
            });
        }
    }

    /// Number of counters (instrumented edges) per module.
    pub fn total(&self) -> BTreeMap<Module, usize> {
        let mut m = BTreeMap::new();
        for r in &self.regions {
            *m.entry(r.module).or_default() += r.counters.len();
        }
        m
    }

    /// Every counter ever hit, as `<module> 0x<offset>`: the offset of its PC (the PC table
    /// registered by the same module, in the same order) from the start of the module's file,
    /// for `addr2line -f -e <file> <offset>`. A region without its PC table is left out.
    pub fn edge_lines(&self) -> Vec<String> {
        let pcs = PCS.ranges();
        let mut v = Vec::new();
        for (ri, r) in self.regions.iter().enumerate() {
            let Some(&(ps, pe)) = pcs.get(ri) else {
                continue;
            };
            let words = (pe - ps) / std::mem::size_of::<usize>();
            if words != 2 * r.counters.len() {
                continue;
            }
            // SAFETY: [ps, pe) is the module's PC table (two words per counter), registered by
            // its constructor and alive as long as the module.
            let table = unsafe { std::slice::from_raw_parts(ps as *const usize, words) };
            let base = base_of(ps).unwrap_or(0);
            for (i, seen) in r.seen.iter().enumerate() {
                if *seen != 0 {
                    v.push(format!(
                        "{} 0x{:x}",
                        r.module.key(),
                        table[2 * i].wrapping_sub(base)
                    ));
                }
            }
        }
        v.sort();
        v
    }

    /// Zeroes every counter (before a run).
    pub fn clear(&self) {
        for r in &self.regions {
            for c in r.counters {
                c.store(0, Ordering::Relaxed);
            }
        }
    }

    /// The counters of `modules` that moved since they were last zeroed, as (region, index).
    pub fn hits(&self, modules: &[Module]) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        for (ri, r) in self.regions.iter().enumerate() {
            if modules.contains(&r.module) {
                for (i, c) in r.counters.iter().enumerate() {
                    if c.load(Ordering::Relaxed) != 0 {
                        v.push((ri, i));
                    }
                }
            }
        }
        v
    }

    /// Reads and zeroes every counter; records the buckets seen. Returns what the run reached
    /// that no run before it did, in the modules of [`Module::LIBRARIES`].
    pub fn collect(&mut self) -> Novelty {
        let mut n = Novelty::default();
        for r in &mut self.regions {
            let lib = Module::LIBRARIES.contains(&r.module);
            for (c, seen) in r.counters.iter().zip(r.seen.iter_mut()) {
                let b = bucket(c.swap(0, Ordering::Relaxed));
                if b & !*seen != 0 {
                    if lib {
                        n.buckets = true;
                        if *seen == 0 {
                            n.edges = true;
                        }
                    }
                    *seen |= b;
                }
            }
        }
        n
    }

    /// Edges (counters ever hit) per module.
    pub fn edges(&self) -> BTreeMap<Module, usize> {
        let mut m: BTreeMap<Module, usize> = Module::ALL.iter().map(|&x| (x, 0)).collect();
        for r in &self.regions {
            *m.entry(r.module).or_default() += r.seen.iter().filter(|&&s| s != 0).count();
        }
        m
    }

    /// `C reference 812/2400 edges, Rust library ..., ...`.
    pub fn line(&self) -> String {
        let total = self.total();
        self.edges()
            .iter()
            .map(|(m, e)| format!("{} {e}/{}", m.name(), total.get(m).copied().unwrap_or(0)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_afl_classes() {
        let b: Vec<u8> = [0u8, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 127, 128, 255]
            .iter()
            .map(|&c| bucket(c))
            .collect();
        assert_eq!(b, [0, 1, 2, 4, 8, 8, 16, 16, 32, 32, 64, 64, 128, 128]);
    }

    #[test]
    fn a_range_registered_twice_is_kept_once() {
        let t = Table::new();
        t.add(0x1000, 0x1010);
        t.add(0x1000, 0x1010);
        t.add(0x2000, 0x2008);
        t.add(0, 8);
        assert_eq!(t.ranges(), vec![(0x1000, 0x1010), (0x2000, 0x2008)]);
    }
}
