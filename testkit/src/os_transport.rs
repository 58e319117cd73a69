//! `libos_transport` under test: a build loaded by path with typed entry points
//! ([`OsTransportLib`]), and the `os_transport.h` argument views of the fixture's objects
//! ([`PairArgs`], [`SegArgs`]).
//!
//! The prototypes use the types of `include/os_transport.h` from the `os-transport-abi` crate
//! (whose layouts `tests/abi_drift.rs` checks against a C compiler). Libraries are opened with
//! `RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND` and never closed (their worker threads may outlive a
//! test). Which build is the Rust library is [`rust_lib_path`]; where the C reference is belongs
//! to whoever builds it (compat-tests' `legacy_lib_path`, the benchmark's own `-O2` build).

use std::ffi::{c_void, CStr, CString};
use std::path::{Path, PathBuf};

use os_transport_abi::exports::*;
pub use os_transport_abi::{
    jetty_mode_t, log_callback_t, notify_callback_t, os_transport_cfg_t, ost_buffer_info_t,
    ost_device_info_t, task_sync_t, urma_jetty_info_t, DEFAULT_CHUNK_SIZE, ERR as OST_ERR,
    JETTY_MODE_DUPLEX, JETTY_MODE_SIMPLEX, MAX_TRANSFER, OS_TRANSPORT_MAX_CHUNK_NUM,
    REQUEST_ID_BITS, REQUEST_ID_EFFECTIVE_BITS,
};

use crate::fixture::{Buffer, EndpointPair, ImportedSeg};
use crate::paths::profile_dir;

/// A loaded `libos_transport` with its ten entry points.
pub struct OsTransportLib {
    handle: *mut c_void,
    pub path: PathBuf,
    pub os_transport_log_reg: os_transport_log_reg_fn,
    pub os_transport_init: os_transport_init_fn,
    pub os_transport_reg_jfc: os_transport_reg_jfc_fn,
    pub os_transport_send: os_transport_send_fn,
    pub os_transport_recv: os_transport_recv_fn,
    pub os_transport_wake_up_task: os_transport_wake_up_task_fn,
    pub wait_and_free_sync: wait_and_free_sync_fn,
    pub wait_and_free_sync_timeout: wait_and_free_sync_timeout_fn,
    pub os_transport_cancel_tasks: os_transport_cancel_tasks_fn,
    pub os_transport_destroy: os_transport_destroy_fn,
}

// SAFETY: the struct only holds a dlopen handle and function pointers, both usable from any
// thread (the library itself documents which calls may run concurrently).
unsafe impl Send for OsTransportLib {}
// SAFETY: see above.
unsafe impl Sync for OsTransportLib {}

/// Reinterprets a `dlsym` result as a function pointer of type `F`.
///
/// # Safety
/// `F` must be an `extern "C"` function-pointer type matching the symbol's real prototype.
pub unsafe fn fn_from_ptr<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: sizes are equal (checked) and the caller guarantees the prototype matches.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

fn dlerror_string() -> String {
    // SAFETY: dlerror returns NULL or a valid C string owned by libc.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dl error".into()
    } else {
        // SAFETY: non-NULL C string from dlerror.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

impl OsTransportLib {
    /// dlopens `path` (RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND) and resolves the ten functions.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, String> {
        let path = path.as_ref().to_path_buf();
        let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: c is a valid C string; flags are valid dlopen flags.
        let h = unsafe {
            libc::dlopen(
                c.as_ptr(),
                libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_DEEPBIND,
            )
        };
        if h.is_null() {
            return Err(format!("dlopen {}: {}", path.display(), dlerror_string()));
        }
        let sym = |name: &str| -> Result<*mut c_void, String> {
            let n = CString::new(name).expect("symbol name");
            // SAFETY: h is a live dlopen handle; n a valid C string.
            let p = unsafe { libc::dlsym(h, n.as_ptr()) };
            if p.is_null() {
                Err(format!("{}: missing symbol {name}", path.display()))
            } else {
                Ok(p)
            }
        };
        macro_rules! f {
            ($name:literal) => {
                // SAFETY: the symbol is the C function of that name declared in os_transport.h;
                // the target fn-pointer type mirrors its prototype exactly.
                unsafe { fn_from_ptr(sym($name)?) }
            };
        }
        Ok(OsTransportLib {
            handle: h,
            path: path.clone(),
            os_transport_log_reg: f!("os_transport_log_reg"),
            os_transport_init: f!("os_transport_init"),
            os_transport_reg_jfc: f!("os_transport_reg_jfc"),
            os_transport_send: f!("os_transport_send"),
            os_transport_recv: f!("os_transport_recv"),
            os_transport_wake_up_task: f!("os_transport_wake_up_task"),
            wait_and_free_sync: f!("wait_and_free_sync"),
            wait_and_free_sync_timeout: f!("wait_and_free_sync_timeout"),
            os_transport_cancel_tasks: f!("os_transport_cancel_tasks"),
            os_transport_destroy: f!("os_transport_destroy"),
        })
    }

    /// The raw dlopen handle (for extra `dlsym` lookups).
    pub fn raw_handle(&self) -> *mut c_void {
        self.handle
    }
}

/// The Rust library: `<target>/<profile>/libos_transport.so`.
pub fn rust_lib_path() -> PathBuf {
    profile_dir().join("libos_transport.so")
}

/// `os_transport_send` / `os_transport_recv` arguments of an [`EndpointPair`].
pub trait PairArgs {
    /// `urma_jetty_info_t` for `os_transport_send` (jfs, jetty, tjetty of the sender).
    fn jetty_info(&self) -> urma_jetty_info_t;
    /// `ost_device_info_t` for `os_transport_recv` (receiver jfr/jetty, destination `dst`).
    fn device_info(&self, dst: *mut c_void) -> ost_device_info_t;
}

impl PairArgs for EndpointPair {
    fn jetty_info(&self) -> urma_jetty_info_t {
        urma_jetty_info_t {
            jfs: self.sender.jfs,
            jetty: self.sender.jetty,
            tjetty: self.sender.tjetty,
            jetty_mode: JETTY_MODE_DUPLEX,
        }
    }

    fn device_info(&self, dst: *mut c_void) -> ost_device_info_t {
        ost_device_info_t {
            jfr: self.receiver.jfr,
            jetty: self.receiver.jetty,
            dst,
        }
    }
}

/// `ost_buffer_info_t` of a segment: {addr, tseg}.
pub trait SegArgs {
    /// For a [`Buffer`]: {addr, local tseg}; for an [`ImportedSeg`]: {addr, imported tseg} (the
    /// `remote_dst` of a send).
    fn info(&self) -> ost_buffer_info_t;
}

impl SegArgs for Buffer {
    fn info(&self) -> ost_buffer_info_t {
        ost_buffer_info_t {
            addr: self.addr(),
            tseg: self.tseg,
        }
    }
}

impl SegArgs for ImportedSeg {
    fn info(&self) -> ost_buffer_info_t {
        ost_buffer_info_t {
            addr: self.addr,
            tseg: self.tseg,
        }
    }
}
