//! `urma_sysfs_dev_t`, the structure [`urma_register_sysfs_dev`](crate::urma_register_sysfs_dev)
//! takes: how a provider adds a device it made itself (`URMA_SYSFS_DEV_FLAG_DRIVER_CREATED`) to
//! the core's device list.
//!
//! The structure (and `urma_driver_t`, which it points to) is declared in a header of the core
//! that the SDK does not install, so nothing outside the core promises its layout. It is pinned
//! here per core version, one module each ([`v0_0_3`]), and [`Layout`] names the known ones.
//! A plugin uses it in three steps, in its `init` op:
//!
//! 1. [`Layout::for_loaded_core`] (with the address of a core function) or
//!    [`Layout::for_core_version`]: the layout of the core in use, or an error with a reason when
//!    the version is not one of [`Layout::KNOWN`]. Nothing is ever written through a guessed
//!    layout: with an unknown core, log the reason and fail `init`.
//! 2. [`NewDevice::build`]: allocates the structure and its `urma_device_t` with `calloc` (the core
//!    `free`s both at `urma_uninit`) and fills everything the provider owns.
//! 3. `urma_register_sysfs_dev(dev.as_ptr())`; on 0, [`NewDevice::registered`] checks what the
//!    core wrote (the driver it matched and that driver's ops, the device's ops, the list links)
//!    and hands the device over; on failure, drop the `NewDevice` (that frees it).

use std::ffi::{c_char, c_void, CStr, OsStr};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::{self, NonNull};

use crate::{
    urma_device_attr_t, urma_device_t, urma_provider_ops_t, urma_sysfs_dev, urma_transport_type_t,
    URMA_MAX_NAME, URMA_MAX_PATH, URMA_SYSFS_DEV_FLAG_DRIVER_CREATED,
};

/// The directory of the character devices the core gives its own devices as `urma_device_t.path`
/// (`<dir>/<name>`); [`NewDevice::build`] does the same.
pub const DEVICE_DIR: &str = "/dev/uburma";

/// The layout of the URMA core 0.0.3 (`liburma.so.0.0.3`), measured on the genuine headers of
/// UMDK commit 00cc16f1 on x86_64 and aarch64 (`tests/data/urma_provider_abi_<arch>.json`).
pub mod v0_0_3 {
    use std::ffi::c_char;
    use std::mem::{align_of, offset_of, size_of};

    use crate::{urma_device_attr_t, urma_device_t, urma_provider_ops_t, urma_transport_type_t};

    /// The core's library version (`liburma.so.0.<this>` is `liburma.so.0.0.3`).
    pub const CORE_VERSION: &str = "0.0.3";

    /// Capacity of [`urma_sysfs_dev_t::sysfs_path`], NUL included.
    pub const URMA_MAX_SYSFS_PATH: usize = 256;

    /// The core's intrusive doubly linked list node.
    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    pub struct ub_list {
        pub prev: *mut ub_list,
        pub next: *mut ub_list,
    }

    /// A registered provider, as the core keeps it (allocated by `urma_register_provider_ops`).
    #[repr(C)]
    #[derive(Debug)]
    pub struct urma_driver_t {
        /// The `urma_provider_ops_t` the provider registered.
        pub ops: *mut urma_provider_ops_t,
        /// Link in the core's driver list.
        pub node: ub_list,
    }

