//! Trace recording: one [`Recorder`] per scenario run, plus the process-wide C callbacks
//! (`notify_callback_t`, one `log_callback_t` per loaded library) that append to the recorder
//! of the running scenario.
//!
//! A raw trace is a list of JSON objects with a kind `k`:
//! * `{"k":"api","line":"send(...) = 0 sync=S1 status=0"}`: an API call, in call order;
//! * `{"k":"wake","key":"req:0x..","line":"..."}`: a CR handed to `os_transport_wake_up_task`;
//! * `{"k":"notify","rid":N,"line":"..."}`: a `notify_callback` invocation and its return;
//! * `{"k":"log","lib":0|1,"level":N,"ok":bool}`: a log callback (level, prefix well formed);
//! * `{"k":"urma","raw":{...}}`: one line of the loopback's trace (see `docs/loopback.md`);
//! * `{"k":"data","line":"..."}` / `{"k":"note","line":"..."}`: data checks and observations (a note
//!   starts with the `[aspect] ` it belongs to).
//!
//! The C runner prints the same objects, one per line.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::lib_under_test::{log_callback_t, notify_callback_t};
use crate::oracle::UserData;

/// Events of one run.
#[derive(Default)]
pub struct Recorder {
    events: Mutex<Vec<Value>>,
    notifies: AtomicU64,
    /// `(request_id, chunk_id, return value)`: the notify callback returns this value for that
    /// chunk (0 otherwise).
    fail_at: Mutex<Vec<(u64, u8, i32)>>,
}

impl Recorder {
    /// A fresh recorder.
    pub fn new() -> Arc<Recorder> {
        Arc::new(Recorder::default())
    }

    /// Appends one event.
    pub fn push(&self, v: Value) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(v);
    }

    /// `{"k":"api","line":..}`.
    pub fn api(&self, line: String) {
        self.push(json!({"k": "api", "line": line}));
    }

    /// `{"k":"note","line":..}`; `line` names its aspect (`aspect::note_line`).
    pub fn note(&self, line: String) {
        self.push(json!({"k": "note", "line": line}));
    }

    /// `{"k":"data","line":..}`.
    pub fn data(&self, line: String) {
        self.push(json!({"k": "data", "line": line}));
    }

    /// A copy of the events so far.
    pub fn events(&self) -> Vec<Value> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Number of notify callbacks so far.
    pub fn notify_count(&self) -> u64 {
        self.notifies.load(Ordering::Acquire)
    }

    /// Waits until at least `n` notify callbacks happened; false after `timeout`.
    pub fn wait_notifies(&self, n: u64, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        while self.notify_count() < n {
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        true
    }

    /// Makes the notify callback return `ret` for chunk `chunk_id` of request `rid`.
    pub fn fail_notify(&self, rid: u64, chunk_id: u8, ret: i32) {
        self.fail_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((rid, chunk_id, ret));
    }
}

static CURRENT: Mutex<Option<Arc<Recorder>>> = Mutex::new(None);

/// Makes `r` the recorder of the running scenario (`None` between scenarios).
pub fn set_current(r: Option<Arc<Recorder>>) {
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = r;
}

fn current() -> Option<Arc<Recorder>> {
    CURRENT.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Formats a user_data value as `{rid=0x..,t=T,id=I}`.
pub fn ud(v: u64) -> String {
    let u = UserData::decode(v);
    format!(
        "{{rid=0x{:x},t={},id={}}}",
        u.request_id, u.chunk_type, u.chunk_id
    )
}

unsafe extern "C" fn notify_cb(user_data: *mut c_void) -> c_int {
    let v = if user_data.is_null() {
        None
    } else {
        // SAFETY: the library passes a pointer to an os_transport_user_data_t (8 bytes), valid
        // during the call.
        Some(unsafe { (user_data as *const u64).read_unaligned() })
    };
    let Some(r) = current() else { return 0 };
    let mut ret = 0;
    let line = match v {
        Some(v) => {
            let u = UserData::decode(v);
            if let Some(&(_, _, x)) = r
                .fail_at
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .find(|(rid, id, _)| *rid == u.request_id && *id == u.chunk_id)
            {
                ret = x;
            }
            r.push(json!({"k": "notify", "rid": u.request_id, "line": format!("notify {} -> {ret}", ud(v))}));
            u.request_id
        }
        None => {
            r.push(json!({"k": "notify", "rid": 0, "line": "notify NULL -> 0"}));
            0
        }
    };
    let _ = line;
    r.notifies.fetch_add(1, Ordering::AcqRel);
    ret
}

/// The harness's `notify_callback_t`.
pub const NOTIFY: notify_callback_t = Some(notify_cb);

fn log_common(lib: u32, level: c_int, msg: *const c_char) {
    let text = if msg.is_null() {
        String::new()
    } else {
        // SAFETY: the library passes a NUL-terminated string valid during the call.
        unsafe { CStr::from_ptr(msg) }
            .to_string_lossy()
            .into_owned()
    };
    if let Some(r) = current() {
        r.push(json!({"k": "log", "lib": lib, "level": level, "ok": log_prefix_ok(&text), "msg": text}));
    }
}

/// True when `msg` has the contract's callback form `"[ost:<file>:<line>] [PIPLN RH2D] <text>\n"`.
pub fn log_prefix_ok(msg: &str) -> bool {
    let Some(rest) = msg.strip_prefix("[ost:") else {
        return false;
    };
    let Some(close) = rest.find("] [PIPLN RH2D] ") else {
        return false;
    };
    let loc = &rest[..close];
    let Some((file, line)) = loc.rsplit_once(':') else {
        return false;
    };
    !file.is_empty() && !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit())
}

unsafe extern "C" fn log_cb_0(level: c_int, msg: *const c_char) {
    log_common(0, level, msg);
}

unsafe extern "C" fn log_cb_1(level: c_int, msg: *const c_char) {
    log_common(1, level, msg);
}

/// The recording log callback of library slot `slot` (0 = reference C, 1 = Rust).
pub fn log_callback(slot: u32) -> log_callback_t {
    if slot == 0 {
        Some(log_cb_0)
    } else {
        Some(log_cb_1)
    }
}

/// Name of a callback level value (§8 of the contract).
pub fn level_name(level: i64) -> String {
    match level {
        0xFF00 => "INFO".into(),
        0xFF01 => "WARN".into(),
        0xFF02 => "ERROR".into(),
        0x01FF => "DEBUG1".into(),
        0x02FF => "DEBUG2".into(),
        other => format!("0x{other:x}"),
    }
}
