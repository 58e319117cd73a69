//! Every cell of the benchmark, one line each: the plug-in list. The cells run in the order of
//! the lines; `target` and `section` place their lines of the targets table and their sections
//! of the report (see [`Entry`]).

use crate::cell::{Entry, Measure};
use crate::cells::{alloc, bandwidth, callgrind, idle, lat, paced, tput, xproc};

/// The cells of one run, fresh (a cell keeps what it needs between its run and its report).
pub fn cells() -> Vec<Entry> {
    vec![
        //         cell                                  target section
        Entry::new(callgrind::Callgrind::default(), 3, 7),
        Entry::new(alloc::Alloc, 4, 8),
        Entry::new(paced::Paced, 7, 5),
        Entry::new(idle::Idle, 8, 6),
        Entry::new(bandwidth::Bandwidth, 5, 3),
        Entry::new(lat::Lat, 2, 2),
        Entry::new(tput::Tput, 1, 1),
        Entry::new(xproc::XProc, 6, 4),
    ]
}

/// The child measurement `ostbench cell --kind KIND` runs.
pub fn measure(kind: &str) -> Option<Measure> {
    cells()
        .iter()
        .flat_map(|e| e.cell.measures())
        .find(|m| m.kind == kind)
        .copied()
}