    /// A device in the core's device list.
    #[repr(C)]
    pub struct urma_sysfs_dev_t {
        /// Device name (NUL-terminated): `urma_get_device_by_name` finds the device by the copy in
        /// `urma_device_t.name`, registration refuses a second device of this name.
        pub dev_name: [c_char; crate::URMA_MAX_NAME as usize],
        /// A directory the core reads `eids/eid<i>` and `port<i>/...` files from.
        pub sysfs_path: [c_char; URMA_MAX_SYSFS_PATH],
        /// Matched against the registered providers' `urma_provider_ops_t.name`.
        pub driver_name: [c_char; crate::URMA_MAX_NAME as usize],
        /// Informational: the core reads the transport type from `urma_device_t.type`.
        pub transport_type: urma_transport_type_t,
        /// Written by the core: the driver whose ops matched.
        pub driver: *mut urma_driver_t,
        /// The device the applications see.
        pub urma_device: *mut urma_device_t,
        /// The device's capabilities: the core checks every create call against them.
        pub dev_attr: urma_device_attr_t,
        /// With `vendor_id`, matched against the providers' match tables.
        pub device_id: u16,
        pub vendor_id: u16,
        /// Written by the core: link in its device list.
        pub node: ub_list,
        /// `URMA_SYSFS_DEV_FLAG_DRIVER_CREATED` for a provider-made device.
        pub flag: u32,
        pub time_created: libc::timespec,
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    const _: () = {
        // Measured the same on both architectures.
        assert!(size_of::<ub_list>() == 16);
        assert!(offset_of!(ub_list, prev) == 0);
        assert!(offset_of!(ub_list, next) == 8);
        assert!(size_of::<urma_driver_t>() == 24);
        assert!(offset_of!(urma_driver_t, ops) == 0);
        assert!(offset_of!(urma_driver_t, node) == 8);
        assert!(size_of::<urma_sysfs_dev_t>() == 952);
        assert!(align_of::<urma_sysfs_dev_t>() == 8);
        assert!(offset_of!(urma_sysfs_dev_t, dev_name) == 0);
        assert!(offset_of!(urma_sysfs_dev_t, sysfs_path) == 64);
        assert!(offset_of!(urma_sysfs_dev_t, driver_name) == 320);
        assert!(offset_of!(urma_sysfs_dev_t, transport_type) == 384);
        assert!(offset_of!(urma_sysfs_dev_t, driver) == 392);
        assert!(offset_of!(urma_sysfs_dev_t, urma_device) == 400);
        assert!(offset_of!(urma_sysfs_dev_t, dev_attr) == 408);
        assert!(offset_of!(urma_sysfs_dev_t, device_id) == 904);
        assert!(offset_of!(urma_sysfs_dev_t, vendor_id) == 906);
        assert!(offset_of!(urma_sysfs_dev_t, node) == 912);
        assert!(offset_of!(urma_sysfs_dev_t, flag) == 928);
        assert!(offset_of!(urma_sysfs_dev_t, time_created) == 936);
    };
}

/// The `urma_sysfs_dev_t` layouts this crate knows, by core version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// [`v0_0_3`]
    V0_0_3,
}

impl Layout {
    /// Every known layout.
    pub const KNOWN: &'static [Layout] = &[Layout::V0_0_3];

    /// The core library version this layout was measured on (`"0.0.3"`).
    pub const fn core_version(self) -> &'static str {
        match self {
            Layout::V0_0_3 => v0_0_3::CORE_VERSION,
        }
    }

    /// `sizeof(urma_sysfs_dev_t)`.
    pub const fn size(self) -> usize {
        match self {
            Layout::V0_0_3 => size_of::<v0_0_3::urma_sysfs_dev_t>(),
        }
    }

    const fn max_sysfs_path(self) -> usize {
        match self {
            Layout::V0_0_3 => v0_0_3::URMA_MAX_SYSFS_PATH,
        }
    }

    /// The layout of core library version `version` (`"0.0.3"`), or an
    /// [`ErrorKind::UnknownLayout`] error naming the known ones.
    pub fn for_core_version(version: &str) -> Result<Self, Error> {
        Self::KNOWN
            .iter()
            .copied()
            .find(|l| l.core_version() == version)
            .ok_or_else(|| {
                Error::unknown(format!(
                    "urma_sysfs_dev_t: no known layout for URMA core version {version} (known: {}); \
                     not registering a device",
                    Self::known_versions()
                ))
            })
    }

    /// The layout of the core library at `path` (e.g. the `liburma.so.0` the process loaded):
    /// the version is read from the name of the file the path resolves to, `liburma.so.X.Y.Z`.
    pub fn for_core_file(path: &Path) -> Result<Self, Error> {
        let real = std::fs::canonicalize(path).map_err(|e| {
            Error::unknown(format!(
                "urma_sysfs_dev_t: cannot resolve the URMA core {}: {e}; not registering a device",
                path.display()
            ))
        })?;
        let name = real.file_name().unwrap_or_default().to_string_lossy();
        match core_version_of_file_name(&name) {
            Some(version) => Self::for_core_version(version),
            None => Err(Error::unknown(format!(
                "urma_sysfs_dev_t: cannot tell the URMA core version from {} (want liburma.so.X.Y.Z; \
                 known: {}); not registering a device",
                real.display(),
                Self::known_versions()
            ))),
        }
    }

    /// The layout of the loaded core library that contains `symbol`, the address of one of its
    /// functions (e.g. `urma_register_sysfs_dev as *const c_void`): [`Layout::for_core_file`] of
    /// the file the dynamic loader loaded it from. The address is only looked up, never read.
    // dladdr compares the address with the loaded objects' ranges; it never dereferences it.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn for_loaded_core(symbol: *const c_void) -> Result<Self, Error> {
        // SAFETY: all-zero is a valid Dl_info (null pointers), and dladdr only fills it.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr looks the address up in the loader's tables without dereferencing it;
        // `info` is a valid, writable Dl_info.
        let found = unsafe { libc::dladdr(symbol, &mut info) } != 0;
        if !found || info.dli_fname.is_null() {
            return Err(Error::unknown(format!(
                "urma_sysfs_dev_t: {symbol:p} is in no loaded library; cannot find the URMA core"
            )));
        }
        // SAFETY: dli_fname is the NUL-terminated name the loader keeps for the loaded object.
        let file = unsafe { CStr::from_ptr(info.dli_fname) };
        Self::for_core_file(Path::new(OsStr::from_bytes(file.to_bytes())))
    }

    fn known_versions() -> String {
        let versions: Vec<&str> = Self::KNOWN.iter().map(|l| l.core_version()).collect();
        versions.join(", ")
    }
}

