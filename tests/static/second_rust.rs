//! A second Rust static library, for tests/static_archive.rs: built by another Rust version than
//! libos_transport.a (rustc of the minimum supported version, `rustup run 1.82`), and linked into
//! one program with it. Its own Rust runtime (std, threads, `String`, the allocator and
//! `rust_eh_personality`) must serve it, and a panic inside it must unwind to its own
//! `catch_unwind`.

const MESSAGE: &str = "a panic inside the second Rust archive";

/// 1 when a panic raised on a thread of this library was caught here with its message, else 0.
#[no_mangle]
pub extern "C" fn second_rust_panic_caught() -> i32 {
    let caught = std::panic::catch_unwind(|| {
        let answer = std::thread::spawn(|| format!("{}", 6 * 7))
            .join()
            .unwrap_or_default();
        if answer == "42" {
            panic!("{}", MESSAGE);
        }
        answer.len()
    });
    match caught {
        Err(payload) => i32::from(payload.downcast_ref::<String>().map(String::as_str) == Some(MESSAGE)),
        Ok(_) => 0,
    }
}
