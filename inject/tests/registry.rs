//! The registry's semantics and its bytes in /dev/shm (docs/inject.md), through the crate's API.

use os_transport_inject as inj;
use os_transport_inject::testing::{exclusive, SHM_PATH};
use std::time::{Duration, Instant};

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

fn bytes() -> Vec<u8> {
    std::fs::read(SHM_PATH).expect("the registry object exists")
}

#[test]
fn error_fires_is_recorded_in_the_ring_and_clears() {
    let _x = exclusive();
    inj::cleanup();
    assert_eq!(inj::set_return_error(b"t.reg.err", 7), 0);
    assert_eq!(inj::get_count(), 1);
    assert_eq!(inj::execute(b"t.reg.err"), Some(7));
    assert_eq!(inj::execute(b"t.reg.other"), None);
    assert_eq!(
        inj::triggered_within(b"t.reg.err", 5_000_000_000),
        Some(true)
    );
    assert_eq!(
        inj::triggered_within(b"t.reg.other", 5_000_000_000),
        Some(false)
    );
    // The bytes, at the spec's offsets.
    let b = bytes();
    assert_eq!(b.len(), 13272);
    assert_eq!(u32_at(&b, 0), 0x2025_0413, "version");
    assert_eq!(u32_at(&b, 12), 1, "count");
    assert_eq!(&b[20..30], b"t.reg.err\0", "slot 0 name");
    assert_eq!(u32_at(&b, 20 + 64), 1, "action RETURN_ERROR");
    assert_eq!(u32_at(&b, 20 + 68), 7, "return_value");
    assert_eq!(u32_at(&b, 20 + 204), 1, "enabled");
    assert_eq!(u32_at(&b, 8084), 1, "ring_tail");
    assert_ne!(u64::from_le_bytes(b[8152..8160].try_into().unwrap()), 0);
    assert_eq!(&b[8160..8170], b"t.reg.err\0", "record 0 name");
    assert_eq!(u32_at(&b, 8152 + 72), 1, "record action");
    assert_eq!(u32_at(&b, 8152 + 76), 7, "record value");
    inj::clear(b"t.reg.err");
    assert_eq!(inj::execute(b"t.reg.err"), None);
    assert_eq!(u32_at(&bytes(), 20 + 204), 0, "disabled");
    // A sleep delays and continues.
    assert_eq!(inj::set_sleep(b"t.reg.err", 120), 0);
    let t = Instant::now();
    assert_eq!(inj::execute(b"t.reg.err"), None);
    assert!(t.elapsed() >= Duration::from_millis(120));
    inj::cleanup();
}

#[test]
fn count_and_percent_modes() {
    let _x = exclusive();
    inj::cleanup();
    assert_eq!(inj::set_frequency(b"t.reg.cnt", 102), -1, "unknown name");
    assert_eq!(inj::set_return_error(b"t.reg.cnt", 3), 0);
    assert_eq!(inj::set_frequency(b"t.reg.cnt", 102), 0);
    let fired: Vec<_> = (0..4).map(|_| inj::execute(b"t.reg.cnt")).collect();
    assert_eq!(fired, [Some(3), Some(3), None, None]);
    // An exhausted point stays silent after a set; clear_all refills the budget.
    assert_eq!(inj::set_return_error(b"t.reg.cnt", 4), 0);
    assert_eq!(inj::execute(b"t.reg.cnt"), None);
    inj::clear_all();
    assert_eq!(inj::execute(b"t.reg.cnt"), None, "clear_all disables");
    assert_eq!(inj::set_return_error(b"t.reg.cnt", 4), 0);
    assert_eq!(inj::execute(b"t.reg.cnt"), Some(4));
    // Percent mode: 0 and 100 always, 30 about that often.
    assert_eq!(inj::set_frequency(b"t.reg.cnt", 100), 0);
    assert!((0..50).all(|_| inj::execute(b"t.reg.cnt") == Some(4)));
    assert_eq!(inj::set_frequency(b"t.reg.cnt", 30), 0);
    let n = (0..2000)
        .filter(|_| inj::execute(b"t.reg.cnt").is_some())
        .count();
    assert!((400..800).contains(&n), "30% of 2000 fired {n} times");
    inj::cleanup();
}