/// `"0.0.3"` from `"liburma.so.0.0.3"`; `None` unless the name ends in three numbers.
fn core_version_of_file_name(name: &str) -> Option<&str> {
    let version = name.strip_prefix("liburma.so.")?;
    let parts: Vec<&str> = version.split('.').collect();
    let numeric = |p: &&str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    (parts.len() == 3 && parts.iter().all(numeric)).then_some(version)
}

/// What went wrong, for a plugin to log before failing `init`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    reason: String,
}

/// The kinds of [`Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The core's version is not one of [`Layout::KNOWN`], or cannot be found.
    UnknownLayout,
    /// A [`DeviceSpec`] field does not fit the structure or the core's rules.
    InvalidSpec,
    /// `calloc` failed.
    OutOfMemory,
    /// After `urma_register_sysfs_dev` returned 0, the structure does not hold what the core
    /// writes there: its layout is not the one assumed.
    NotAsRegistered,
}

impl Error {
    fn new(kind: ErrorKind, reason: String) -> Self {
        Error { kind, reason }
    }

    fn unknown(reason: String) -> Self {
        Self::new(ErrorKind::UnknownLayout, reason)
    }

    fn invalid(reason: String) -> Self {
        Self::new(ErrorKind::InvalidSpec, reason)
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// One line saying what failed and why.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Error {}

/// What the provider says about a device it makes.
#[derive(Clone, Copy)]
pub struct DeviceSpec<'a> {
    /// Device name, at most 63 bytes, e.g. `"loopback0"`.
    pub name: &'a str,
    /// A directory holding `eids/eid<i>` (one EID per file, e.g. `fe80::1`) and, for each of
    /// `dev_attr.port_cnt` ports, `port<i>/{max_mtu,state,active_width,active_speed,active_mtu}`.
    pub sysfs_path: &'a Path,
    /// Must equal the provider's `urma_provider_ops_t.name` unless its match table claims
    /// (`vendor_id`, `device_id`).
    pub driver_name: &'a str,
    /// `urma_device_t.type`, which the core's checks read (UB forces shared JFRs, and more).
    pub transport_type: urma_transport_type_t,
    /// The capabilities the core checks every create call against; `dev_cap.max_eid_cnt` > 0.
    pub dev_attr: &'a urma_device_attr_t,
    pub vendor_id: u16,
    pub device_id: u16,
}

/// A `urma_sysfs_dev_t` and its `urma_device_t`, both from `calloc`, filled and not yet the
/// core's: dropping it frees both. See the [module documentation](self) for the sequence.
#[derive(Debug)]
pub struct NewDevice {
    layout: Layout,
    sysfs_dev: NonNull<c_void>,
    device: NonNull<urma_device_t>,
}

impl NewDevice {
    /// Allocates and fills a device of layout `layout`: in `urma_sysfs_dev_t` the name, sysfs
    /// path, driver name, transport type, device pointer, capabilities, vendor and device ids,
    /// `URMA_SYSFS_DEV_FLAG_DRIVER_CREATED` and the creation time; in `urma_device_t` the name,
    /// the path `/dev/uburma/<name>`, the transport type and the back pointer. The core writes
    /// the rest (the matched driver, the device's ops, the list links) at registration.
    pub fn build(layout: Layout, spec: &DeviceSpec<'_>) -> Result<Self, Error> {
        let name = c_string("name", spec.name.as_bytes(), URMA_MAX_NAME as usize)?;
        let driver_name = c_string(
            "driver_name",
            spec.driver_name.as_bytes(),
            URMA_MAX_NAME as usize,
        )?;
        let sysfs_path = c_string(
            "sysfs_path",
            spec.sysfs_path.as_os_str().as_bytes(),
            layout.max_sysfs_path(),
        )?;
        let device_path = c_string(
            "device path",
            format!("{DEVICE_DIR}/{}", spec.name).as_bytes(),
            URMA_MAX_PATH as usize,
        )?;
        if spec.dev_attr.dev_cap.max_eid_cnt == 0 {
            return Err(Error::invalid(format!(
                "device {}: dev_attr.dev_cap.max_eid_cnt is 0 (urma_get_eid_list would find no EID)",
                spec.name
            )));
        }

        let device = calloc::<urma_device_t>(size_of::<urma_device_t>())?;
        let sysfs_dev = match calloc::<c_void>(layout.size()) {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: `device` came from calloc just above and is referenced nowhere else.
                unsafe { libc::free(device.as_ptr().cast()) };
                return Err(e);
            }
        };
        // SAFETY: `device` is a zero-filled, exclusively owned allocation of a urma_device_t (all
        // its fields are integers, arrays and pointers, valid when zero).
        let dev = unsafe { &mut *device.as_ptr() };
        copy_c_string(&mut dev.name, &name);
        copy_c_string(&mut dev.path, &device_path);
        dev.type_ = spec.transport_type;
        dev.sysfs_dev = sysfs_dev.as_ptr().cast::<urma_sysfs_dev>();

