//! The trace's sinks and line pieces, shared by the loopback (`urma-loopback/src/trace.rs`) and the
//! interposition layer (`urma-interpose/src/trace.rs`), which write the same JSON-lines format
//! (docs/loopback.md) so that the harness's normaliser reads either.

use std::ffi::c_char;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use urma_sys as u;

struct Sinks {
    file: Option<std::fs::File>,
    capture: Option<Vec<String>>,
}

/// Where trace lines go: a file and/or an in-memory capture. One `static` per library.
pub struct Sink {
    on: AtomicBool,
    sinks: Mutex<Sinks>,
    /// Lines of a stopped capture, kept until [`Sink::take`].
    stopped: Mutex<Vec<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Sink {
    /// No sink active.
    pub const fn new() -> Sink {
        Sink {
            on: AtomicBool::new(false),
            sinks: Mutex::new(Sinks {
                file: None,
                capture: None,
            }),
            stopped: Mutex::new(Vec::new()),
        }
    }

    /// Whether any sink is active (cheap check before formatting a line).
    pub fn enabled(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    fn refresh(&self, s: &Sinks) {
        self.on
            .store(s.file.is_some() || s.capture.is_some(), Ordering::Release);
    }

    /// Opens (truncates) a trace file; `None` closes the file sink.
    pub fn open_file(&self, path: Option<&str>) -> std::io::Result<()> {
        let f = match path {
            Some(p) => Some(std::fs::File::create(p)?),
            None => None,
        };
        let mut s = lock(&self.sinks);
        s.file = f;
        self.refresh(&s);
        Ok(())
    }

    /// Starts (clearing) or stops the in-memory capture. Stopping keeps the captured lines until
    /// [`Sink::take`]; starting discards them.
    pub fn capture(&self, on: bool) {
        let mut s = lock(&self.sinks);
        if on {
            s.capture = Some(Vec::new());
            lock(&self.stopped).clear();
        } else if let Some(c) = s.capture.take() {
            lock(&self.stopped).extend(c);
        }
        self.refresh(&s);
    }

    /// Takes the captured lines (the capture keeps running if it was on).
    pub fn take(&self) -> Vec<String> {
        let mut out = std::mem::take(&mut *lock(&self.stopped));
        if let Some(c) = lock(&self.sinks).capture.as_mut() {
            out.append(c);
        }
        out
    }

    /// Takes the captured lines (as [`Sink::take`]) as one `malloc`'d NUL-terminated string, each
    /// line ending with '\n': the text of both libraries' `*_trace_take` exports (freed with
    /// their `*_free`, or `free()`). `*len`, if `len` is not NULL, gets the length without the
    /// NUL. NULL only when out of memory (the lines are then lost).
    ///
    /// # Safety
    /// `len` is NULL or points to a writable `usize`.
    pub unsafe fn take_c(&self, len: *mut usize) -> *mut c_char {
        let mut text = String::new();
        for l in self.take() {
            text.push_str(&l);
            text.push('\n');
        }
        let n = text.len();
        // SAFETY: malloc of n + 1 bytes; checked for NULL before use.
        let p = unsafe { libc::malloc(n + 1) } as *mut u8;
        if p.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: p has n + 1 writable bytes, text n readable ones, no overlap; len is NULL or
        // writable (the caller's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), p, n);
            *p.add(n) = 0;
            if !len.is_null() {
                *len = n;
            }
        }
        p as *mut c_char
    }

    /// Stops every sink and forgets captured lines.
    pub fn reset(&self) {
        let mut s = lock(&self.sinks);
        s.capture = None;
        s.file = None;
        self.refresh(&s);
        lock(&self.stopped).clear();
    }

    /// Emits one line (no trailing newline in `line`).
    pub fn emit(&self, line: String) {
        let mut s = lock(&self.sinks);
        if let Some(f) = s.file.as_mut() {
            let _ = f.write_all(line.as_bytes());
            let _ = f.write_all(b"\n");
        }
        if let Some(c) = s.capture.as_mut() {
            c.push(line);
        }
    }
}

impl Default for Sink {
    fn default() -> Self {
        Sink::new()
    }
}

/// The kinds of objects the trace names (`<prefix><n>`: `jfs1`, `seg2`, ...), in the order of
/// the loopback's live-object counts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Ctx = 0,
    Jfce,
    Jfc,
    Jfs,
    Jfr,
    Jetty,
    TJetty,
    Seg,
    ISeg,
    TokenId,
}

/// Number of [`Kind`]s.
pub const KIND_COUNT: usize = 10;

impl Kind {
    /// Prefix of the kind's symbolic (trace) names.
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Ctx => "ctx",
            Kind::Jfce => "jfce",
            Kind::Jfc => "jfc",
            Kind::Jfs => "jfs",
            Kind::Jfr => "jfr",
            Kind::Jetty => "jetty",
            Kind::TJetty => "tjetty",
            Kind::Seg => "seg",
            Kind::ISeg => "iseg",
            Kind::TokenId => "tokenid",
        }
    }
}

/// The symbolic-name counters of one library, one per [`Kind`]. One `static` per library.
pub struct Names([AtomicU64; KIND_COUNT]);

impl Names {
    /// Every kind's numbering at 1.
    pub const fn new() -> Names {
        Names([const { AtomicU64::new(1) }; KIND_COUNT])
    }

    /// The name of a new object of kind `k`: `<prefix><n>`, n counting from 1 per kind in
    /// creation order since [`Names::new`] or the last [`Names::reset`].
    pub fn next(&self, k: Kind) -> String {
        let n = self.0[k as usize].fetch_add(1, Ordering::Relaxed);
        format!("{}{}", k.prefix(), n)
    }

