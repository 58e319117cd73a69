//! The differential C-vs-Rust conformance harness (docs/compat.md).
//!
//! * [`backend`]: the trace source / fault sink: the loopback's own, or the interposition layer;
//! * [`record`]: the trace recorder (API calls, wake-ups, notify callbacks, log levels, the
//!   loopback's URMA trace, data checks) and the process-wide callbacks that feed it;
//! * [`ctx`]: a scenario context driving one library (or a sender and a receiver library) over
//!   the loopback, recording every step;
//! * [`scenario`]: the scenario model, the generic transfer flow and the catalogue;
//! * [`random`]: the seeded random scenario generator;
//! * [`normalise`]: raw trace -> comparable text;
//! * [`aspect`]: the aspects of a comparison (wire, chunk delivery, completion, cancel and
//!   destroy, API results, data, logs) and which trace lines belong to each;
//! * [`ledger`]: the machine-readable twin of `docs/divergences.md`;
//! * [`received`]: the CRs the libraries were handed (the evidence hardware mode judges error-CR
//!   differences by);
//! * [`outcome`]: the options of a run, and one scenario compared on both libraries and judged
//!   against the ledger (its verdict);
//! * [`crunner`]: the C consumer (`compat-tests/c/runner.c`) built and run against each library;
//! * [`interop`]: the C <-> Rust interop matrix;
//! * [`inject`]: `compat --inject`, faults at the inject points of both libraries' inject
//!   flavours;
//! * [`split`]: `compat --split`, a scenario's sender and receiver in two processes;
//! * [`present`]: how a run is shown: the counts per verdict and per aspect, `report.md`,
//!   `report.html`, `report.xml` (JUnit), the parts of `report.json`, the progress line and the
//!   migration summary;
//! * [`fuzz`]: `fuzz-compat`, the coverage-guided differential fuzzer;
//! * [`driver`]: the driver (every scenario run on both libraries, the C runner, the interop
//!   matrix) and `report.json`.
//!
//! `docs/compat.md` describes the whole thing.

pub mod aspect;
pub mod backend;
pub mod crunner;
pub mod ctx;
pub mod driver;
pub mod fuzz;
pub mod inject;
pub mod interop;
pub mod ledger;
pub mod normalise;
pub mod outcome;
pub mod present;
pub mod random;
pub mod received;
pub mod record;
pub mod scenario;
pub mod split;
