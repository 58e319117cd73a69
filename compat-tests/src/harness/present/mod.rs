//! How a run is shown: one model of what a run found ([`Doc`]: the compared scenarios with
//! their aspect verdicts, the other checks, the interop tables, the run's metadata) and its
//! renderings, all made from the same counts ([`summary`]):
//!
//! * [`markdown`]: `<stem>.md`, the summary and the scenarios x aspects matrix;
//! * [`html`]: `<stem>.html`, one self-contained page (summary, coloured matrix, filters, the
//!   normalised traces side by side with the differing lines marked, the ledger's text);
//! * [`junit`]: `<stem>.xml`, JUnit XML for CI systems (one test case per scenario and check);
//! * [`json`]: the parts of `<stem>.json` that describe scenarios and aspects;
//! * [`summary`]: the counts per verdict and per aspect, and the migration summary printed at
//!   the end of a run;
//! * [`progress`]: the progress line printed during a run;
//! * [`meta`]: the run's metadata (libraries, the URMA library loaded, seed, versions).
//!
//! `compat` writes `report.*`, `compat --split` `report-split.*` ([`write`]).

pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod meta;
pub mod model;
pub mod progress;
pub mod sidebyside;
pub mod summary;

use std::path::Path;

pub use model::{escape, Check, Doc, Status, Table, RUN};

/// Writes `<stem>.md`, `<stem>.html` and `<stem>.xml` of `doc` into `dir` (the caller writes
/// `<stem>.json`, with [`json`]'s parts).
pub fn write(doc: &Doc, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(doc.path(dir, "md"), markdown::render(doc))?;
    std::fs::write(doc.path(dir, "html"), html::render(doc))?;
    std::fs::write(doc.path(dir, "xml"), junit::render(doc))
}
