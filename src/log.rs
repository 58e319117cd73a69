//! Logging (contract §8): severity encoding, line formats and the callback / file / syslog / silent backends.
//!
//! Lines are formatted into fixed stack buffers, so logging never allocates.

use ranked_lock::{rank, Mutex, MutexGuard};
use std::ffi::c_char;
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicI32, Ordering};

/// The function behind a non-NULL `log_callback_t`.
pub use crate::abi::log_fn as LogCallback;

/// Internal severities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Level {
    /// DEBUG = -1
    Debug = -1,
    /// INFO = 0
    Info = 0,
    /// WARN = 1
    Warn = 1,
    /// ERROR = 2
    Error = 2,
}

/// Message body prefix of every library line.
pub const PREFIX: &str = "[PIPLN RH2D] ";
/// Formatted text (prefix + message) limit in bytes.
pub const TEXT_MAX: usize = 1023;
/// Whole line limit in bytes.
pub const LINE_MAX: usize = 1407;

/// Level value handed to the callback: `(level & 0xFF) | ((vlevel & 0xFF) << 8)`.
pub const fn encode_level(level: i32, vlevel: i32) -> i32 {
    (level & 0xFF) | ((vlevel & 0xFF) << 8)
}

enum Backend {
    /// Nothing chosen yet, or nothing available (re-evaluated on every message).
    Unset,
    /// syslog opened (re-evaluated on every message so that a file set later can take over).
    Syslog,
    /// `OST_LOG_FILE_PATH` file (final).
    File(i32),
    /// Registered callback (final).
    Callback(LogCallback),
}

struct State {
    threshold: i32,
    backend: Backend,
    syslog_open: bool,
}

static STATE: Mutex<State, { rank::LOG }> = Mutex::new(State {
    threshold: Level::Debug as i32,
    backend: Backend::Unset,
    syslog_open: false,
});

/// Copy of `State::threshold` readable without the lock, so that a filtered-out message costs one
/// load and no formatting (the macros test it before building their arguments).
static THRESHOLD: AtomicI32 = AtomicI32::new(Level::Debug as i32);

/// `true` when a message of `level` passes the current threshold.
#[inline(always)]
pub fn enabled(level: Level) -> bool {
    level as i32 >= THRESHOLD.load(Ordering::Relaxed)
}

fn lock() -> MutexGuard<'static, State, { rank::LOG }> {
    ranked_lock::lock(&STATE)
}

/// Fixed-size, NUL-terminable buffer that silently truncates.
pub(crate) struct StackBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
    truncated: bool,
}

impl<const N: usize> StackBuf<N> {
    pub(crate) const fn new() -> Self {
        StackBuf {
            buf: [0; N],
            len: 0,
            truncated: false,
        }
    }
    /// Usable capacity (one byte is kept for the NUL).
    const fn cap() -> usize {
        N - 1
    }
    pub(crate) fn push_bytes(&mut self, b: &[u8]) {
        let room = Self::cap() - self.len;
        let take = b.len().min(room);
        if take < b.len() {
            self.truncated = true;
        }
        self.buf[self.len..self.len + take].copy_from_slice(&b[..take]);
        self.len += take;
    }
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.truncated = false;
    }
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    /// NUL-terminated pointer to the contents.
    pub(crate) fn as_cstr_ptr(&mut self) -> *const c_char {
        self.buf[self.len] = 0;
        self.buf.as_ptr().cast()
    }
}

impl<const N: usize> fmt::Write for StackBuf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push_bytes(s.as_bytes());
        Ok(())
    }
}

