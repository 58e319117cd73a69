//! The C header of the layer's control API (`include/urma_interpose.h`) against its Rust
//! definition in the control plane crate (`urma_loopback_ctl::interpose`: `Counters::FIELDS`,
//! `CONSTANTS`, `Api::PROTOTYPES`), through the test kit's header probe
//! (`testkit::header_probe`). The layer's exports are checked against the same binding at
//! compile time (`src/ctl.rs`); the harness resolves the layer with it.

testkit::header_probe_tests!(
    "urma_interpose.h",
    "urma_interpose_counters_t",
    urma_loopback_ctl::interpose::Counters,
    urma_loopback_ctl::interpose::CONSTANTS,
    urma_loopback_ctl::interpose::Api
);
