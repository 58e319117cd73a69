//! Loading a `libos_transport` implementation by path, with typed entry points.
//!
//! Prototypes and types mirror `include/os_transport.h` exactly (the layouts are checked by
//! unit tests below). Libraries are opened with `RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND` and never
//! closed (their worker threads may outlive a test).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};

use urma_sys::{
    urma_context_t, urma_jetty_t, urma_jfc_t, urma_jfce_t, urma_jfr_t, urma_jfs_t, urma_status_t,
    urma_target_jetty_t, urma_target_seg_t,
};

/// `DEFAULT_CHUNK_SIZE` (2 MiB).
pub const DEFAULT_CHUNK_SIZE: u32 = 2 * 1024 * 1024;
/// `OS_TRANSPORT_MAX_CHUNK_NUM` (7).
pub const OS_TRANSPORT_MAX_CHUNK_NUM: u32 = 7;
/// `REQUEST_ID_BITS`.
pub const REQUEST_ID_BITS: u32 = 60;
/// `REQUEST_ID_EFFECTIVE_BITS`.
pub const REQUEST_ID_EFFECTIVE_BITS: u32 = 40;
/// Largest transfer (7 chunks, 14 MiB).
pub const MAX_TRANSFER: u32 = DEFAULT_CHUNK_SIZE * OS_TRANSPORT_MAX_CHUNK_NUM;
/// `(uint32_t)-1`, the error return of the uint32_t functions.
pub const OST_ERR: u32 = u32::MAX;

/// `log_callback_t`.
pub type LogCallback = Option<unsafe extern "C" fn(level: c_int, msg: *const c_char)>;
/// `notify_callback_t`.
pub type NotifyCallback = Option<unsafe extern "C" fn(user_data: *mut c_void) -> c_int>;

/// Opaque `task_sync_t`.
#[repr(C)]
pub struct TaskSync {
    _opaque: [u8; 0],
}

/// `os_transport_cfg_t` (64 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OsTransportCfg {
    pub urma_event_mode: bool,
    pub reserved1: [u8; 3],
    pub worker_thread_num: u32,
    pub jfce: *mut urma_jfce_t,
    pub jfc: *mut urma_jfc_t,
    pub recv_queue_capacity: u32,
    pub reserved2: [u32; 9],
}

impl Default for OsTransportCfg {
    fn default() -> Self {
        OsTransportCfg {
            urma_event_mode: false,
            reserved1: [0; 3],
            worker_thread_num: 4,
            jfce: std::ptr::null_mut(),
            jfc: std::ptr::null_mut(),
            recv_queue_capacity: 64,
            reserved2: [0; 9],
        }
    }
}

/// `ost_buffer_info_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OstBufferInfo {
    pub addr: u64,
    pub tseg: *mut urma_target_seg_t,
}

/// `ost_device_info_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OstDeviceInfo {
    pub jfr: *mut urma_jfr_t,
    pub jetty: *mut urma_jetty_t,
    pub dst: *mut c_void,
}

/// `jetty_mode_t`.
pub type JettyMode = u32;
pub const JETTY_MODE_SIMPLEX: JettyMode = 0;
pub const JETTY_MODE_DUPLEX: JettyMode = 1;

/// `urma_jetty_info_t` (`struct urma_jetty_info`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct UrmaJettyInfo {
    pub jfs: *mut urma_jfs_t,
    pub jetty: *mut urma_jetty_t,
    pub tjetty: *mut urma_target_jetty_t,
    pub jetty_mode: JettyMode,
}

/// `os_transport_user_data_t` helpers: `request_id` bits 0..59, `chunk_type` bit 60,
/// `chunk_id` bits 61..63.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserData {
    pub request_id: u64,
    pub chunk_type: u8,
    pub chunk_id: u8,
}

impl UserData {
    /// Encodes into the 64-bit `user_ctx` value.
    pub fn encode(self) -> u64 {
        (self.request_id & ((1u64 << REQUEST_ID_BITS) - 1))
            | ((self.chunk_type as u64 & 1) << 60)
            | ((self.chunk_id as u64 & 7) << 61)
    }
    /// Decodes a 64-bit `user_ctx` value.
    pub fn decode(v: u64) -> Self {
        UserData {
            request_id: v & ((1u64 << REQUEST_ID_BITS) - 1),
            chunk_type: ((v >> 60) & 1) as u8,
            chunk_id: ((v >> 61) & 7) as u8,
        }
    }
}