    /// Restarts every kind's numbering at 1 (objects keep the names they have).
    pub fn reset(&self) {
        for a in &self.0 {
            a.store(1, Ordering::Relaxed);
        }
    }
}

impl Default for Names {
    fn default() -> Self {
        Names::new()
    }
}

/// `"0x%016x"`, quoted.
pub fn hex(v: u64) -> String {
    format!("\"0x{v:016x}\"")
}

/// A JSON string literal (names are plain ASCII identifiers; still escaped defensively).
pub fn json_str(v: &str) -> String {
    let mut o = String::with_capacity(v.len() + 2);
    o.push('"');
    for ch in v.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// The CR fields of `cr` and `poll` lines, in the trace's order: `local` is the name of the CR's
/// local queue; `remote` gives the name of the sender of a receive CR (`s_r` 1; not called for a
/// send CR, whose `remote` and `imm` are `null`).
pub fn cr_fields(cr: &u::urma_cr_t, local: &str, remote: impl FnOnce() -> String) -> String {
    // SAFETY: the CR flag union is a plain u8.
    let flag = unsafe { cr.flag.value };
    let s_r = flag & 1;
    let (remote, imm) = if s_r == 1 {
        // SAFETY: both union members are plain integers; reading imm_data is always defined.
        let imm = unsafe { cr.__bindgen_anon_1.imm_data };
        (json_str(&remote()), hex(imm))
    } else {
        ("null".to_string(), "null".to_string())
    };
    format!(
        "\"s_r\":{},\"status\":{},\"opcode\":{},\"jetty\":{},\"user_ctx\":{},\"len\":{},\"local\":{},\"remote\":{},\"imm\":{}",
        s_r,
        { cr.status },
        { cr.opcode },
        (flag >> 1) & 1,
        hex(cr.user_ctx),
        cr.completion_len,
        json_str(local),
        remote,
        imm
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_take_and_reset() {
        let t = Sink::new();
        assert!(!t.enabled());
        t.capture(true);
        assert!(t.enabled());
        t.emit("a".into());
        t.capture(false);
        assert!(!t.enabled());
        t.capture(false);
        assert_eq!(t.take(), vec!["a".to_string()]);
        t.capture(true);
        t.emit("b".into());
        assert_eq!(t.take(), vec!["b".to_string()]);
        t.reset();
        assert!(!t.enabled() && t.take().is_empty());
    }

    #[test]
    fn take_c_is_the_lines_each_ending_with_a_newline() {
        let t = Sink::new();
        t.capture(true);
        t.emit("{\"ev\":1}".into());
        t.emit("x".into());
        let mut len = usize::MAX;
        // SAFETY: len is writable.
        let p = unsafe { t.take_c(&mut len) };
        assert!(!p.is_null());
        // SAFETY: p is a NUL-terminated string of len bytes from take_c, freed once below.
        let text = unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes().to_vec();
        // SAFETY: p came from malloc in take_c.
        unsafe { libc::free(p.cast()) };
        assert_eq!(text, b"{\"ev\":1}\nx\n");
        assert_eq!(len, text.len());
        assert!(t.take().is_empty(), "the lines were taken");
        // An empty capture is an empty string; a NULL len is allowed.
        // SAFETY: a NULL len is allowed (nothing is written through it).
        let p = unsafe { t.take_c(std::ptr::null_mut()) };
        assert!(!p.is_null());
        // SAFETY: p is non-NULL (checked) and points to at least the NUL take_c wrote.
        assert_eq!(unsafe { *p }, 0);
        // SAFETY: p came from malloc in take_c and is freed once.
        unsafe { libc::free(p.cast()) };
    }

    #[test]
    fn cr_fields_name_the_remote_of_a_receive_cr_only() {
        // SAFETY: urma_cr_t is plain data (integers, unions of integers); all-zero is valid.
        let mut cr: u::urma_cr_t = unsafe { std::mem::zeroed() };
        cr.status = 9;
        cr.opcode = 3;
        cr.user_ctx = 0x2a;
        cr.completion_len = 64;
        cr.flag.value = 0b10;
        cr.__bindgen_anon_1.imm_data = 7;
        let send = cr_fields(&cr, "jfs1", || unreachable!("no remote for a send CR"));
        assert_eq!(
            send,
            "\"s_r\":0,\"status\":9,\"opcode\":3,\"jetty\":1,\"user_ctx\":\"0x000000000000002a\",\"len\":64,\"local\":\"jfs1\",\"remote\":null,\"imm\":null"
        );
        cr.flag.value = 0b01;
        let recv = cr_fields(&cr, "jfr1", || "jetty2".into());
        assert_eq!(
            recv,
            "\"s_r\":1,\"status\":9,\"opcode\":3,\"jetty\":0,\"user_ctx\":\"0x000000000000002a\",\"len\":64,\"local\":\"jfr1\",\"remote\":\"jetty2\",\"imm\":\"0x0000000000000007\""
        );
    }

    #[test]
    fn names_count_per_kind_from_one_until_reset() {
        let n = Names::new();
        assert_eq!(n.next(Kind::Jfs), "jfs1");
        assert_eq!(n.next(Kind::Jfs), "jfs2");
        assert_eq!(n.next(Kind::ISeg), "iseg1");
        assert_eq!(n.next(Kind::TokenId), "tokenid1");
        n.reset();
        assert_eq!(n.next(Kind::Jfs), "jfs1");
        assert_eq!(Kind::TokenId as usize + 1, KIND_COUNT);
    }

    #[test]
    fn line_pieces() {
        assert_eq!(hex(0x2a), "\"0x000000000000002a\"");
        assert_eq!(json_str("a\"b\\\u{1}"), "\"a\\\"b\\\\\\u0001\"");
    }
}
