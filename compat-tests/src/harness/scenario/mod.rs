//! Scenarios: the model and the generic transfer flow ([`model`]), and the catalogue, one file
//! per group of scenarios with the custom steps of its scenarios beside them.
//!
//! Adding a scenario: docs/compat.md, "Adding a scenario": a scenario goes into the file of its
//! group (a new group is a new file, listed in [`catalogue`]).

mod model;

mod callbacks;
mod capacity;
mod concurrency;
mod duplicates;
mod faults;
mod init;
mod keys;
mod lengths;
mod lifecycle;
mod logging;
mod ordering;

pub mod file;

pub use model::{
    apply_knobs, chunks, flow_features, one, run_flow, setup_for, Body, Cancel, CancelAt,
    DestroyAt, Expect, Expected, Flow, Scenario, Steps, Xfer, MIB,
};

/// The scenario catalogue: every group's scenarios, in this order (the order of the reports).
pub fn catalogue() -> Vec<Scenario> {
    let mut v = Vec::new();
    v.extend(lengths::scenarios());
    v.extend(keys::scenarios());
    v.extend(ordering::scenarios());
    v.extend(duplicates::scenarios());
    v.extend(faults::scenarios());
    v.extend(callbacks::scenarios());
    v.extend(lifecycle::scenarios());
    v.extend(init::scenarios());
    v.extend(capacity::scenarios());
    v.extend(concurrency::scenarios());
    v.extend(logging::scenarios());
    v
}
