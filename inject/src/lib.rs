//! The fault-injection registry of libos_transport's inject flavour (docs/inject.md): a
//! host-wide POSIX shared-memory table of named inject points, armed by a tool process and applied
//! by every inject-enabled library on the host the next time it passes a point. The object, its
//! layout, its lock word and protocol, its counters and its ring of records are those of the
//! original library, so that both libraries and both tools meet in the same object.
//!
//! Used by the inject flavour of the Rust library (`os-transport`, cargo feature `inject`) and
//! by the tool `mlcachedirect-inject`. Differences from the original, each safer and none visible
//! to a compatible peer: the object's size is checked before it is mapped, the lock is waited
//! for a bounded time, attach failures are remembered for a second, names of 64 bytes or more are
//! refused, and a sleep never wraps.

pub mod layout;
mod lock;
mod map;
mod ops;
mod shm;

pub use ops::{
    clear, clear_all, execute, get_count, set_frequency, set_print, set_return_error, set_sleep,
    triggered_within,
};
pub use shm::{attach, cleanup, Mapping};

/// Writes one `[OS_TRANSPORT_INJECT] ...` line to stderr, as the original does.
macro_rules! say {
    ($($a:tt)*) => {
        eprintln!("[OS_TRANSPORT_INJECT] {}", format_args!($($a)*))
    };
}
pub(crate) use say;

/// The clock of the ring's timestamps.
pub use ranked_lock::clock::now_ns;

/// For tests: the registry is one object per host, so every test that uses it holds this lock
/// (a `flock` on a file in the temporary directory, across processes, and a mutex within one).
#[doc(hidden)]
pub mod testing {
    use std::fs::File;
    use std::os::fd::AsRawFd;
    use std::sync::{Mutex, MutexGuard};

    static IN_PROCESS: Mutex<()> = Mutex::new(());

    /// Exclusive use of the host's registry until the value is dropped.
    pub struct Exclusive {
        _file: File,
        _guard: MutexGuard<'static, ()>,
    }

    /// Waits for exclusive use of the registry.
    pub fn exclusive() -> Exclusive {
        let guard = IN_PROCESS.lock().unwrap_or_else(|e| e.into_inner());
        let path = std::env::temp_dir().join("os_transport_inject.test-lock");
        let file = File::create(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // SAFETY: a valid open descriptor; flock blocks until the lock is ours.
        let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(r, 0, "flock {}", path.display());
        Exclusive {
            _file: file,
            _guard: guard,
        }
    }

    /// The object's path on Linux.
    pub const SHM_PATH: &str = "/dev/shm/os_transport_inject";
}
