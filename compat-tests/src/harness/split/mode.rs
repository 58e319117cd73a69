//! Who records the trace and injects the faults of a `compat --split` child ([`Mode`]): the
//! loopback itself, or the interposition layer (in front of the loopback, or of a device in
//! hardware mode). The parent passes its own mode on in the children's arguments.

use crate::harness::backend;

/// Who records the trace and injects the faults of the children: the parent's own backend,
/// passed on in the children's arguments ([`Mode::child_args`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Mode {
    /// The loopback's own trace and knobs.
    #[default]
    Loopback,
    /// The interposition layer in front of the loopback (`--interpose`).
    Interpose,
    /// Hardware mode (`--device NAME [--eid EID]`): the layer in front of a provider treated as
    /// unknown, no `urma_loopback_*` call.
    Hardware { device: String, eid: Option<String> },
}

impl Mode {
    /// The backend's name in reports (`loopback`, `interpose`, `hardware`).
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Loopback => "loopback",
            Mode::Interpose => "interpose",
            Mode::Hardware { .. } => "hardware",
        }
    }

    /// The arguments that put a child in this mode.
    pub fn child_args(&self) -> Vec<String> {
        match self {
            Mode::Loopback => Vec::new(),
            Mode::Interpose => vec!["--interpose".into()],
            Mode::Hardware { device, eid } => {
                let mut v = vec!["--device".to_string(), device.clone()];
                if let Some(e) = eid {
                    v.extend(["--eid".to_string(), e.clone()]);
                }
                v
            }
        }
    }

    /// Chooses this mode's backend in a child (the layer, when needed, is already this
    /// process's `liburma.so.0`: the children inherit the parent's environment).
    pub(super) fn enter(&self) -> Result<(), String> {
        match self {
            Mode::Loopback => Ok(()),
            Mode::Interpose => {
                if !crate::interpose_ctl::present() {
                    return Err(
                        "--interpose: the interposition layer is not this process's \
                                liburma.so.0"
                            .into(),
                    );
                }
                backend::set(&backend::INTERPOSE)
            }
            Mode::Hardware { device, eid } => {
                let eid = eid.as_deref().map(crate::parse_eid).transpose()?;
                backend::enter_hardware(device, eid).map(|_| ())
            }
        }
    }
}