#[test]
fn long_names_are_refused_and_the_table_holds_32() {
    let _x = exclusive();
    inj::cleanup();
    let long = [b'x'; 64];
    assert_eq!(inj::set_sleep(&long, 1), -1);
    assert_eq!(inj::set_sleep(&long[..63], 1), 0);
    assert_eq!(inj::execute(&long[..63]), None);
    for i in 1..32 {
        assert_eq!(inj::set_sleep(format!("t.reg.{i}").as_bytes(), 0), 0);
    }
    assert_eq!(inj::get_count(), 32);
    assert_eq!(inj::set_sleep(b"t.reg.full", 0), -1, "table full");
    assert_eq!(
        inj::set_sleep(b"t.reg.5", 0),
        0,
        "an existing name still sets"
    );
    inj::cleanup();
}

/// A registry laid out by hand, as the original's tool writes it, arms this one.
#[test]
fn a_registry_written_byte_by_byte_arms_it() {
    let _x = exclusive();
    inj::cleanup();
    let mut b = vec![0u8; 13272];
    b[0..4].copy_from_slice(&0x2025_0413u32.to_le_bytes());
    b[4..8].copy_from_slice(&5u32.to_le_bytes());
    b[12..16].copy_from_slice(&2u32.to_le_bytes());
    let slot = |b: &mut Vec<u8>, i: usize, name: &[u8], action: u32, value: u32| {
        let o = 20 + 252 * i;
        b[o..o + name.len()].copy_from_slice(name);
        b[o + 64..o + 68].copy_from_slice(&action.to_le_bytes());
        b[o + 68..o + 72].copy_from_slice(&value.to_le_bytes());
        b[o + 204..o + 208].copy_from_slice(&1u32.to_le_bytes());
    };
    slot(&mut b, 0, b"t.hand.sleep", 2, 0);
    slot(&mut b, 1, b"t.hand.err", 1, 0x1000);
    std::fs::write(SHM_PATH, &b).unwrap();
    assert_eq!(inj::execute(b"t.hand.err"), Some(0x1000));
    let after = bytes();
    assert_eq!(u32_at(&after, 8084), 1, "ring_tail advanced");
    assert_eq!(&after[8160..8171], b"t.hand.err\0");
    inj::cleanup();
}

#[test]
fn a_short_object_is_not_mapped_and_the_failure_is_remembered() {
    let _x = exclusive();
    inj::cleanup();
    std::fs::write(SHM_PATH, b"").unwrap();
    let t = Instant::now();
    assert_eq!(inj::set_sleep(b"t.short", 1), -1);
    assert!(t.elapsed() < Duration::from_secs(3));
    let t = Instant::now();
    assert_eq!(inj::execute(b"t.short"), None);
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "cached failure: {:?}",
        t.elapsed()
    );
    assert_eq!(inj::get_count(), 0);
    inj::cleanup();
}

#[test]
fn a_lock_word_left_held_is_waited_for_a_bounded_time() {
    let _x = exclusive();
    inj::cleanup();
    assert_eq!(inj::set_return_error(b"t.lock", 9), 0);
    let m = inj::attach().unwrap();
    m.registry()
        .header
        .lock
        .store(1, std::sync::atomic::Ordering::Release);
    let t = Instant::now();
    assert_eq!(inj::execute(b"t.lock"), None);
    let first = t.elapsed();
    assert!(
        first >= Duration::from_millis(900) && first < Duration::from_secs(3),
        "{first:?}"
    );
    let t = Instant::now();
    assert_eq!(inj::set_sleep(b"t.lock", 1), -1);
    assert!(t.elapsed() < Duration::from_millis(100), "no second spin");
    m.registry()
        .header
        .lock
        .store(0, std::sync::atomic::Ordering::Release);
    assert_eq!(inj::execute(b"t.lock"), Some(9), "works again once free");
    drop(m);
    inj::cleanup();
}

#[test]
fn a_foreign_version_is_reset() {
    let _x = exclusive();
    inj::cleanup();
    let mut b = vec![0u8; 13272];
    b[0..4].copy_from_slice(&0x2024_0101u32.to_le_bytes());
    b[12..16].copy_from_slice(&1u32.to_le_bytes());
    b[20..25].copy_from_slice(b"t.old");
    std::fs::write(SHM_PATH, &b).unwrap();
    assert_eq!(inj::get_count(), 0, "reset empties the table");
    let after = bytes();
    assert_eq!(u32_at(&after, 0), 0x2025_0413);
    assert_eq!(u32_at(&after, 4), 1, "seq restarted");
    assert_eq!(u32_at(&after, 16), std::process::id(), "writer_pid");
    assert_eq!(after[20], 0);
    inj::cleanup();
}