        match layout {
            Layout::V0_0_3 => {
                // SAFETY: `sysfs_dev` is a zero-filled, exclusively owned allocation of
                // layout.size() bytes = a v0_0_3::urma_sysfs_dev_t (integers, arrays, pointers
                // and a timespec, all valid when zero).
                let sd = unsafe { &mut *sysfs_dev.as_ptr().cast::<v0_0_3::urma_sysfs_dev_t>() };
                copy_c_string(&mut sd.dev_name, &name);
                copy_c_string(&mut sd.sysfs_path, &sysfs_path);
                copy_c_string(&mut sd.driver_name, &driver_name);
                sd.transport_type = spec.transport_type;
                sd.urma_device = device.as_ptr();
                sd.dev_attr = *spec.dev_attr;
                sd.vendor_id = spec.vendor_id;
                sd.device_id = spec.device_id;
                sd.flag = URMA_SYSFS_DEV_FLAG_DRIVER_CREATED;
                sd.time_created = now();
            }
        }
        Ok(NewDevice {
            layout,
            sysfs_dev,
            device,
        })
    }

    /// The layout the structure was built with.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The argument of `urma_register_sysfs_dev`.
    pub fn as_ptr(&self) -> *mut urma_sysfs_dev {
        self.sysfs_dev.as_ptr().cast()
    }

    /// The device's `urma_device_t`.
    pub fn device(&self) -> *mut urma_device_t {
        self.device.as_ptr()
    }

    /// Hands the device over to the core after `urma_register_sysfs_dev(self.as_ptr())` returned
    /// 0, checking first that the structure holds what the core writes there: a matched driver
    /// whose ops are `ops`, `ops` in the device, and list links that lead back to the device. A
    /// layout the core does not share would leave these NULL (the match reads the names at their
    /// offsets) or elsewhere. `ops` is the table the provider registered.
    ///
    /// Either way the device is the core's from now on (it frees both allocations at
    /// `urma_uninit`; there is no call to take a device back): on `Err` log the reason and fail
    /// `init`. Returns the device's `urma_device_t`.
    ///
    /// # Safety
    ///
    /// `urma_register_sysfs_dev` returned 0 for this device, and no other thread changes the
    /// core's device list during the call (the core calls the providers' `init` ops one after
    /// the other, under no lock of its own).
    pub unsafe fn registered(
        self,
        ops: *const urma_provider_ops_t,
    ) -> Result<NonNull<urma_device_t>, Error> {
        let this = std::mem::ManuallyDrop::new(self);
        let checked = match this.layout {
            // SAFETY: the structure was built as a v0_0_3::urma_sysfs_dev_t; the caller promises
            // the core registered it, so the pointers it holds are the core's or NULL.
            Layout::V0_0_3 => unsafe {
                check_v0_0_3(&*this.sysfs_dev.as_ptr().cast(), this.device.as_ptr(), ops)
            },
        };
        checked.map(|()| this.device).map_err(|what| {
            Error::new(
                ErrorKind::NotAsRegistered,
                format!(
                    "urma_sysfs_dev_t: after urma_register_sysfs_dev returned 0, {what}: the \
                         core's layout is not the one of core version {} this provider assumed",
                    this.layout.core_version()
                ),
            )
        })
    }
}

