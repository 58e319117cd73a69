//! The registry's operations (docs/inject.md, "API" and "Execute"): the setters, clear, execute
//! with its count and percent modes and its ring record, and the tool's read of the ring.
//! Names are the bytes before the NUL; a setter refuses a name of [`NAME_LEN`] bytes or more
//! (the original stores it truncated but looks it up in full, so it leaks a slot per set and
//! never fires).

use crate::layout::*;
use crate::lock::Guard;
use crate::map::Mapping;
use crate::shm::attach;
use crate::{now_ns, say};
use std::cell::Cell;
use std::ptr::{addr_of, addr_of_mut};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The stored name of a slot: the bytes before its first NUL.
fn stored_name(p: *const Point) -> Vec<u8> {
    // SAFETY: `p` is a slot of the mapping, read under the lock.
    let raw = unsafe { addr_of!((*p).name).read() };
    let end = raw.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
    raw[..end].to_vec()
}

/// The first used slot named `name`.
fn find(g: &Guard<'_>, name: &[u8]) -> Option<usize> {
    let used = (g.registry().header.count.load(Ordering::Acquire) as usize).min(MAX_POINTS);
    (0..used).find(|&i| stored_name(g.point(i)) == name)
}

/// `buf` holding `s` truncated to `N - 1` bytes, NUL-padded.
fn c_buf<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut b = [0u8; N];
    let n = s.len().min(N - 1);
    b[..n].copy_from_slice(&s[..n]);
    b
}

/// The slot named `name`, created if there is none and the table has room.
fn find_or_create(g: &Guard<'_>, name: &[u8]) -> Option<usize> {
    if let Some(i) = find(g, name) {
        return Some(i);
    }
    let h = &g.registry().header;
    let i = h.count.load(Ordering::Acquire) as usize;
    if i >= MAX_POINTS {
        return None;
    }
    let p = g.point(i);
    // SAFETY: slot i is unused (at or past `count`) and ours under the lock; all-zero is a valid
    // Point.
    unsafe {
        std::ptr::write_bytes(p, 0, 1);
        addr_of_mut!((*p).name).write(c_buf(name));
    }
    h.count.store(i as u32 + 1, Ordering::Release);
    Some(i)
}

/// The action a setter arms, with its parameter.
enum Arm {
    Sleep(u32),
    Error(i32),
    Print([u8; MESSAGE_LEN]),
}

/// Arms `name` under the lock: the three setters.
fn set(name: &[u8], arm: Arm) -> i32 {
    if name.len() >= NAME_LEN {
        say!(
            "Set refused: a point name has at most {} bytes",
            NAME_LEN - 1
        );
        return -1;
    }
    let Some(m) = attach() else { return -1 };
    let Some(g) = Guard::acquire(&m) else {
        return -1;
    };
    let Some(i) = find_or_create(&g, name) else {
        return -1;
    };
    let p = g.point(i);
    // SAFETY: slot i of the mapping under the lock: its plain fields are ours to write, `enabled`
    // is an atomic.
    unsafe {
        match arm {
            Arm::Sleep(ms) => {
                addr_of_mut!((*p).action_type).write(ACTION_SLEEP);
                addr_of_mut!((*p).sleep_ms).write(ms);
            }
            Arm::Error(code) => {
                addr_of_mut!((*p).action_type).write(ACTION_RETURN_ERROR);
                addr_of_mut!((*p).return_value).write(code);
            }
            Arm::Print(msg) => {
                addr_of_mut!((*p).action_type).write(ACTION_PRINT);
                addr_of_mut!((*p).message).write(msg);
            }
        }
        (*p).enabled.store(1, Ordering::Release);
    }
    let h = &g.registry().header;
    h.writer_pid
        .store(std::process::id() as i32, Ordering::Release);
    h.seq.fetch_add(1, Ordering::AcqRel);
    0
}

/// Arms `name` to sleep `ms` milliseconds.
pub fn set_sleep(name: &[u8], ms: u32) -> i32 {
    let r = set(name, Arm::Sleep(ms));
    if r == 0 {
        say!("Set: {} = sleep({} ms)", show(name), ms);
    }
    r
}

/// Arms `name` to return the error `code`.
pub fn set_return_error(name: &[u8], code: i32) -> i32 {
    let r = set(name, Arm::Error(code));
    if r == 0 {
        say!("Set: {} = error({})", show(name), code);
    }
    r
}

/// Arms `name` to print `message` (at most 127 bytes kept).
pub fn set_print(name: &[u8], message: &[u8]) -> i32 {
    set(name, Arm::Print(c_buf(message)))
}

/// Percent (`arg <= 100`) or count (`arg > 100`: `arg - 100` firings) mode of an existing slot.
pub fn set_frequency(name: &[u8], arg: u32) -> i32 {
    let Some(m) = attach() else { return -1 };
    let Some(g) = Guard::acquire(&m) else {
        return -1;
    };
    let Some(i) = find(&g, name) else { return -1 };
    let p = g.point(i);
    // SAFETY: slot i under the lock; `trigger_count` is an atomic.
    unsafe {
        if arg <= 100 {
            addr_of_mut!((*p).frequency_percent).write(arg);
            addr_of_mut!((*p).trigger_limit).write(0);
        } else {
            (*p).trigger_count.store(arg - 100, Ordering::Release);
            addr_of_mut!((*p).trigger_limit).write(arg - 100);
            addr_of_mut!((*p).frequency_percent).write(0);
        }
    }
    g.registry().header.seq.fetch_add(1, Ordering::AcqRel);
    0
}

