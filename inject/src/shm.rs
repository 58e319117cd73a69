//! Attaching to the registry object (docs/inject.md, "Attach"): open or create
//! `/os_transport_inject`, check its size, map it, initialise or wait for its creator, reset a
//! foreign version. One mapping per process, shared by every caller through an `Arc`; a failure is
//! remembered for [`RETRY_AFTER`], so a point on the hot path does not retry (and log) per call.

use crate::layout::{REGISTRY_SIZE, SHM_NAME, VERSION};
use crate::lock;
pub use crate::map::Mapping;
use crate::say;
use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ranked_lock::{rank, RwLock};
use std::time::{Duration, Instant};

/// How long a failed attach is remembered before the next call tries again.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How long an attacher waits for the creator's initialisation (or size), as the original: 1000
/// polls 1 ms apart.
const INIT_POLLS: u32 = 1000;

enum State {
    Detached,
    Attached(Arc<Mapping>),
    Failed(Instant),
}

static STATE: RwLock<State, { rank::INJECT_REGISTRY }> = RwLock::new(State::Detached);

fn name() -> CString {
    CString::new(SHM_NAME).expect("no NUL in the name")
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// The registry, attached (or created) on first use; `None` if attaching failed now or less than
/// [`RETRY_AFTER`] ago.
pub fn attach() -> Option<Arc<Mapping>> {
    {
        let s = ranked_lock::read(&STATE);
        match &*s {
            State::Attached(m) => return Some(m.clone()),
            State::Failed(at) if at.elapsed() < RETRY_AFTER => return None,
            _ => {}
        }
    }
    let mut s = ranked_lock::write(&STATE);
    match &*s {
        State::Attached(m) => return Some(m.clone()),
        State::Failed(at) if at.elapsed() < RETRY_AFTER => return None,
        _ => {}
    }
    match open_and_map() {
        Some(m) => {
            let m = Arc::new(m);
            *s = State::Attached(m.clone());
            Some(m)
        }
        None => {
            *s = State::Failed(Instant::now());
            None
        }
    }
}

/// Forgets the mapping (unmapped once its last user is done) and unlinks the name; the next call
/// creates a new object.
pub fn cleanup() {
    say!("Cleaning up shared memory...");
    let old = std::mem::replace(&mut *ranked_lock::write(&STATE), State::Detached);
    drop(old);
    // SAFETY: a valid C string.
    unsafe { libc::shm_unlink(name().as_ptr()) };
}

fn open_and_map() -> Option<Mapping> {
    let n = name();
    let mode: libc::mode_t = 0o666;
    // SAFETY: valid C string and flags.
    let mut fd = unsafe { libc::shm_open(n.as_ptr(), libc::O_RDWR, mode) };
    let mut created = false;
    if fd < 0 && errno().raw_os_error() == Some(libc::ENOENT) {
        // SAFETY: as above.
        fd = unsafe {
            libc::shm_open(
                n.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                mode,
            )
        };
        if fd >= 0 {
            created = true;
        } else if errno().raw_os_error() == Some(libc::EEXIST) {
            // SAFETY: as above.
            fd = unsafe { libc::shm_open(n.as_ptr(), libc::O_RDWR, mode) };
        }
    }
    if fd < 0 {
        say!("shm_open failed: {}", errno());
        return None;
    }
    let give_up = |why: String| {
        say!("{why}");
        // SAFETY: `fd` is ours; the name is unlinked only if this process created it.
        unsafe {
            libc::close(fd);
            if created {
                libc::shm_unlink(n.as_ptr());
            }
        }
        None
    };
    if created {
        // SAFETY: `fd` is an open shared-memory object of ours.
        if unsafe { libc::ftruncate(fd, REGISTRY_SIZE as libc::off_t) } != 0 {
            return give_up(format!("ftruncate failed: {}", errno()));
        }
    } else if let Err(size) = wait_for_size(fd) {
        // The original maps a short object and dies of SIGBUS on the first access.
        return give_up(format!(
            "{SHM_NAME} is {size} bytes, not {REGISTRY_SIZE}: not attached"
        ));
    }
    // SAFETY: maps REGISTRY_SIZE bytes of `fd`, which holds at least that many (created and
    // truncated above, or its size checked).
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            REGISTRY_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return give_up(format!("mmap failed: {}", errno()));
    }
    // SAFETY: `p` maps REGISTRY_SIZE bytes of `fd`, both now owned by the Mapping.
    let m = unsafe { Mapping::new(NonNull::new(p.cast()).expect("mmap returned a mapping"), fd) };
    let r = m.registry();
    let pid = std::process::id();
    if created {
        // SAFETY: the whole object is ours to initialise: no other process uses it before
        // `version` is stored (release) below.
        unsafe { std::ptr::write_bytes(m.as_ptr().cast::<u8>(), 0, REGISTRY_SIZE) };
        r.header.seq.store(1, Ordering::Release);
        r.header.lock.store(0, Ordering::Release);
        r.header.count.store(0, Ordering::Release);
        r.header.version.store(VERSION, Ordering::Release);
        say!("Shared memory created by pid={pid}");
        return Some(m);
    }
    let mut polls = 0;
    while r.header.version.load(Ordering::Acquire) == 0 {
        if polls == INIT_POLLS {
            say!("Timeout waiting for init");
            return None; // the Mapping's drop unmaps and closes
        }
        polls += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    if r.header.version.load(Ordering::Acquire) != VERSION {
        say!("Version mismatch, resetting");
        let g = lock::Guard::acquire(&m)?;
        g.reset(pid as i32);
    } else {
        say!(
            "Attached (points={})",
            r.header.count.load(Ordering::Acquire)
        );
    }
    Some(m)
}

/// Waits (as for the version) until the object `fd` holds the whole registry; its size if it
/// never does. A creator truncates right after creating, so a short object is one whose creator
/// died in between.
fn wait_for_size(fd: libc::c_int) -> Result<(), i64> {
    let mut polls = 0;
    loop {
        // SAFETY: an all-zero stat is a valid out-buffer for fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open; `st` is writable.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(-1);
        }
        if st.st_size as u64 >= REGISTRY_SIZE as u64 {
            return Ok(());
        }
        if polls == INIT_POLLS {
            return Err(st.st_size as i64);
        }
        polls += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
}
