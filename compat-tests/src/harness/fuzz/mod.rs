//! `fuzz-compat`: the coverage-guided differential fuzzer of the harness (docs/compat.md,
//! "Differential fuzzing").
//!
//! * [`coverage`]: the SanitizerCoverage counters of the instrumented modules, attributed to
//!   the C reference, the Rust library, the loopback and the harness; the novelty signal;
//! * [`decode`]: input bytes -> a valid scenario (the random generator's choices);
//! * [`mutate`]: the mutations of an input;
//! * [`finding`]: what a finding is, its minimization and its files;
//! * [`engine`]: the loop, its supervising parent, replay and the baseline.

pub mod coverage;
pub mod decode;
pub mod engine;
pub mod finding;
pub mod mutate;