/// Disables the first slot named `name` (its parameters and counters stay).
pub fn clear(name: &[u8]) {
    let Some(m) = attach() else { return };
    let Some(g) = Guard::acquire(&m) else { return };
    if let Some(i) = find(&g, name) {
        // SAFETY: slot i of the mapping; `enabled` is an atomic.
        unsafe { (*g.point(i)).enabled.store(0, Ordering::Release) };
        say!("Cleared: {}", show(name));
    }
    g.registry().header.seq.fetch_add(1, Ordering::AcqRel);
}

/// Disables every slot and refills every count-mode budget.
pub fn clear_all() {
    let Some(m) = attach() else { return };
    {
        let Some(g) = Guard::acquire(&m) else { return };
        let used = (g.registry().header.count.load(Ordering::Acquire) as usize).min(MAX_POINTS);
        for i in 0..used {
            let p = g.point(i);
            // SAFETY: slot i under the lock.
            unsafe {
                (*p).enabled.store(0, Ordering::Release);
                let limit = addr_of!((*p).trigger_limit).read();
                (*p).trigger_count.store(limit, Ordering::Release);
            }
        }
        g.registry().header.seq.fetch_add(1, Ordering::AcqRel);
    }
    say!("All cleared");
}

/// Slots used, read without the lock; 0 if attaching fails.
pub fn get_count() -> u32 {
    attach().map_or(0, |m| m.registry().header.count.load(Ordering::Acquire))
}

/// What fired, copied out of the slot under the lock.
struct Firing {
    action: i32,
    value: i32,
    sleep_ms: u32,
    message: [u8; MESSAGE_LEN],
}

thread_local! {
    /// Per-thread random state of percent mode, seeded on first use from the time and the pid.
    static SEED: Cell<u64> = const { Cell::new(0) };
}

/// A number in 0..100 from this thread's generator (xorshift64*).
fn percent_roll() -> u32 {
    SEED.with(|s| {
        let mut x = s.get();
        if x == 0 {
            // SAFETY: time(NULL) has no preconditions.
            let t = unsafe { libc::time(std::ptr::null_mut()) } as u64;
            x = (t ^ u64::from(std::process::id())) | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as u32 % 100
    })
}

/// Decides under the lock whether `name` fires, and if so records it in the ring.
fn fire(m: &Mapping, name: &[u8]) -> Option<Firing> {
    let g = Guard::acquire(m)?;
    let p = g.point(find(&g, name)?);
    // SAFETY: the slot under the lock; its atomics through shared references.
    let f = unsafe {
        if (*p).enabled.load(Ordering::Acquire) == 0 {
            return None;
        }
        if addr_of!((*p).trigger_limit).read() > 0 {
            let c = &(*p).trigger_count;
            if c.fetch_sub(1, Ordering::AcqRel) == 0 {
                c.fetch_add(1, Ordering::AcqRel);
                return None;
            }
        } else {
            let pct = addr_of!((*p).frequency_percent).read();
            if (1..100).contains(&pct) && percent_roll() >= pct {
                return None;
            }
        }
        Firing {
            action: addr_of!((*p).action_type).read(),
            value: addr_of!((*p).return_value).read(),
            sleep_ms: addr_of!((*p).sleep_ms).read(),
            message: addr_of!((*p).message).read(),
        }
    };
    let r = g.registry();
    let t = r.ring_tail.load(Ordering::Acquire) as usize % RING_LEN;
    let rec = Record {
        timestamp_ns: now_ns(),
        name: c_buf(name),
        action_type: f.action,
        return_value: f.value,
    };
    // SAFETY: ring record t of the mapping, written under the lock.
    unsafe { addr_of_mut!((*g.registry_ptr()).ring[t]).write(rec) };
    r.ring_tail
        .store(((t + 1) % RING_LEN) as u32, Ordering::Release);
    Some(f)
}

/// Passes point `name`: `Some(v)` when an error fires (the caller fails with `v`); a sleep
/// sleeps and a print prints, outside the lock, and return `None` like everything else.
pub fn execute(name: &[u8]) -> Option<i32> {
    let m = attach()?;
    let f = fire(&m, name)?;
    drop(m);
    match f.action {
        ACTION_SLEEP => {
            say!("Executing sleep: {} = {} ms", show(name), f.sleep_ms);
            // No 32-bit wrap of ms * 1000, unlike the original's usleep.
            std::thread::sleep(Duration::from_millis(u64::from(f.sleep_ms)));
            None
        }
        ACTION_RETURN_ERROR => {
            say!("Executing error: {} = {}", show(name), f.value);
            Some(f.value)
        }
        ACTION_PRINT => {
            let end = f.message.iter().position(|&b| b == 0).unwrap_or(0);
            say!("{}: {}", show(name), show(&f.message[..end]));
            None
        }
        _ => None,
    }
}

/// The tool's `verify`: whether a ring record named `name` is at most `window_ns` old, scanning
/// newest to oldest without the lock; `None` if the registry cannot be attached.
pub fn triggered_within(name: &[u8], window_ns: u64) -> Option<bool> {
    let m = attach()?;
    let r = m.registry();
    let now = now_ns();
    let tail = r.ring_tail.load(Ordering::Acquire) as usize;
    let hit = (1..=RING_LEN).any(|back| {
        let j = (tail + RING_LEN - back) % RING_LEN;
        // SAFETY: record j of the mapping, read without the lock as the original does (a torn
        // record at worst reads as another name or time).
        let rec = unsafe { addr_of!((*m.as_ptr()).ring[j]).read_volatile() };
        let end = rec.name.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
        &rec.name[..end] == name && now.saturating_sub(rec.timestamp_ns) <= window_ns
    });
    Some(hit)
}

fn show(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}
