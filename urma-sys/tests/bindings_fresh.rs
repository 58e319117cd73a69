//! The committed `src/bindings_<arch>.rs` must be exactly what bindgen produces from the bundled
//! header with `bindgen_config.rs` for that architecture.
//!
//! Regenerate with `urma-sys/regen-bindings.sh` (sets `URMA_SYS_BLESS=1`, which makes these tests
//! write the files instead of comparing). Each architecture is generated with clang's `--target`,
//! so one host checks both files when the other architecture's C library headers are installed
//! (on Debian x86_64: `libc6-dev-arm64-cross`, which `make deps` installs). Skipped, with a
//! message, only when libclang cannot be loaded (e.g. the test itself runs under qemu) or, for the
//! foreign architecture only, when its C library headers are absent.

use std::path::Path;

include!("../bindgen_config.rs");

fn without_whitespace(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Compares (or with `URMA_SYS_BLESS=1` writes) `src/bindings_<arch>.rs` for `target`.
fn check(arch: &str, target: &str) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let include_dir = manifest.join("include");
    let committed_path = manifest.join(format!("src/bindings_{arch}.rs"));
    let native = arch == std::env::consts::ARCH;

    let generated =
        match std::panic::catch_unwind(|| urma_bindgen_builder(&include_dir, target).generate()) {
            Ok(Ok(b)) => b,
            Ok(Err(e)) if !native && e.to_string().contains("file not found") => {
                println!(
                    "{target}: C library headers not installed ({e}): skipping the \
                     {arch} bindings freshness check on this {} host",
                    std::env::consts::ARCH
                );
                return;
            }
            Ok(Err(e)) => panic!("bindgen failed on the bundled header for {target}: {e}"),
            Err(panic) => {
                let msg = panic_message(panic.as_ref());
                if msg.contains("libclang") {
                    println!(
                        "libclang unavailable ({msg}): skipping the {arch} bindings freshness check"
                    );
                    return;
                }
                std::panic::resume_unwind(panic);
            }
        };
    let tmp = std::env::temp_dir().join(format!(
        "urma-sys-bindings-{arch}-{}.rs",
        std::process::id()
    ));
    generated
        .write_to_file(&tmp)
        .expect("write generated bindings");
    let fresh = std::fs::read_to_string(&tmp).expect("read generated bindings");
    let _ = std::fs::remove_file(&tmp);

    if std::env::var_os("URMA_SYS_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&committed_path, &fresh).expect("write committed bindings");
        println!("wrote {}", committed_path.display());
        return;
    }
    let committed = std::fs::read_to_string(&committed_path)
        .unwrap_or_else(|e| panic!("read {}: {e}", committed_path.display()));
    // Formatting may differ with the rustfmt in use; the tokens may not.
    if without_whitespace(&committed) != without_whitespace(&fresh) {
        pretty_assertions::assert_eq!(
            committed,
            fresh,
            "src/bindings_{}.rs is stale: run urma-sys/regen-bindings.sh and commit the result",
            arch
        );
    }
}

#[test]
fn committed_x86_64_bindings_match_the_bundled_header() {
    check("x86_64", "x86_64-unknown-linux-gnu");
}

#[test]
fn committed_aarch64_bindings_match_the_bundled_header() {
    check("aarch64", "aarch64-unknown-linux-gnu");
}
