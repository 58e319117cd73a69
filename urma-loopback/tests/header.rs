//! The C header of the control API (`include/urma_loopback.h`) against its Rust definition, the
//! control plane crate `urma-loopback-ctl` (`Counters::FIELDS`, `CONSTANTS`,
//! `Api::PROTOTYPES`), through the test kit's header probe (`testkit::header_probe`): a field,
//! constant or prototype that drifts on either side fails this test. The provider's exports are
//! checked against the same binding at compile time (`src/ctl.rs`).

testkit::header_probe_tests!(
    "urma_loopback.h",
    "urma_loopback_counters_t",
    urma_loopback_ctl::Counters,
    urma_loopback_ctl::CONSTANTS,
    urma_loopback_ctl::Api
);
