//! The committed `src/bindings.rs` must be exactly what bindgen produces from
//! the bundled header with `bindgen_config.rs`.
//!
//! Regenerate with `urma-sys/regen-bindings.sh` (sets `URMA_SYS_BLESS=1`, which
//! makes this test write the file instead of comparing). Skipped, with a
//! message, only when libclang cannot be loaded.

use std::path::Path;

include!("../bindgen_config.rs");

fn without_whitespace(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

#[test]
fn committed_bindings_match_the_bundled_header() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let include_dir = manifest.join("include");
    let committed_path = manifest.join("src/bindings.rs");

    let generated = match std::panic::catch_unwind(|| urma_bindgen_builder(&include_dir).generate())
    {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => panic!("bindgen failed on the bundled header: {e}"),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            if msg.contains("libclang") {
                println!(
                    "libclang unavailable ({msg}): skipping the committed-bindings freshness check"
                );
                return;
            }
            std::panic::resume_unwind(panic);
        }
    };
    let tmp = std::env::temp_dir().join(format!("urma-sys-bindings-{}.rs", std::process::id()));
    generated
        .write_to_file(&tmp)
        .expect("write generated bindings");
    let fresh = std::fs::read_to_string(&tmp).expect("read generated bindings");
    let _ = std::fs::remove_file(&tmp);

    if std::env::var_os("URMA_SYS_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&committed_path, &fresh).expect("write src/bindings.rs");
        println!("wrote {}", committed_path.display());
        return;
    }
    let committed = std::fs::read_to_string(&committed_path).expect("read src/bindings.rs");
    // Formatting may differ with the rustfmt in use; the tokens may not.
    if without_whitespace(&committed) != without_whitespace(&fresh) {
        pretty_assertions::assert_eq!(
            committed,
            fresh,
            "src/bindings.rs is stale: run urma-sys/regen-bindings.sh and commit the result"
        );
    }
}
