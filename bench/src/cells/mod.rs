//! The cells of the benchmark, one file each, and their registration: [`registry`] lists every
//! cell in the order they run, with the places of its targets and of its section in the report
//! (see [`Entry`]). A new cell is a file here, its `mod` line and its line in [`registry`].

use crate::cell::{Entry, Measure};

mod alloc;
mod bandwidth;
mod callgrind;
mod idle;
mod lat;
mod paced;
mod perftest;
mod tput;
mod umdk;
mod xproc;

/// Every cell, fresh for one run (a cell keeps what it needs between its run and its report).
pub fn registry() -> Vec<Entry> {
    vec![
        //         cell                               target section
        Entry::new(callgrind::Callgrind::default(), 3, 7),
        Entry::new(alloc::Alloc, 4, 8),
        Entry::new(paced::Paced, 7, 5),
        Entry::new(idle::Idle, 8, 6),
        Entry::new(bandwidth::Bandwidth, 5, 3),
        Entry::new(lat::Lat, 2, 2),
        Entry::new(tput::Tput, 1, 1),
        Entry::new(xproc::XProc, 6, 4),
        Entry::new(umdk::Umdk, 9, 9),
        Entry::new(perftest::Perftest, 10, 10),
    ]
}

/// The child measurement `ostbench cell --kind KIND` runs.
pub fn measure(kind: &str) -> Option<Measure> {
    registry()
        .iter()
        .flat_map(|e| e.cell.about().measures)
        .find(|m| m.kind == kind)
        .copied()
}