fn basename(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

/// Registers the callback backend (`os_transport_log_reg`).
pub fn register(level: i32, cb: Option<LogCallback>) -> i32 {
    let Some(cb) = cb else { return -1 };
    let mut st = lock();
    close_backend(&mut st);
    st.threshold = level;
    THRESHOLD.store(level, Ordering::Relaxed);
    st.backend = Backend::Callback(cb);
    0
}

fn close_backend(st: &mut State) {
    if let Backend::File(fd) = st.backend {
        // SAFETY: fd was opened by this module and is closed exactly once, here.
        unsafe { libc::close(fd) };
    }
    if st.syslog_open {
        // SAFETY: closelog has no preconditions.
        unsafe { libc::closelog() };
        st.syslog_open = false;
    }
}

const SYSLOG_SOCKETS: [&std::ffi::CStr; 3] = [
    c"/dev/log",
    c"/run/systemd/journal/dev-log",
    c"/run/systemd/journal/syslog",
];

fn syslog_available() -> bool {
    SYSLOG_SOCKETS.iter().any(|p| {
        // SAFETY: p is a valid NUL-terminated path.
        unsafe { libc::access(p.as_ptr(), libc::F_OK) == 0 }
    })
}

fn try_open_file() -> Option<i32> {
    // SAFETY: getenv with a valid NUL-terminated name; the result is only read immediately.
    let path = unsafe { libc::getenv(c"OST_LOG_FILE_PATH".as_ptr()) };
    if path.is_null() {
        return None;
    }
    // SAFETY: path is a NUL-terminated string from the environment.
    let fd = unsafe {
        libc::open(
            path,
            libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC,
            0o644 as libc::c_uint,
        )
    };
    (fd >= 0).then_some(fd)
}

/// Logger entry point (the legacy `ost_log_write`).
pub fn write(level: Level, vlevel: i32, file: &str, line: u32, args: fmt::Arguments<'_>) {
    let mut st = lock();
    if (level as i32) < st.threshold {
        return;
    }
    // Backend selection: only ever moves up: unset/syslog -> file -> callback.
    if matches!(st.backend, Backend::Unset | Backend::Syslog) {
        if let Some(fd) = try_open_file() {
            close_backend(&mut st);
            st.backend = Backend::File(fd);
        } else if syslog_available() {
            if !st.syslog_open {
                // SAFETY: the ident is a static NUL-terminated string that outlives the connection.
                unsafe {
                    libc::openlog(
                        c"os_transport".as_ptr(),
                        libc::LOG_PID | libc::LOG_NDELAY,
                        libc::LOG_USER,
                    )
                };
                st.syslog_open = true;
            }
            st.backend = Backend::Syslog;
        } else {
            if st.syslog_open {
                // SAFETY: closelog has no preconditions.
                unsafe { libc::closelog() };
                st.syslog_open = false;
            }
            st.backend = Backend::Unset;
            return;
        }
    }
    let mut text: StackBuf<{ TEXT_MAX + 1 }> = StackBuf::new();
    text.push_bytes(PREFIX.as_bytes());
    let _ = text.write_fmt(args);
    let mut out: StackBuf<{ LINE_MAX + 1 }> = StackBuf::new();
    match st.backend {
        Backend::Callback(cb) => {
            drop(st);
            let _ = write!(out, "[ost:{}:{}] ", basename(file), line);
            out.push_bytes(text.as_bytes());
            out.push_bytes(b"\n");
            let level = encode_level(level as i32, vlevel);
            if !held::keep(cb, level, out.as_bytes()) {
                call(cb, level, &mut out);
            }
        }
        Backend::File(fd) => {
            let (name, _) = names(level);
            let mut now: libc::timespec = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `now` is a live, writable timespec on this frame.
            unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
            // SAFETY: tm is fully written by localtime_r.
            let mut tm: libc::tm = unsafe { std::mem::zeroed() };
            // SAFETY: valid in/out pointers.
            unsafe { libc::localtime_r(&now.tv_sec, &mut tm) };
            // SAFETY: no preconditions.
            let pid = unsafe { libc::getpid() };
            // SAFETY: gettid syscall has no arguments.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) };
            let _ = write!(
                out,
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03} [{}] [pid={} tid={}] [ost:{}:{}] ",
                tm.tm_year + 1900,
                tm.tm_mon + 1,
                tm.tm_mday,
                tm.tm_hour,
                tm.tm_min,
                tm.tm_sec,
                now.tv_nsec / 1_000_000,
                name,
                pid,
                tid,
                basename(file),
                line
            );
            out.push_bytes(text.as_bytes());
            out.push_bytes(b"\n");
            let b = out.as_bytes();
            // SAFETY: fd is our open file; b is a valid buffer of b.len() bytes.
            unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) };
        }
        Backend::Syslog => {
            let _ = write!(out, "[ost:{}:{}] ", basename(file), line);
            out.push_bytes(text.as_bytes());
            out.push_bytes(b"\n");
            let (_, prio) = names(level);
            let p = out.as_cstr_ptr();
            // SAFETY: constant format string with one NUL-terminated %s argument.
            unsafe { libc::syslog(prio, c"%s".as_ptr(), p) };
        }
        Backend::Unset => {}
    }
}

/// Runs the application's log callback on one formatted line.
fn call<const N: usize>(cb: LogCallback, level: i32, line: &mut StackBuf<N>) {
    let p = line.as_cstr_ptr();
    // SAFETY: cb is the registered C callback; p is NUL-terminated and valid for the call.
    unsafe { cb(level, p) };
}

