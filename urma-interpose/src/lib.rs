//! urma-interpose: a provider-independent trace and fault layer for URMA.
//!
//! The layer is a `liburma.so.0` of its own (SONAME `liburma.so.0`, built as
//! `<target>/<profile>/deps/liburma_interpose.so` and presented as
//! `<target>/<profile>/interpose/liburma.so.0` by `testkit::paths::interpose_dir`). Found first by the dynamic loader, it is the
//! `liburma.so.0` of the process: of the application and of every library that needs
//! `liburma.so.0`, including libraries dlopened with `RTLD_DEEPBIND`. It loads the real provider
//! library by path (`URMA_INTERPOSE_REAL`, see [`real`]) and forwards each of the 49 URMA
//! functions to it, with the prototypes of the committed `urma-sys` bindings.
//!
//! On the way it
//! * records every WR posted and every CR polled in the loopback's trace format ([`trace`],
//!   names of objects and segments tracked from the create / register / import calls in
//!   [`objects`]);
//! * injects faults for any provider ([`faults`]): fail the Nth post, complete the Nth send WR
//!   with an error status, drop / duplicate / hold and reorder / delay CRs at poll time.
//!
//! Control: the C-callable `urma_interpose_*` functions ([`ctl`], `include/urma_interpose.h`),
//! reached with `dlsym`, and the variables `URMA_INTERPOSE_TRACE` / `URMA_INTERPOSE_KNOBS`, which
//! [`ctl`]'s load-time constructor applies after loading the real library.
//!
//! This file holds what every module uses (the panic boundary `guard`,
//! `say_line`) and uses no module itself.
//!
//! `docs/compat.md` (section "The interposition layer") explains the design.

pub mod ctl;
pub mod datapath;
pub mod faults;
pub mod objects;
pub mod real;
pub mod trace;

/// Runs `f` behind a panic boundary: a panic never unwinds into C; `default` is returned instead.
pub(crate) fn guard<R>(default: R, f: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            crate::say!("urma-interpose: internal panic caught at the C boundary");
            default
        }
    }
}

/// Writes one line on stderr with plain `write(2)` calls. The layer may speak before `main` (its
/// load-time constructor runs then): Rust 1.82's standard error stream makes the calling thread
/// known to `std` on first use, and a Rust program whose runtime then starts on that thread
/// aborts ("thread::set_current should only be called once per thread"). A plain write has no
/// such side effect.
pub(crate) fn say_line(args: std::fmt::Arguments<'_>) {
    let line = format!("{args}\n");
    let mut rest = line.as_bytes();
    while !rest.is_empty() {
        // SAFETY: writes bytes of a live buffer to file descriptor 2; nothing is retained.
        let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            break;
        }
        rest = &rest[n as usize..];
    }
}

/// `eprintln!` for the layer: see [`say_line`].
macro_rules! say {
    ($($t:tt)*) => {
        $crate::say_line(format_args!($($t)*))
    };
}
pub(crate) use say;
