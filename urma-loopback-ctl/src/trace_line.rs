//! The trace's sinks and line pieces, shared by the loopback (`urma-loopback/src/trace.rs`) and the
//! interposition layer (`urma-interpose/src/trace.rs`), which write the same JSON-lines format
//! (docs/loopback.md) so that the harness's normaliser reads either.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// The trace's name of a WR / CR opcode.
pub fn opcode_name(op: u32) -> &'static str {
    match op {
        u::URMA_OPC_WRITE => "WRITE",
        u::URMA_OPC_WRITE_IMM => "WRITE_IMM",
        u::URMA_OPC_WRITE_NOTIFY => "WRITE_NOTIFY",
        u::URMA_OPC_READ => "READ",
        u::URMA_OPC_CAS => "CAS",
        u::URMA_OPC_SWAP => "SWAP",
        u::URMA_OPC_FADD => "FADD",
        u::URMA_OPC_FSUB => "FSUB",
        u::URMA_OPC_FAND => "FAND",
        u::URMA_OPC_FOR => "FOR",
        u::URMA_OPC_FXOR => "FXOR",
        u::URMA_OPC_SEND => "SEND",
        u::URMA_OPC_SEND_IMM => "SEND_IMM",
        u::URMA_OPC_SEND_INVALIDATE => "SEND_INVALIDATE",
        u::URMA_OPC_NOP => "NOP",
        u::URMA_OPC_WRITE_ATOMIC => "WRITE_ATOMIC",
        u::URMA_OPC_FLUSH_DMA => "FLUSH_DMA",
        _ => "UNKNOWN",
    }
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
    fn line_pieces() {
        assert_eq!(hex(0x2a), "\"0x000000000000002a\"");
        assert_eq!(json_str("a\"b\\\u{1}"), "\"a\\\"b\\\\\\u0001\"");
        assert_eq!(opcode_name(u::URMA_OPC_SEND_IMM), "SEND_IMM");
        assert_eq!(opcode_name(0xff), "UNKNOWN");
    }
}
