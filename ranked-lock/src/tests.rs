use super::futex::{Condvar, Mutex};
use super::rank;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A rank for the tests that are not about ranks.
const ANY: u8 = rank::SLOT;

#[test]
fn the_mutex_excludes_under_contention() {
    // Unsynchronised read-modify-write of a plain counter under the lock: any overlap of two
    // critical sections loses increments. Four threads on two cores force the sleeping path.
    let m = Arc::new(Mutex::<u64, ANY>::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..50_000 {
                    let mut g = m.lock().unwrap();
                    let v = *g;
                    std::hint::black_box(&v);
                    *g = v + 1;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*m.lock().unwrap(), 200_000);
}

#[test]
fn a_notification_wakes_a_waiter_and_none_is_lost() {
    let pair = Arc::new((Mutex::<bool, ANY>::new(false), Condvar::new()));
    let woke = Arc::new(AtomicBool::new(false));
    let (p2, w2) = (pair.clone(), woke.clone());
    let waiter = std::thread::spawn(move || {
        let (m, cv) = &*p2;
        let mut g = m.lock().unwrap();
        while !*g {
            g = cv.wait(g).unwrap();
        }
        w2.store(true, Ordering::SeqCst);
    });
    // Set under the lock, notify after: the waiter either sees the flag before sleeping or is
    // woken (the sequence number changed since it read it under the lock).
    std::thread::sleep(Duration::from_millis(20));
    *pair.0.lock().unwrap() = true;
    pair.1.notify_all();
    waiter.join().unwrap();
    assert!(woke.load(Ordering::SeqCst));
}

#[test]
fn a_timed_wait_without_notification_times_out() {
    let m = Mutex::<(), ANY>::new(());
    let cv = Condvar::new();
    let t = Instant::now();
    let (g, timed_out) = cv
        .wait_timeout(m.lock().unwrap(), Duration::from_millis(30))
        .unwrap();
    drop(g);
    assert!(timed_out);
    assert!(t.elapsed() >= Duration::from_millis(30));
    // And the lock was taken again and released by the guard.
    drop(m.lock().unwrap());
}

/// A signal handler installed without `SA_RESTART` interrupts a futex sleep with `EINTR`.
extern "C" fn ignore_signal(_: libc::c_int) {}

#[test]
fn a_timed_wait_interrupted_by_signals_still_waits_until_its_deadline() {
    // SAFETY: a handler that does nothing (async-signal-safe), installed for SIGURG, which
    // nothing else in this test binary uses; no SA_RESTART, so the sleep returns EINTR.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = ignore_signal as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGURG, &sa, std::ptr::null_mut()), 0);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        // SAFETY: pthread_self has no preconditions.
        tx.send(unsafe { libc::pthread_self() }).unwrap();
        let m = Mutex::<(), ANY>::new(());
        let cv = Condvar::new();
        let t = Instant::now();
        let (g, timed_out) = cv
            .wait_timeout(m.lock().unwrap(), Duration::from_millis(400))
            .unwrap();
        drop(g);
        (timed_out, t.elapsed())
    });
    let thread = rx.recv().unwrap();
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(40));
        // SAFETY: the waiter thread is alive until it returns, 400 ms after it started
        // waiting; these signals are all sent within 200 ms of its start.
        unsafe { libc::pthread_kill(thread, libc::SIGURG) };
    }
    let (timed_out, took) = waiter.join().unwrap();
    assert!(
        timed_out,
        "an interrupted wait reported a wake-up after {took:?}"
    );
    assert!(took >= Duration::from_millis(400), "ended early: {took:?}");
}

#[test]
fn locks_taken_in_rank_order_pass_and_are_forgotten_in_any_release_order() {
    let shard = Mutex::<(), { rank::SHARD }>::new(());
    let slot = Mutex::<(), { rank::SLOT }>::new(());
    let log = Mutex::<(), { rank::LOG }>::new(());
    let cv = Condvar::new();
    let (a, b) = (shard.lock().unwrap(), slot.lock().unwrap());
    // Released out of order: the slot lock is still held, so only higher ranks may follow.
    drop(a);
    let (b, _) = cv.wait_timeout(b, Duration::from_millis(1)).unwrap();
    let c = log.lock().unwrap();
    drop((b, c));
    // Nothing held any more: any rank may be taken again.
    drop(shard.lock().unwrap());
    let live = super::RwLock::<(), { rank::INSTANCE }>::new(());
    let g = super::write(&live);
    drop(shard.lock().unwrap());
    drop(g);
    drop(super::read(&live));
}

#[cfg(debug_assertions)]
#[test]
#[should_panic(
    expected = "lock order violated: taking the request-index shard lock (rank 2) while \
                holding the sync slot lock (rank 3)"
)]
fn an_inversion_panics_with_both_lock_names() {
    let shard = Mutex::<(), { rank::SHARD }>::new(());
    let slot = Mutex::<(), { rank::SLOT }>::new(());
    let _s = slot.lock().unwrap();
    let _t = shard.lock().unwrap();
}

#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "taking the sync slot lock (rank 3) while holding the sync slot lock")]
fn two_locks_of_one_rank_panic() {
    let (a, b) = (
        Mutex::<(), { rank::SLOT }>::new(()),
        Mutex::<(), { rank::SLOT }>::new(()),
    );
    let _a = a.lock().unwrap();
    let _b = b.lock().unwrap();
}

#[cfg(debug_assertions)]
#[test]
fn an_inversion_takes_no_lock_and_leaves_the_thread_consistent() {
    let before = super::lock_order_violations();
    let log = Mutex::<(), { rank::LOG }>::new(());
    let queue = Mutex::<(), { rank::WORKER_QUEUE }>::new(());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _l = log.lock().unwrap();
        let _q = queue.lock().unwrap();
    }));
    let msg = caught.expect_err("inverted");
    let msg = msg.downcast_ref::<String>().expect("formatted message");
    assert!(
        msg.contains("worker queue lock (rank 6) while holding the log lock (rank 10)"),
        "{msg}"
    );
    assert!(super::lock_order_violations() > before);
    // The queue lock was never taken, and the log lock was released by the unwinding: both
    // can be taken again, in order, by this thread.
    let _q = queue.lock().unwrap();
    let _l = log.lock().unwrap();
}

#[cfg(debug_assertions)]
#[test]
#[should_panic(
    expected = "taking the interposition call lock (rank 20) while holding the interposition \
                object names lock (rank 21)"
)]
fn the_layers_call_lock_under_its_object_names_panics() {
    // The layer takes its object names while a call holds the call lock, never the reverse.
    let call = Mutex::<(), { rank::INTERPOSE_CALL }>::new(());
    let names = super::RwLock::<(), { rank::INTERPOSE_OBJECTS }>::new(());
    drop((call.lock().unwrap(), super::read(&names)));
    let _n = super::write(&names);
    let _c = call.lock().unwrap();
}