impl Drop for NewDevice {
    fn drop(&mut self) {
        // SAFETY: both came from calloc in `build`; the core has not taken them (`registered`
        // does not drop), so nothing else refers to them.
        unsafe {
            libc::free(self.sysfs_dev.as_ptr());
            libc::free(self.device.as_ptr().cast());
        }
    }
}

/// What the core writes at registration, read through the v0.0.3 layout; `Err` says what is
/// missing.
///
/// # Safety
///
/// `sd.driver`, `sd.node.prev` and `sd.node.next` are NULL or point to the core's live
/// `urma_driver_t` and list nodes.
unsafe fn check_v0_0_3(
    sd: &v0_0_3::urma_sysfs_dev_t,
    device: *mut urma_device_t,
    ops: *const urma_provider_ops_t,
) -> Result<(), String> {
    if sd.driver.is_null() {
        return Err("urma_sysfs_dev_t.driver is NULL".to_string());
    }
    // SAFETY: non-null, written by the core: its urma_driver_t (caller's promise).
    let driver_ops = unsafe { (*sd.driver).ops };
    if driver_ops.cast_const() != ops {
        return Err(format!(
            "urma_sysfs_dev_t.driver->ops is {driver_ops:p}, not the registered ops {ops:p}"
        ));
    }
    if sd.urma_device != device {
        return Err(format!(
            "urma_sysfs_dev_t.urma_device is {:p}, not the device {device:p}",
            sd.urma_device
        ));
    }
    // SAFETY: `device` is the calloc'd urma_device_t of this structure, still alive (the core
    // frees it only at urma_uninit).
    let device_ops = unsafe { (*device).ops };
    if device_ops.cast_const() != ops {
        return Err(format!(
            "urma_device_t.ops is {device_ops:p}, not the registered ops {ops:p}"
        ));
    }
    let node = ptr::from_ref(&sd.node).cast_mut();
    let (prev, next) = (sd.node.prev, sd.node.next);
    if prev.is_null() || next.is_null() {
        return Err(format!(
            "urma_sysfs_dev_t.node is not linked (prev {prev:p}, next {next:p})"
        ));
    }
    // SAFETY: non-null, written by the core: nodes of its device list (caller's promise).
    let (prev_next, next_prev) = unsafe { ((*prev).next, (*next).prev) };
    if prev_next != node || next_prev != node {
        return Err(format!(
            "urma_sysfs_dev_t.node's neighbours do not link back to it ({prev_next:p}, \
             {next_prev:p}, want {node:p})"
        ));
    }
    Ok(())
}

/// `bytes` as a NUL-terminated string for a `capacity`-byte C array, or why it does not fit.
fn c_string(what: &str, bytes: &[u8], capacity: usize) -> Result<Vec<u8>, Error> {
    if bytes.is_empty() {
        return Err(Error::invalid(format!("device {what} is empty")));
    }
    if bytes.contains(&0) {
        return Err(Error::invalid(format!(
            "device {what} {:?} contains a NUL byte",
            String::from_utf8_lossy(bytes)
        )));
    }
    if bytes.len() >= capacity {
        return Err(Error::invalid(format!(
            "device {what} {:?} is {} bytes; at most {} fit",
            String::from_utf8_lossy(bytes),
            bytes.len(),
            capacity - 1
        )));
    }
    let mut s = bytes.to_vec();
    s.push(0);
    Ok(s)
}

/// Copies a NUL-terminated string from [`c_string`] into a zero-filled C array it fits.
fn copy_c_string(dst: &mut [c_char], src: &[u8]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = s as c_char;
    }
}

fn calloc<T>(size: usize) -> Result<NonNull<T>, Error> {
    // SAFETY: calloc has no preconditions; the result is checked for NULL.
    let p = unsafe { libc::calloc(1, size) };
    NonNull::new(p.cast()).ok_or_else(|| {
        Error::new(
            ErrorKind::OutOfMemory,
            format!("urma_sysfs_dev_t: calloc of {size} bytes failed"),
        )
    })
}

fn now() -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_REALTIME always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts
}
