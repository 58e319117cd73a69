//! Exports the SanitizerCoverage hooks that `fuzz-compat` defines from that binary only, so the
//! instrumented libraries it dlopens (and the loopback it links) bind to them
//! (docs/compat.md, "Differential fuzzing").

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for sym in [
        "__sanitizer_cov_8bit_counters_init",
        "__sanitizer_cov_pcs_init",
    ] {
        println!("cargo:rustc-link-arg-bin=fuzz-compat=-Wl,--export-dynamic-symbol={sym}");
    }
}
