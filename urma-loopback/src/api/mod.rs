//! The 49 exported URMA functions (prototypes exactly as in `urma_api.h`), one file per object
//! family: [`device`] (init, devices, contexts, async events), [`jfc`] (JFCE and JFC), [`jetty`]
//! (JFS, JFR, jetty), [`import`] (imports, advise, bind), [`seg`] (segments, token ids) and
//! [`post`] (work requests). This module holds what they share: limits, the device, errors.
//!
//! Every export runs behind a panic boundary ([`entry`], or [`guard`] for the send posts) and
//! checks each handle against the
//! registry first: NULL, unknown or deleted handles give `URMA_EINVAL` (status functions),
//! NULL (pointer functions), -1 (int functions) or nothing (void functions).

use std::collections::VecDeque;
use std::ffi::c_int;
#[cfg(not(feature = "plugin"))]
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use ranked_lock::{rank, Condvar, Mutex};
use std::time::Duration;

use urma_sys as u;
use urma_sys::flags;

pub(crate) use crate::boundary::{entry, entry_hot};
use crate::datapath;
use crate::knobs;
use crate::objects::RecvQ;
use crate::queues::{EvState, Jfc, Jfce};
use crate::registry::{
    self as reg, get_ctx, get_jetty, get_jfc, get_jfce, get_jfr, get_jfs, get_tjetty, get_token_id,
    initialized, next_id, next_name, CBox, Ctx, ISeg, Jetty, Jfr, Jfs, Kind, Obj, Seg, SendQ,
    TJetty, Target, TokenIdObj,
};
use crate::trace;
#[cfg(not(feature = "plugin"))]
use crate::util::set_log_func;
use crate::util::{guard, lock, log_err, zeroed};

/// Device name.
pub const DEV_NAME: &str = "loopback0";
/// Largest depth accepted for JFC/JFS/JFR/jetty queues.
pub const MAX_DEPTH: u32 = 1 << 20;
/// Largest SGE count per WR.
pub const MAX_SGE: u32 = 16;
/// Largest message.
pub const MAX_MSG: u32 = u32::MAX;

/// The single EID of loopback0: ::ffff:127.0.0.1.
pub fn eid() -> u::urma_eid_t {
    crate::cobj::loopback_eid()
}

/// The transport type of loopback0 (UB, as the hardware it stands in for).
pub const TRANSPORT: u::urma_transport_type_t = u::URMA_TRANSPORT_UB;

#[cfg(not(feature = "plugin"))]
struct Device(CBox<u::urma_device_t>);

/// loopback0's `urma_device_t`: in the standalone face a static of the library; in the plugin
/// face the one the genuine core took at registration (NULL outside `urma_init`/`urma_uninit`).
#[cfg(not(feature = "plugin"))]
fn device_ptr() -> *mut u::urma_device_t {
    static DEV: std::sync::OnceLock<Device> = std::sync::OnceLock::new();
    DEV.get_or_init(|| {
        let mut d: u::urma_device_t = zeroed();
        for (i, b) in DEV_NAME.bytes().enumerate() {
            d.name[i] = b as c_char;
        }
        let path = format!("/sys/class/ubcore/{DEV_NAME}");
        for (i, b) in path.bytes().enumerate() {
            d.path[i] = b as c_char;
        }
        d.type_ = TRANSPORT;
        Device(CBox::new(d))
    })
    .0
    .ptr()
}

/// In the plugin face, loopback0 as the genuine core took it at registration: set by
/// [`crate::plugin`] in the provider's `init`, NULL before it and after `uninit`.
#[cfg(feature = "plugin")]
pub(crate) static REGISTERED_DEVICE: std::sync::atomic::AtomicPtr<u::urma_device_t> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

#[cfg(feature = "plugin")]
fn device_ptr() -> *mut u::urma_device_t {
    REGISTERED_DEVICE.load(Ordering::Acquire)
}

fn dev_ok(dev: *const u::urma_device_t) -> bool {
    !dev.is_null() && std::ptr::eq(dev, device_ptr())
}

fn einval(what: &str) -> u::urma_status_t {
    log_err(&format!("{what}: invalid argument"));
    u::URMA_EINVAL
}

fn null<T>(what: &str) -> *mut T {
    log_err(&format!("{what}: invalid argument"));
    std::ptr::null_mut()
}
/// The token an import presents (`None` for a NULL pointer).
fn given_token(t: *mut u::urma_token_t) -> Option<u32> {
    // SAFETY: a non-NULL token pointer is caller-owned and readable.
    (!t.is_null()).then(|| unsafe { (*t).token })
}

/// Whether an id or address names another process: a uasid other than 0 and our context's.
fn foreign(uasid: u32, c: &Ctx) -> bool {
    uasid != 0 && uasid != c.uasid
}

/// Whether an import presents the right token (`checked`: the object has a token policy).
fn token_ok(checked: bool, expected: u32, given: *mut u::urma_token_t) -> bool {
    if !checked {
        return true;
    }
    if given.is_null() {
        return false;
    }
    // SAFETY: non-NULL caller-owned token.
    unsafe { (*given).token == expected }
}

pub(crate) mod device;
pub(crate) mod import;
pub(crate) mod jetty;
pub(crate) mod jfc;
pub(crate) mod post;
pub(crate) mod seg;
