//! The trace, as the loopback (`urma-loopback/src/trace.rs`) and the interposition layer
//! (`urma-interpose/src/trace.rs`) both write it: the JSON-lines format of docs/loopback.md,
//! "Trace format", so that the harness's normaliser reads either. Each library describes what
//! happened as an [`Event`] (its names, SGE lists and CRs) and hands it to its [`Sink`]; the
//! line is made in one place, [`Event::line`], and only while a sink is active. The object
//! kinds and their symbolic names ([`Kind`], [`Names`]) are shared too.

use ranked_lock::{lock, rank, Mutex};
use std::borrow::Cow;
use std::ffi::c_char;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use urma_sys as u;

use crate::faults::Fate;

struct Sinks {
    file: Option<std::fs::File>,
    capture: Option<Vec<String>>,
}

/// Where trace lines go: a file and/or an in-memory capture. One `static` per library.
pub struct Sink {
    on: AtomicBool,
    sinks: Mutex<Sinks, { rank::TRACE_SINKS }>,
    /// Lines of a stopped capture, kept until [`Sink::take`].
    stopped: Mutex<Vec<String>, { rank::TRACE_STOPPED }>,
}

/// Opens `path` for a trace: created with mode 0600 if it is not there, never through a link
/// in its last component (`O_NOFOLLOW`), and only if it then is a regular file of this
/// process's effective user with no other link to it; such a file is emptied (a trace starts
/// afresh). Anything else (a link, a FIFO or device, another user's file) is refused and left
/// as it was.
pub fn open_trace_file(path: &str) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        // Non-blocking: a FIFO without a reader fails at once instead of hanging the caller.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let m = f.metadata()?;
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    if !m.file_type().is_file() || m.uid() != euid || m.nlink() != 1 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{path}: not a regular file of uid {euid} with one link (uid {}, mode {:o}, {} links)",
                m.uid(),
                m.mode(),
                m.nlink()
            ),
        ));
    }
    f.set_len(0)?;
    Ok(f)
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
    #[inline]
    pub fn enabled(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    fn refresh(&self, s: &Sinks) {
        self.on
            .store(s.file.is_some() || s.capture.is_some(), Ordering::Release);
    }

    /// Opens a trace file ([`open_trace_file`]); `None` closes the file sink.
    pub fn open_file(&self, path: Option<&str>) -> std::io::Result<()> {
        let f = match path {
            Some(p) => Some(open_trace_file(p)?),
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

    /// Writes one event's line, when a sink is active (the line is made only then).
    #[inline]
    pub fn event(&self, e: &Event<'_>) {
        if self.enabled() {
            self.emit(e.line());
        }
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
fn hex(v: u64) -> String {
    format!("\"0x{v:016x}\"")
}

/// A JSON string literal (names are plain ASCII identifiers; still escaped defensively).
fn json_str(v: &str) -> String {
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

/// One SGE as the trace shows it: `{"seg":<name>,"off":<offset>,"len":<n>}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sge<'a> {
    /// The name of the registered segment (also when the SGE uses an import of it); `None` for
    /// an SGE without segment (`null`).
    pub seg: Option<Cow<'a, str>>,
    /// The offset from the segment's base; `None` (`null`) without a segment, or for one the
    /// library cannot place.
    pub off: Option<i128>,
    pub len: u32,
}

/// Names the queues of a CR's `local` and `remote` fields, each library from the ids it saw
/// created.
pub trait CrNames {
    /// The name of the CR's local queue (`cr.local_id`).
    fn local(&self, cr: &u::urma_cr_t) -> String;
    /// The name of the sender of a receive CR (`s_r` 1); never asked for a send CR.
    fn remote(&self, cr: &u::urma_cr_t) -> String;
}

/// One line of the trace (docs/loopback.md, "Trace format"), as both libraries write it; its
/// one serialiser is [`Event::line`].
pub enum Event<'a> {
    /// A send WR that reached a post call, with the status of the post for it.
    PostSend {
        q: &'a str,
        opcode: u32,
        flags: u32,
        user_ctx: u64,
        /// The target jetty's name; `None` without one.
        target: Option<&'a str>,
        /// The immediate of an opcode that carries one (see [`crate::opcode::OpInfo::imm`]).
        imm: Option<u64>,
        src: &'a [Sge<'a>],
        dst: &'a [Sge<'a>],
        ret: i32,
    },
    /// A recv WR that reached a post call.
    PostRecv {
        q: &'a str,
        user_ctx: u64,
        sge: &'a [Sge<'a>],
        ret: i32,
    },
    /// A CR as it was generated (the loopback) or returned by the provider (the layer), and
    /// what became of it.
    Cr {
        jfc: &'a str,
        cr: &'a u::urma_cr_t,
        names: &'a dyn CrNames,
        fate: Fate,
    },
    /// A CR handed to the application.
    Poll {
        jfc: &'a str,
        cr: &'a u::urma_cr_t,
        names: &'a dyn CrNames,
    },
}

