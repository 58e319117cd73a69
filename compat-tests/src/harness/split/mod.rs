//! Two processes (`compat --split`): each scenario's receiver and sender run in processes of
//! their own, over the provider's cross-process path (the loopback's, or a device's).
//!
//! The `compat` binary re-executes itself as a child ([`CHILD_ARG`] `recv|send`) that loads
//! one library, builds a [`ScenarioRun`](crate::harness::ctx::ScenarioRun) of its own (fresh endpoints and buffers, the trace capture)
//! and runs one side of a [`Plan`]:
//!
//! * the receiver listens on 127.0.0.1 (or `--listen`) with an ephemeral port (printed as
//!   `port <n>` for the parent), inits its library, starts its pollers and posts its `os_transport_recv`s, then
//!   tells the sender its endpoint information ([`EndpointInfo`](testkit::peer::EndpointInfo): the context's uasid, the
//!   receive jetty's {EID, uasid, id}, the destination segment's {EID, uasid, va}, length and
//!   token id; the tokens are the fixture's) as one JSON line over TCP;
//! * the sender connects, answers with its own uasid and EID, imports the receiver's jetty and segment
//!   by what it was told (they replace the targets of its own in-process fixture), inits its
//!   library and runs the sends and their waits; it then releases its imports and says `closed`;
//! * the receiver waits for its receives, checks the destination byte for byte against the
//!   pattern the sender's source was filled with (both fill it the same way), waits for
//!   `closed` and tears down.
//!
//! Each child prints its raw trace (the recorder's events and its process's URMA trace) on its
//! stdout; the parent tags every event with its process (`"proc": "recv"|"send"`) and
//! concatenates the receiver's and the sender's. The normaliser keeps the two processes apart
//! (section `api:recv`, `urma:send`, ...), so nothing depends on how the two interleaved.
//!
//! The children take the parent's backend ([`Mode`]: the loopback's trace, or the
//! interposition layer's with `--interpose` / in hardware mode). With two nodes ([`node`]) the
//! receivers are children of the serving node, which forwards their output over TCP.
//!
//! The modules, each along one line of it:
//!
//! * [`plan`]: the plan model (what a run does, which flows can be split, every plan);
//! * [`protocol`]: the parent-child protocol (a child's command line and stdout lines, the exchange between
//!   the two children);
//! * [`mode`]: the children's backend;
//! * [`child`]: the child process (one side of a plan);
//! * [`supervise`]: the parent's side of a child (start, bounded reads, end);
//! * [`driver`]: the parent's runs (each plan's two children, merged traces compared and judged,
//!   the interop column, peer death);
//! * [`render`]: what a run found and its rendering (the matrix, `report-split.md`,
//!   `report-split.json`, the summary line);
//! * [`node`]: two nodes (the serving node runs the receivers).
//!
//! Layering: `plan`, `protocol`, `mode` and `render` use no module of `split`; `child`,
//! `supervise` and `node` use the first three (and `node` `supervise`); `driver` uses them all.
//!
//! A child that finds the provider does not reach the other process (the peer has the same
//! uasid and EID, or the import of its jetty or segment is refused) exits with [`NOT_RUN`]; the run is
//! then reported as not run, never as a result.

pub mod child;
pub mod driver;
pub mod mode;
pub mod node;
pub mod plan;
pub mod protocol;
pub mod render;
pub mod supervise;

pub use child::child_main;
pub use mode::Mode;
pub use plan::{plans, splittable, Plan, PlanKind};
pub use protocol::{monotonic_ns, parse_addr, CHILD_ARG, NOT_RUN};
pub use supervise::{start_receiver, ChildEnd, Launch, LibRef, ReceiverChild};
