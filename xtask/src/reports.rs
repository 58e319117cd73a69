//! Reading what `compat` wrote: its reports (`report.json`, `report-split.json`) and the verdict
//! of each scenario, to compare two runs. Uses [`crate::cmd`] only.

use std::path::Path;

use serde_json::Value;

use crate::cmd::fail;

/// `<dir>/<file>` read as JSON; the goal fails when it is missing or unreadable.
pub fn read(dir: &Path, file: &str) -> Value {
    std::fs::read_to_string(dir.join(file))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| fail(format!("no readable {}/{file}", dir.display())))
}

/// `(scenario id, verdict)` of every scenario of a report, in its order.
pub fn verdicts(report: &Value) -> Vec<(String, String)> {
    report["scenarios"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| (s["id"].to_string(), s["verdict"].to_string()))
                .collect()
        })
        .unwrap_or_default()
}