impl Event<'_> {
    /// The event's JSON line (no trailing newline), keys in the documented order.
    pub fn line(&self) -> String {
        let mut o = String::with_capacity(256);
        match self {
            Event::PostSend {
                q,
                opcode,
                flags,
                user_ctx,
                target,
                imm,
                src,
                dst,
                ret,
            } => {
                let _ = write!(
                    o,
                    "{{\"ev\":\"post_send\",\"q\":{},\"op\":{},\"opcode\":{opcode},\"flags\":{flags},\"user_ctx\":{},\"target\":{},\"imm\":{},\"src\":",
                    json_str(q),
                    json_str(crate::opcode::name(*opcode)),
                    hex(*user_ctx),
                    target.map_or_else(|| "null".to_string(), json_str),
                    imm.map_or_else(|| "null".to_string(), hex),
                );
                sges(&mut o, src);
                o.push_str(",\"dst\":");
                sges(&mut o, dst);
                let _ = write!(o, ",\"ret\":{ret}}}");
            }
            Event::PostRecv {
                q,
                user_ctx,
                sge,
                ret,
            } => {
                let _ = write!(
                    o,
                    "{{\"ev\":\"post_recv\",\"q\":{},\"user_ctx\":{},\"sge\":",
                    json_str(q),
                    hex(*user_ctx)
                );
                sges(&mut o, sge);
                let _ = write!(o, ",\"ret\":{ret}}}");
            }
            Event::Cr {
                jfc,
                cr,
                names,
                fate,
            } => {
                let _ = write!(
                    o,
                    "{{\"ev\":\"cr\",\"jfc\":{},{},\"fate\":{}}}",
                    json_str(jfc),
                    cr_fields(cr, *names),
                    json_str(fate.as_str())
                );
            }
            Event::Poll { jfc, cr, names } => {
                let _ = write!(
                    o,
                    "{{\"ev\":\"poll\",\"jfc\":{},{}}}",
                    json_str(jfc),
                    cr_fields(cr, *names)
                );
            }
        }
        o
    }
}

/// Appends an SGE list: `[{"seg":..,"off":..,"len":..},...]`.
fn sges(o: &mut String, v: &[Sge<'_>]) {
    o.push('[');
    for (i, e) in v.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        let seg = e
            .seg
            .as_deref()
            .map_or_else(|| "null".to_string(), json_str);
        let off = e.off.map_or_else(|| "null".to_string(), |n| n.to_string());
        let _ = write!(o, "{{\"seg\":{seg},\"off\":{off},\"len\":{}}}", e.len);
    }
    o.push(']');
}