/// A loaded `libos_transport` with its ten entry points.
pub struct OsTransportLib {
    handle: *mut c_void,
    pub path: PathBuf,
    pub os_transport_log_reg: unsafe extern "C" fn(level: c_int, cb: LogCallback) -> c_int,
    pub os_transport_init: unsafe extern "C" fn(
        urma_ctx: *mut urma_context_t,
        ost_cfg: *mut OsTransportCfg,
        handle: *mut *mut c_void,
    ) -> u32,
    pub os_transport_reg_jfc: unsafe extern "C" fn(
        jfce: *mut urma_jfce_t,
        jfc: *mut urma_jfc_t,
        handle: *mut c_void,
    ) -> u32,
    #[allow(clippy::type_complexity)]
    pub os_transport_send: unsafe extern "C" fn(
        handle: *mut c_void,
        jetty_info: *mut UrmaJettyInfo,
        local_src: *mut OstBufferInfo,
        remote_dst: *mut OstBufferInfo,
        len: u32,
        server_key: u64,
        client_key: u64,
        ret_sync_handle: *mut *mut TaskSync,
        urma_status: *mut urma_status_t,
    ) -> u32,
    pub os_transport_recv: unsafe extern "C" fn(
        handle: *mut c_void,
        host_src: *mut OstBufferInfo,
        device_dst: *mut OstDeviceInfo,
        len: u32,
        client_key: u64,
        ret_sync_handle: *mut *mut TaskSync,
        notify_callback: NotifyCallback,
    ) -> u32,
    pub os_transport_wake_up_task:
        unsafe extern "C" fn(handle: *mut c_void, cr_t: *mut c_void) -> c_int,
    pub wait_and_free_sync: unsafe extern "C" fn(
        handle: *mut c_void,
        sync_handle: *mut TaskSync,
        urma_status: *mut urma_status_t,
    ) -> u32,
    pub wait_and_free_sync_timeout: unsafe extern "C" fn(
        handle: *mut c_void,
        sync_handle: *mut TaskSync,
        timeout_ms: i64,
        urma_status: *mut urma_status_t,
    ) -> u32,
    pub os_transport_cancel_tasks: unsafe extern "C" fn(
        handle: *mut c_void,
        sync_handle: *mut *mut TaskSync,
        request_id: u64,
    ) -> u32,
    pub os_transport_destroy: unsafe extern "C" fn(handle: *mut c_void) -> u32,
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

    /// Loads the Rust build ([`rust_lib_path`]).
    pub fn load_rust() -> Result<Self, String> {
        Self::load(rust_lib_path())
    }

    /// Loads the C reference build ([`legacy_lib_path`]).
    pub fn load_legacy() -> Result<Self, String> {
        Self::load(legacy_lib_path())
    }

    /// The raw dlopen handle (for extra `dlsym` lookups).
    pub fn raw_handle(&self) -> *mut c_void {
        self.handle
    }
}

/// `<target>/<profile>` of the running test binary (`<target>/<profile>/deps/<bin>` or
/// `<target>/<profile>/<bin>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().expect("exe dir").to_path_buf();
    if dir
        .file_name()
        .is_some_and(|n| n == "deps" || n == "examples")
    {
        dir.parent().expect("profile dir").to_path_buf()
    } else {
        dir
    }
}

/// `<target>` of the running test binary.
pub fn target_dir() -> PathBuf {
    profile_dir().parent().expect("target dir").to_path_buf()
}

/// The Rust library: `<target>/<profile>/libos_transport.so`.
pub fn rust_lib_path() -> PathBuf {
    profile_dir().join("libos_transport.so")
}

/// The C reference library: `$LEGACY_LIB`, else the one legacy-c's build script built for this
/// profile (`os_transport_legacy::legacy_lib_path`).
pub fn legacy_lib_path() -> PathBuf {
    match std::env::var_os("LEGACY_LIB") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => os_transport_legacy::legacy_lib_path(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_os_transport_h() {
        assert_eq!(size_of::<OsTransportCfg>(), 64);
        assert_eq!(offset_of!(OsTransportCfg, worker_thread_num), 4);
        assert_eq!(offset_of!(OsTransportCfg, jfce), 8);
        assert_eq!(offset_of!(OsTransportCfg, jfc), 16);
        assert_eq!(offset_of!(OsTransportCfg, recv_queue_capacity), 24);
        assert_eq!(size_of::<OstBufferInfo>(), 16);
        assert_eq!(size_of::<OstDeviceInfo>(), 24);
        assert_eq!(size_of::<UrmaJettyInfo>(), 32);
        assert_eq!(offset_of!(UrmaJettyInfo, jetty_mode), 24);
    }

    #[test]
    fn user_data_round_trip() {
        let u = UserData {
            request_id: 0xABCDE12345,
            chunk_type: 1,
            chunk_id: 6,
        };
        assert_eq!(u.encode(), 0xABCDE12345 | (1 << 60) | (6u64 << 61));
        assert_eq!(UserData::decode(u.encode()), u);
        // Sentinel chunk id 7 on SEND_IMM.
        let s = UserData {
            request_id: 1,
            chunk_type: 0,
            chunk_id: 7,
        };
        assert_eq!(s.encode() >> 61, 7);
    }
}