/// Lines for the log callback are never delivered while the library may hold an internal lock:
/// the application's callback may call the library back (cancel a request, destroy the instance),
/// and doing that under one of our locks would deadlock. Every API call and every worker task
/// runs inside a [`hold`]; lines logged meanwhile are kept, formatted, in a per-thread queue and
/// delivered, in order, when the outermost hold ends, which is after every lock it took has been
/// released. The file and syslog backends run no application code and write at once.
pub mod held {
    use super::{call, LogCallback, StackBuf, LINE_MAX};
    use std::cell::{Cell, RefCell};

    /// Most bytes of text kept per thread while held; lines beyond it are counted and dropped.
    pub const MAX_BYTES: usize = 64 * 1024;

    struct Line {
        cb: LogCallback,
        level: i32,
        end: usize,
    }

    #[derive(Default)]
    struct Queue {
        lines: Vec<Line>,
        text: Vec<u8>,
        dropped: u32,
    }

    /// Set in a thread's [`STATE`] while it keeps lines; the bits below count its nested holds.
    const PENDING: u32 = 1 << 31;

    thread_local! {
        /// Nesting depth of this thread's holds, plus [`PENDING`].
        static STATE: Cell<u32> = const { Cell::new(0) };
        static QUEUE: RefCell<Queue> = RefCell::new(Queue::default());
    }

    /// While alive, callback lines of this thread are kept (see the module documentation). It
    /// points at its thread's [`STATE`], so ending it costs no thread-local lookup; the raw pointer
    /// also keeps it on that thread (not `Send`).
    #[must_use = "the hold ends when dropped"]
    pub struct Hold(*const Cell<u32>);

    /// Starts (or nests) a hold on this thread.
    #[inline]
    pub fn hold() -> Hold {
        Hold(STATE.with(|s| {
            s.set(s.get() + 1);
            s as *const Cell<u32>
        }))
    }

    impl Drop for Hold {
        #[inline]
        fn drop(&mut self) {
            // SAFETY: the pointer is this thread's STATE, taken by `hold` on this same thread (a
            // Hold is not Send); STATE has a const initialiser and no destructor, so it stays
            // valid for as long as the thread runs code that can drop a Hold.
            let s = unsafe { &*self.0 };
            let v = s.get() - 1;
            if v == PENDING {
                s.set(0);
                deliver();
            } else {
                s.set(v);
            }
        }
    }

    /// Keeps a line for later delivery if a hold is active; `false` means "deliver it now".
    pub(super) fn keep(cb: LogCallback, level: i32, line: &[u8]) -> bool {
        let held = STATE.with(|s| {
            let v = s.get();
            let held = v & !PENDING != 0;
            if held {
                s.set(v | PENDING);
            }
            held
        });
        if !held {
            return false;
        }
        // A thread being torn down cannot keep anything: deliver at once rather than lose it.
        QUEUE
            .try_with(|q| {
                let Ok(mut q) = q.try_borrow_mut() else {
                    return false;
                };
                if q.text.len() + line.len() > MAX_BYTES {
                    q.dropped = q.dropped.saturating_add(1);
                } else {
                    q.text.extend_from_slice(line);
                    let end = q.text.len();
                    q.lines.push(Line { cb, level, end });
                }
                true
            })
            .unwrap_or(false)
    }

    /// Delivers every kept line of this thread, in the order logged.
    fn deliver() {
        let Ok(Some(q)) = QUEUE.try_with(|q| {
            let mut q = q.try_borrow_mut().ok()?;
            (!q.lines.is_empty() || q.dropped != 0).then(|| std::mem::take(&mut *q))
        }) else {
            return;
        };
        let mut start = 0;
        let mut buf: StackBuf<{ LINE_MAX + 1 }> = StackBuf::new();
        for l in &q.lines {
            buf.clear();
            buf.push_bytes(&q.text[start..l.end]);
            start = l.end;
            call(l.cb, l.level, &mut buf);
        }
        if q.dropped != 0 {
            if let Some(l) = q.lines.last() {
                buf.clear();
                let _ = std::fmt::Write::write_fmt(
                    &mut buf,
                    format_args!(
                        "{}{} log lines dropped: more than {} bytes were logged during one call\n",
                        super::PREFIX,
                        q.dropped,
                        MAX_BYTES
                    ),
                );
                call(
                    l.cb,
                    super::encode_level(super::Level::Warn as i32, -1),
                    &mut buf,
                );
            }
        }
        // Give the (now empty) buffers back so that their capacity is reused, unless the callbacks
        // logged through the library meanwhile.
        let (mut lines, mut text) = (q.lines, q.text);
        lines.clear();
        text.clear();
        let _ = QUEUE.try_with(|cur| {
            if let Ok(mut cur) = cur.try_borrow_mut() {
                if cur.lines.is_empty() && cur.dropped == 0 {
                    cur.lines = lines;
                    cur.text = text;
                }
            }
        });
    }

