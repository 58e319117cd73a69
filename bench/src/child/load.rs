//! Loading the library under test (so that an allocator preloaded for the allocation cells sees it) and the counting allocator's API.

use std::ffi::CString;
use std::path::Path;

use testkit::OsTransportLib;

/// dlopens `path` without RTLD_DEEPBIND first (so an LD_PRELOAD allocator sees the library's
/// malloc calls), then through the testkit loader, which finds the object already loaded.
/// Returns the library and its mapped address range.
pub(crate) fn load_lib(path: &Path) -> Result<(OsTransportLib, (usize, usize)), String> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: valid C string and flags; the handle is deliberately never closed.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return Err(format!("dlopen {} failed", path.display()));
    }
    let lib = OsTransportLib::load(path)?;
    let range = mapped_range(path)?;
    Ok((lib, range))
}

/// Lowest start and highest end of the mappings of `path` in /proc/self/maps.
pub(super) fn mapped_range(path: &Path) -> Result<(usize, usize), String> {
    let canon = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| e.to_string())?;
    let mut lo = usize::MAX;
    let mut hi = 0usize;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let range = f.next().unwrap_or("");
        let file = f.nth(4).unwrap_or("");
        if Path::new(file) != canon {
            continue;
        }
        if let Some((a, b)) = range.split_once('-') {
            let a = usize::from_str_radix(a, 16).map_err(|e| e.to_string())?;
            let b = usize::from_str_radix(b, 16).map_err(|e| e.to_string())?;
            lo = lo.min(a);
            hi = hi.max(b);
        }
    }
    if lo >= hi {
        return Err(format!("{} is not mapped", canon.display()));
    }
    Ok((lo, hi))
}

/// The allocation counter's `ostbench_alloc_get` and `ostbench_alloc_set_range`.
pub type AllocGet = unsafe extern "C" fn(*mut u64);
pub type AllocSetRange = unsafe extern "C" fn(usize, usize);

pub(super) fn alloc_api() -> Option<(AllocSetRange, AllocGet)> {
    let f = |n: &str| {
        let c = CString::new(n).expect("name");
        // SAFETY: dlsym on the global scope with a valid C string.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr()) }
    };
    let set = f("ostbench_alloc_set_range");
    let get = f("ostbench_alloc_get");
    if set.is_null() || get.is_null() {
        return None;
    }
    // SAFETY: the symbols are the counting allocator's functions with these prototypes.
    unsafe {
        Some((
            testkit::fn_from_ptr::<AllocSetRange>(set),
            testkit::fn_from_ptr::<AllocGet>(get),
        ))
    }
}

/// The allocation counter's counts: the library's allocations, frees and bytes, then the same
/// for every other caller.
pub(crate) fn alloc_snapshot(get: AllocGet) -> [u64; 6] {
    let mut v = [0u64; 6];
    // SAFETY: v has the 6 entries the function writes.
    unsafe { get(v.as_mut_ptr()) };
    v
}