/// The CR fields of `cr` and `poll` lines, in the trace's order; `remote` and `imm` are `null`
/// on a send CR.
fn cr_fields(cr: &u::urma_cr_t, names: &dyn CrNames) -> String {
    // SAFETY: the CR flag union is a plain u8.
    let flag = unsafe { cr.flag.value };
    let s_r = flag & 1;
    let (remote, imm) = if s_r == 1 {
        // SAFETY: both union members are plain integers; reading imm_data is always defined.
        let imm = unsafe { cr.__bindgen_anon_1.imm_data };
        (json_str(&names.remote(cr)), hex(imm))
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
        json_str(&names.local(cr)),
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

    /// Names a CR's queues as the tests expect; a send CR's remote is never asked for.
    struct Fixed(&'static str, Option<&'static str>);

    impl CrNames for Fixed {
        fn local(&self, _: &u::urma_cr_t) -> String {
            self.0.into()
        }
        fn remote(&self, _: &u::urma_cr_t) -> String {
            self.1.expect("no remote for a send CR").into()
        }
    }

    #[test]
    fn cr_and_poll_lines_name_the_remote_of_a_receive_cr_only() {
        // SAFETY: urma_cr_t is plain data (integers, unions of integers); all-zero is valid.
        let mut cr: u::urma_cr_t = unsafe { std::mem::zeroed() };
        cr.status = 9;
        cr.opcode = 3;
        cr.user_ctx = 0x2a;
        cr.completion_len = 64;
        cr.flag.value = 0b10;
        cr.__bindgen_anon_1.imm_data = 7;
        let send = Event::Cr {
            jfc: "jfc1",
            cr: &cr,
            names: &Fixed("jfs1", None),
            fate: Fate::Drop,
        };
        assert_eq!(
            send.line(),
            "{\"ev\":\"cr\",\"jfc\":\"jfc1\",\"s_r\":0,\"status\":9,\"opcode\":3,\"jetty\":1,\"user_ctx\":\"0x000000000000002a\",\"len\":64,\"local\":\"jfs1\",\"remote\":null,\"imm\":null,\"fate\":\"drop\"}"
        );
        cr.flag.value = 0b01;
        let recv = Event::Poll {
            jfc: "jfc2",
            cr: &cr,
            names: &Fixed("jfr1", Some("jetty2")),
        };
        assert_eq!(
            recv.line(),
            "{\"ev\":\"poll\",\"jfc\":\"jfc2\",\"s_r\":1,\"status\":9,\"opcode\":3,\"jetty\":0,\"user_ctx\":\"0x000000000000002a\",\"len\":64,\"local\":\"jfr1\",\"remote\":\"jetty2\",\"imm\":\"0x0000000000000007\"}"
        );
    }

    #[test]
    fn post_lines_keep_the_documented_keys_and_sge_forms() {
        let src = [
            Sge {
                seg: Some("seg1".into()),
                off: Some(16),
                len: 512,
            },
            Sge {
                seg: None,
                off: None,
                len: 0,
            },
        ];
        let dst = [Sge {
            seg: Some("unknown".into()),
            off: None,
            len: 8,
        }];
        let e = Event::PostSend {
            q: "jfs1",
            opcode: u::URMA_OPC_WRITE_IMM,
            flags: 32,
            user_ctx: 5,
            target: Some("tjetty1"),
            imm: Some(0x77),
            src: &src,
            dst: &dst,
            ret: 0,
        };
        assert_eq!(
            e.line(),
            "{\"ev\":\"post_send\",\"q\":\"jfs1\",\"op\":\"WRITE_IMM\",\"opcode\":1,\"flags\":32,\"user_ctx\":\"0x0000000000000005\",\"target\":\"tjetty1\",\"imm\":\"0x0000000000000077\",\"src\":[{\"seg\":\"seg1\",\"off\":16,\"len\":512},{\"seg\":null,\"off\":null,\"len\":0}],\"dst\":[{\"seg\":\"unknown\",\"off\":null,\"len\":8}],\"ret\":0}"
        );
        let rejected = Event::PostSend {
            q: "jetty2",
            opcode: 0xff,
            flags: 0,
            user_ctx: 0,
            target: None,
            imm: None,
            src: &[],
            dst: &[],
            ret: -22,
        };
        assert_eq!(
            rejected.line(),
            "{\"ev\":\"post_send\",\"q\":\"jetty2\",\"op\":\"UNKNOWN\",\"opcode\":255,\"flags\":0,\"user_ctx\":\"0x0000000000000000\",\"target\":null,\"imm\":null,\"src\":[],\"dst\":[],\"ret\":-22}"
        );
        let recv = Event::PostRecv {
            q: "jfr1",
            user_ctx: 1,
            sge: &src[..1],
            ret: 12,
        };
        assert_eq!(
            recv.line(),
            "{\"ev\":\"post_recv\",\"q\":\"jfr1\",\"user_ctx\":\"0x0000000000000001\",\"sge\":[{\"seg\":\"seg1\",\"off\":16,\"len\":512}],\"ret\":12}"
        );
    }

    #[test]
    fn an_event_is_written_only_while_a_sink_is_active() {
        let t = Sink::new();
        let e = Event::PostRecv {
            q: "jfr1",
            user_ctx: 0,
            sge: &[],
            ret: 0,
        };
        t.event(&e);
        t.capture(true);
        t.event(&e);
        assert_eq!(t.take(), vec![e.line()]);
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

    #[test]
    fn a_trace_file_is_private_never_a_link_and_never_another_file() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = std::env::temp_dir().join(format!("trace-open-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let at = |n: &str| dir.join(n).to_str().unwrap().to_string();

        // New: created 0600 (whatever the umask lets through otherwise).
        let t = Sink::new();
        t.open_file(Some(&at("new"))).expect("a new file");
        let m = std::fs::metadata(at("new")).unwrap();
        assert_eq!(m.mode() & 0o777, 0o600, "mode of a new trace file");
        // An existing file of ours is emptied.
        std::fs::write(at("old"), "earlier lines\n").unwrap();
        t.open_file(Some(&at("old")))
            .expect("an existing file of ours");
        assert_eq!(std::fs::metadata(at("old")).unwrap().len(), 0);

        // A link to a file is refused, and the file is untouched.
        std::fs::write(at("victim"), "precious\n").unwrap();
        std::fs::set_permissions(at("victim"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(at("victim"), at("link")).unwrap();
        assert!(t.open_file(Some(&at("link"))).is_err(), "a symbolic link");
        std::fs::hard_link(at("victim"), at("hard")).unwrap();
        assert!(t.open_file(Some(&at("hard"))).is_err(), "a second link");
        assert_eq!(std::fs::read_to_string(at("victim")).unwrap(), "precious\n");
        // A dangling link creates nothing where it points.
        std::os::unix::fs::symlink(at("nowhere"), at("dangling")).unwrap();
        assert!(t.open_file(Some(&at("dangling"))).is_err());
        assert!(!dir.join("nowhere").exists());
        // Not a regular file.
        assert!(
            t.open_file(Some(dir.to_str().unwrap())).is_err(),
            "a directory"
        );
        assert!(t.open_file(Some("/dev/null")).is_err(), "a device");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