    /// Number of lines this thread keeps now (tests).
    #[cfg(test)]
    pub fn kept() -> usize {
        QUEUE.with(|q| q.borrow().lines.len())
    }
}

pub use held::hold;

fn names(level: Level) -> (&'static str, i32) {
    match level {
        Level::Debug => ("DEBUG", libc::LOG_DEBUG),
        Level::Info => ("INFO", libc::LOG_INFO),
        Level::Warn => ("WARN", libc::LOG_WARNING),
        Level::Error => ("ERROR", libc::LOG_ERR),
    }
}

/// Line at `level` with verbosity `v`, skipped without formatting when the level is filtered out.
macro_rules! log_at { ($l:expr, $v:expr, $($a:tt)*) => { if $crate::log::enabled($l) { $crate::log::write($l, $v, file!(), line!(), format_args!($($a)*)) } } }
/// INFO line.
macro_rules! info { ($($a:tt)*) => { $crate::log::log_at!($crate::log::Level::Info, -1, $($a)*) } }
/// WARN line.
macro_rules! warning { ($($a:tt)*) => { $crate::log::log_at!($crate::log::Level::Warn, -1, $($a)*) } }
/// ERROR line.
macro_rules! error { ($($a:tt)*) => { $crate::log::log_at!($crate::log::Level::Error, -1, $($a)*) } }
/// DEBUG line with verbosity v (1 or 2).
macro_rules! debug { ($v:expr, $($a:tt)*) => { $crate::log::log_at!($crate::log::Level::Debug, $v, $($a)*) } }
pub(crate) use {debug, error, info, log_at, warning};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_encoding_matches_spec_table() {
        assert_eq!(encode_level(Level::Info as i32, -1), 0xFF00);
        assert_eq!(encode_level(Level::Warn as i32, -1), 0xFF01);
        assert_eq!(encode_level(Level::Error as i32, -1), 0xFF02);
        assert_eq!(encode_level(Level::Debug as i32, 1), 0x01FF);
        assert_eq!(encode_level(Level::Debug as i32, 2), 0x02FF);
        assert_eq!(encode_level(2, 0), 2);
    }

    std::thread_local! {
        static SEEN: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    unsafe extern "C" fn record(_level: i32, msg: *const c_char) {
        // SAFETY: the library passes a NUL-terminated line, valid during the call.
        let s = unsafe { std::ffi::CStr::from_ptr(msg) }
            .to_string_lossy()
            .into_owned();
        SEEN.with(|v| v.borrow_mut().push(s));
    }

    fn seen() -> Vec<String> {
        SEEN.with(|v| std::mem::take(&mut *v.borrow_mut()))
    }

    #[test]
    fn held_lines_are_delivered_in_order_when_the_outermost_hold_ends() {
        // The callback records per thread, so other tests logging meanwhile do not interfere.
        std::thread::spawn(|| {
            assert_eq!(register(Level::Debug as i32, Some(record)), 0);
            let outer = hold();
            error!("first");
            let inner = hold();
            warning!("second");
            drop(inner);
            assert!(
                seen().is_empty(),
                "nothing is delivered while a hold is active"
            );
            assert_eq!(held::kept(), 2);
            drop(outer);
            let lines = seen();
            assert_eq!(lines.len(), 2, "{lines:?}");
            assert!(lines[0].ends_with("[PIPLN RH2D] first\n"), "{lines:?}");
            assert!(lines[1].ends_with("[PIPLN RH2D] second\n"), "{lines:?}");
            assert_eq!(held::kept(), 0);
            error!("unheld");
            assert_eq!(
                seen().len(),
                1,
                "without a hold a line is delivered at once"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn held_lines_beyond_the_bound_are_counted_and_reported() {
        std::thread::spawn(|| {
            assert_eq!(register(Level::Debug as i32, Some(record)), 0);
            let h = hold();
            let body = "x".repeat(1000);
            let n = held::MAX_BYTES / 1000 + 10;
            for _ in 0..n {
                error!("{}", body);
            }
            let kept = held::kept();
            assert!(kept < n && kept > n - 20, "{kept} of {n}");
            drop(h);
            let lines = seen();
            assert_eq!(lines.len(), kept + 1);
            let last = lines.last().unwrap();
            assert!(
                last.contains(&format!("{} log lines dropped", n - kept)),
                "{last}"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn stack_buf_truncates() {
        let mut b: StackBuf<8> = StackBuf::new();
        let _ = write!(b, "0123456789");
        assert_eq!(b.as_bytes(), b"0123456");
        assert!(b.truncated);
        assert_eq!(basename("src/a/b.rs"), "b.rs");
    }
}
