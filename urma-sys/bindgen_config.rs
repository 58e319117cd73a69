// Shared bindgen configuration for urma-sys.
//
// `include!`d by build.rs (feature `bindgen`, or real UMDK headers) and by
// tests/bindings_fresh.rs (which checks that the committed src/bindings.rs is
// exactly what this configuration produces from the bundled header). Keep it
// free of anything that only one of the two users has.

/// Status macros are `urma_status_t` (= `c_int`); the opt-mask bit macros are
/// `u64` like the `*_opt_mask.value` they are used with; every other integer
/// macro is `u32` (none is negative).
#[derive(Debug)]
struct UrmaMacroTypes;

impl bindgen::callbacks::ParseCallbacks for UrmaMacroTypes {
    fn int_macro(&self, name: &str, value: i64) -> Option<bindgen::callbacks::IntKind> {
        use bindgen::callbacks::IntKind;
        const STATUS: &[&str] = &[
            "URMA_SUCCESS",
            "URMA_FAIL",
            "URMA_EAGAIN",
            "URMA_ENOMEM",
            "URMA_ENOPERM",
            "URMA_ETIMEOUT",
            "URMA_EINVAL",
            "URMA_EEXIST",
            "URMA_EINPROGRESS",
        ];
        if STATUS.contains(&name) {
            return Some(IntKind::Custom {
                name: "urma_status_t",
                is_signed: true,
            });
        }
        if name.starts_with("URMA_J") && name.ends_with("_MASK") {
            return Some(IntKind::U64);
        }
        if (0..=i64::from(u32::MAX)).contains(&value) {
            return Some(IntKind::U32);
        }
        None
    }

    // libc's pthread_mutex_t / pthread_cond_t are Copy + Debug but not Default
    // (bindgen then writes a zero-filling `impl Default` for the embedding structs).
    fn blocklisted_type_implements_trait(
        &self,
        name: &str,
        derive_trait: bindgen::callbacks::DeriveTrait,
    ) -> Option<bindgen::callbacks::ImplementsTrait> {
        use bindgen::callbacks::{DeriveTrait, ImplementsTrait};
        if name != "pthread_mutex_t" && name != "pthread_cond_t" {
            return None;
        }
        Some(match derive_trait {
            DeriveTrait::Copy | DeriveTrait::Debug => ImplementsTrait::Yes,
            _ => ImplementsTrait::No,
        })
    }
}

/// The bindgen builder for `<include_dir>/ub/umdk/urma/urma_api.h` and the provider interface
/// `urma_provider.h` beside it, laid out for the Rust target triple `target` (the handle structs
/// embedding `pthread_mutex_t` differ between architectures).
fn urma_bindgen_builder(include_dir: &std::path::Path, target: &str) -> bindgen::Builder {
    let header = |name: &str| {
        include_dir
            .join("ub/umdk/urma")
            .join(name)
            .to_string_lossy()
            .into_owned()
    };
    bindgen::Builder::default()
        .header(header("urma_api.h"))
        .header(header("urma_provider.h"))
        .clang_arg(format!("--target={target}"))
        .clang_arg(format!("-I{}", include_dir.display()))
        .clang_arg("-std=gnu11")
        .allowlist_type("urma_.*")
        .allowlist_function("urma_.*")
        .allowlist_var("URMA_.*")
        .allowlist_var("MAX_PORT_CNT|UR_NAME_MAX_LEN|JFR_NAME_MAX_LEN")
        // Use libc's definitions so Rust code can hand these fields straight
        // to libc::pthread_* (same glibc layout: 40 and 48 bytes).
        .blocklist_type("pthread_mutex_t|pthread_cond_t|__pthread_.*|__atomic_wide_counter.*")
        .prepend_enum_name(false)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .derive_debug(true)
        .derive_default(true)
        .derive_copy(true)
        .impl_debug(false)
        .layout_tests(true)
        .generate_comments(false)
        .parse_callbacks(Box::new(UrmaMacroTypes))
        .raw_line("use libc::{pthread_cond_t, pthread_mutex_t};")
}
