//! The plug-in point of the benchmark: a cell ([`Cell`]) is one section of `make bench` or
//! `make bench-quick`: the child measurements it brings ([`Measure`]), the child processes it
//! runs and the rows it keeps, its lines in the targets table ([`Target`]) and its section of
//! the report. A new cell is one file under `cells/`, with its `mod` line and its line in
//! `crate::cells::registry` (docs/bench.md, "Adding a cell").

use crate::child::{one_process, CellCfg, Needs, OneProcess, Window};
use crate::orch::run::{BenchRun, Lib};

/// A child measurement: `ostbench cell --kind KIND` runs it in a process of its own and prints
/// the line it returns after `RESULT `, or the error after `ERROR `.
#[derive(Clone, Copy)]
pub struct Measure {
    pub kind: &'static str,
    child: Child,
}

#[derive(Clone, Copy)]
enum Child {
    /// The one-process harness around a window ([`one_process`]).
    OneProcess(OneProcess),
    /// A child of another shape, which returns its result line itself.
    Own(fn(&CellCfg) -> Result<String, String>),
}

impl Measure {
    /// A one-process measurement: `window` inside [`one_process`].
    pub const fn window(kind: &'static str, window: fn(&mut Window) -> Result<(), String>) -> Self {
        Self::window_needing(kind, Needs::NOTHING, window)
    }

    /// A one-process measurement that needs something of its process or its options.
    pub const fn window_needing(
        kind: &'static str,
        needs: Needs,
        window: fn(&mut Window) -> Result<(), String>,
    ) -> Self {
        Measure {
            kind,
            child: Child::OneProcess(OneProcess { needs, window }),
        }
    }

    /// A child of its own shape.
    pub const fn own(kind: &'static str, run: fn(&CellCfg) -> Result<String, String>) -> Self {
        Measure {
            kind,
            child: Child::Own(run),
        }
    }

    /// Runs it in this process: `Ok(result line)` or `Err(reason)`.
    pub fn run(&self, cfg: &CellCfg) -> Result<String, String> {
        match &self.child {
            Child::OneProcess(m) => one_process(cfg, m),
            Child::Own(run) => run(cfg),
        }
    }
}

/// What a cell is, as constants.
pub struct About {
    /// The `kind` of its rows in `report.csv` (and of the host-steal rows of its section).
    pub name: &'static str,
    /// The label of its steal section: wall-clock cells read the host's steal around their run;
    /// `None` for deterministic counts.
    pub timed: Option<&'static str>,
    /// Whether `make bench-quick` runs it too (`make bench` runs every cell).
    pub quick: bool,
    /// The child measurements it brings (none when it measures in the orchestrator's process, or
    /// reuses another cell's).
    pub measures: &'static [Measure],
}

/// One section of the benchmark. The orchestrator calls, for each registered cell that runs in
/// this mode ([`About::quick`]): [`run`](Cell::run) in registry order (inside a steal section
/// when [`About::timed`]), then [`after`](Cell::after) once every cell ran, then
/// [`targets`](Cell::targets) and [`section`](Cell::section) in the report's order ([`Entry`]).
pub trait Cell {
    /// Its name, measurements and modes.
    fn about(&self) -> &'static About;

    /// Runs its child processes (interleaving the libraries) and keeps their results as rows
    /// of `ctx`; a broken measurement is `ctx.fail`ed.
    fn run(&mut self, ctx: &mut BenchRun);

    /// After every cell ran, outside the steal sections: artefacts drawn from the rows (a chart).
    fn after(&mut self, _ctx: &mut BenchRun) {}

    /// Its lines of the targets table; `base` is the library the ratios are against.
    fn targets(&self, _ctx: &BenchRun, _base: &Lib) -> Vec<Target> {
        Vec::new()
    }

    /// Its section of the report.
    fn section(&self, _ctx: &BenchRun, _base: &Lib, _md: &mut String) {}
}

/// A registered cell and its places in the report: its targets go to the targets table and its
/// section to the report in the order of these numbers (ties in registry order), whatever the
/// order the cells run in.
pub struct Entry {
    pub cell: Box<dyn Cell>,
    pub target_at: u8,
    pub section_at: u8,
}

impl Entry {
    pub fn new(cell: impl Cell + 'static, target_at: u8, section_at: u8) -> Entry {
        Entry {
            cell: Box::new(cell),
            target_at,
            section_at,
        }
    }
}

/// Threshold of a target that is reported, not judged.
pub const REPORT_ONLY: &str = "(none: reported)";

/// One line of the targets table.
pub struct Target {
    pub name: &'static str,
    pub value: String,
    /// What is wanted (`≥ 3.0`), or [`REPORT_ONLY`].
    pub threshold: &'static str,
    /// PASS / FAIL; `None`: reported (with [`REPORT_ONLY`]) or not measured.
    pub ok: Option<bool>,
}
