//! The loopback as a provider plugin of the genuine URMA core (`liburma-loopback.so` in the
//! core's plugin directory, `<directory of liburma.so.0>/urma/`).
//!
//! The core loads its plugins with `RTLD_LOCAL`, so nothing the plugin exports is in the global
//! scope: a lookup of `urma_loopback_*` by `dlsym(RTLD_DEFAULT, ..)` finds nothing. This module
//! finds the plugin the process loaded ([`loaded`]), or, before `urma_init` loaded it, the plugin
//! the loaded core would load ([`load_beside_core`]), and looks symbols up in it ([`symbol`]).
//! It also names the two functions only the plugin face exports, through which
//! `liburma-loopback-preload.so` answers the core's device queries with the plugin's own
//! device attributes (one definition of them, in the provider).

use ranked_lock::{rank, Mutex};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};

use urma_sys::{urma_device_attr_t, urma_eid_info_t};

/// The plugin's file name in the core's plugin directory.
pub const FILE_NAME: &str = "liburma-loopback.so";

/// The helper answering the core's device queries (`LD_PRELOAD`), installed beside the plugin's
/// tools, never in the plugin directory (the core would load it as a provider).
pub const PRELOAD_FILE_NAME: &str = "liburma-loopback-preload.so";

/// The variable that enables the plugin in a process: `URMA_LOOPBACK=1`. Without it the
/// installed plugin stays inert (no device, no file, thread or socket); in a privileged process
/// (`AT_SECURE`) it is ignored, as every `URMA_LOOPBACK*` variable is. The standalone
/// `liburma.so.0` does not read it (always on).
pub const ENABLE_VAR: &str = "URMA_LOOPBACK";

/// The name of the provider (`urma_provider_ops_t.name`, the device's `driver_name`).
pub const PROVIDER_NAME: &str = "loopback";

/// `int urma_loopback_plugin_query_device(const char *dev_name, urma_device_attr_t *attr)`:
/// 0 and `*attr` filled when `dev_name` is a device of the plugin, -1 (nothing written) otherwise.
pub const QUERY_DEVICE: &str = "urma_loopback_plugin_query_device";
/// The type of [`QUERY_DEVICE`].
pub type QueryDeviceFn = unsafe extern "C" fn(*const c_char, *mut urma_device_attr_t) -> c_int;

/// `int urma_loopback_plugin_eid_list(const char *dev_name, urma_eid_info_t *list, uint32_t max,
/// uint32_t *cnt)`: 0 with at most `max` entries written and their number in `*cnt` when
/// `dev_name` is a device of the plugin, -1 otherwise.
pub const EID_LIST: &str = "urma_loopback_plugin_eid_list";
/// The type of [`EID_LIST`].
pub type EidListFn =
    unsafe extern "C" fn(*const c_char, *mut urma_eid_info_t, u32, *mut u32) -> c_int;

/// A handle of the plugin, kept for the life of the process once taken (so that a function
/// pointer found in it never dangles; the core's `dlclose` at `urma_uninit` then leaves the
/// plugin loaded, and its registration with the core stays valid).
static HANDLE: Mutex<usize, { rank::PLUGIN_HANDLE }> = Mutex::new(0);

/// Whether `path`'s file name is the plugin's.
fn is_plugin(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == FILE_NAME)
}

/// The path of the plugin as the loader loaded it, if the process has it loaded.
pub fn loaded() -> Option<PathBuf> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
        // SAFETY: the loader passes a valid info for the duration of the call; data is the
        // `Option<PathBuf>` of `loaded`, alive across dl_iterate_phdr.
        let (name, out) = unsafe { ((*info).dlpi_name, &mut *(data as *mut Option<PathBuf>)) };
        if name.is_null() {
            return 0;
        }
        // SAFETY: dlpi_name is a NUL-terminated string owned by the loader.
        let p = PathBuf::from(
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned(),
        );
        if is_plugin(&p) {
            *out = Some(p);
            return 1;
        }
        0
    }
    let mut found: Option<PathBuf> = None;
    // SAFETY: `each` only reads the info and writes `found`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut found as *mut _ as *mut c_void) };
    found
}

/// The plugin the loaded genuine core would load: `<directory of liburma.so.0>/urma/` +
/// [`FILE_NAME`], if the `liburma.so.0` of the process is a genuine core (it exports
/// `urma_register_provider_ops`) and that file exists.
pub fn beside_core() -> Option<PathBuf> {
    // SAFETY: dlsym on the global scope with a valid C string.
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"urma_register_provider_ops".as_ptr()) };
    if f.is_null() {
        return None;
    }
    // SAFETY: an all-zero Dl_info is a valid out parameter.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: f is an address inside a loaded object; info is a valid out parameter.
    if unsafe { libc::dladdr(f, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
    let core = PathBuf::from(
        unsafe { CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned(),
    );
    let p = core.parent()?.join("urma").join(FILE_NAME);
    p.exists().then_some(p)
}

/// The plugin's handle: the loaded plugin, else the one beside the loaded core, loaded here
/// (its constructor registers it with the core, and `urma_init` later finds it loaded).
/// `None` when the process runs no genuine core with the plugin.
fn handle() -> Option<*mut c_void> {
    let mut h = ranked_lock::lock(&HANDLE);
    if *h != 0 {
        return Some(*h as *mut c_void);
    }
    let (path, flags) = match loaded() {
        Some(p) => (p, libc::RTLD_NOW | libc::RTLD_NOLOAD),
        None => (beside_core()?, libc::RTLD_NOW | libc::RTLD_LOCAL),
    };
    let c = CString::new(path.into_os_string().into_encoded_bytes()).ok()?;
    // SAFETY: valid C string and flags; the handle is kept for the life of the process.
    let p = unsafe { libc::dlopen(c.as_ptr(), flags) };
    if p.is_null() {
        return None;
    }
    *h = p as usize;
    Some(p)
}

/// Loads the plugin beside the loaded genuine core if no plugin is loaded yet; whether one is
/// loaded afterwards.
pub fn load_beside_core() -> bool {
    handle().is_some()
}

/// `name` in the plugin (see [`handle`]), or `None`.
pub fn symbol(name: &str) -> Option<*mut c_void> {
    let h = handle()?;
    let n = CString::new(name).ok()?;
    // SAFETY: live handle, valid C string.
    let p = unsafe { libc::dlsym(h, n.as_ptr()) };
    (!p.is_null()).then_some(p)
}
