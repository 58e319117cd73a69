//! Loading a library by path with the global scope and finding its functions, for the tests that
//! drive the genuine URMA core through `dlopen` (urma-sys, urma-loopback-preload). Standalone, so
//! that crates below testkit include it with `#[path]`, as they do `paths.rs` and `target.rs`.

use std::ffi::{c_void, CStr, CString};
use std::path::Path;

/// `dlopen(path, RTLD_NOW | RTLD_GLOBAL)`; panics with `dlerror`'s message when it fails. The
/// handle is kept for the life of the process.
pub fn open_global(path: &Path) -> *mut c_void {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a NUL-terminated path; loading the library runs its constructors.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if h.is_null() {
        // SAFETY: dlerror's message is a NUL-terminated string.
        let e = unsafe { CStr::from_ptr(libc::dlerror()) };
        panic!("dlopen {}: {}", path.display(), e.to_string_lossy());
    }
    h
}

/// The function `name` of `lib` as the function-pointer type `T`; panics when `lib` has no
/// `name`.
///
/// # Safety
/// `lib` is a live handle from [`open_global`] (or `dlopen`), and `T` is the function-pointer
/// type of the C prototype of `name` (the URMA headers').
pub unsafe fn symbol<T: Copy>(lib: *mut c_void, name: &str) -> T {
    assert_eq!(size_of::<T>(), size_of::<*mut c_void>());
    let c = CString::new(name).expect("name");
    // SAFETY: `lib` is a live handle (the caller's promise) and `c` is NUL-terminated.
    let p = unsafe { libc::dlsym(lib, c.as_ptr()) };
    assert!(!p.is_null(), "{name} not found in the library");
    // SAFETY: `p` is the address of the function `name`, whose C prototype is T (the caller's
    // promise); both are pointers of the same size (asserted above).
    unsafe { std::mem::transmute_copy(&p) }
}
