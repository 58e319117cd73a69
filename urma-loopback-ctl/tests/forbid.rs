//! A forbidden binding never reaches the provider: every access panics and is counted (the
//! harness's hardware mode relies on both). Its own test binary: forbidding is for the process.

use urma_loopback_ctl as ctl;

#[test]
fn forbidden_binding_panics_and_counts_every_call() {
    assert_eq!(ctl::forbidden_attempts(), 0, "allowed: nothing counted");
    ctl::forbid("test: no provider extension").unwrap();
    assert!(
        ctl::forbid("again").is_err(),
        "forbidding twice is reported"
    );
    let reset = std::panic::catch_unwind(ctl::reset).unwrap_err();
    let msg = reset.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("urma_loopback_*") && msg.contains("test: no provider extension"),
        "{msg}"
    );
    assert!(std::panic::catch_unwind(ctl::counters).is_err());
    assert!(std::panic::catch_unwind(|| ctl::set_nocopy(true)).is_err());
    assert_eq!(ctl::forbidden_attempts(), 3);
}
