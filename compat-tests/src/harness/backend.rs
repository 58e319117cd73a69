//! The seam between the harness and whoever records its URMA trace and injects its faults:
//!
//! * [`Loopback`] (default): the loopback provider's own trace and knobs (`urma_loopback_*`);
//! * [`Layer`]: the interposition layer (`urma_interpose_*`) in front of the provider:
//!   [`INTERPOSE`] (`compat --interpose`) over the loopback, which only executes (its trace and
//!   knobs stay off); [`HARDWARE`] (`compat --device NAME`) over whatever provider the system
//!   library is, treated as unknown: not one call of `urma_loopback_*` (the binding is forbidden,
//!   [`crate::loopback_ctl::forbid`]), and the scenarios that need a provider-only condition are
//!   skipped ([`TraceFaults::skip`]).
//!
//! Scenarios keep writing their faults in the loopback's numbering (docs/compat.md: for one
//! request, CR 3k+1 = WRITE k, 3k+2 = the receive-side CR of SEND_IMM k, 3k+3 = its local CR);
//! [`Layer`] maps CR numbers to the layer's send-WR / receive-CR numbering, which does not
//! depend on how the two pollers interleave.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::interpose_ctl as layer;
use crate::loopback_ctl::{self as lb, Knobs, ReleaseOrder};

/// Trace source and fault sink of the harness. Both backends share the control plane's
/// [`Knobs`] shape; the defaults below are written once against it.
pub trait TraceFaults: Send + Sync {
    /// Name in reports (`loopback`, `interpose`).
    fn name(&self) -> &'static str;
    /// The backend's fault and trace controls.
    fn knobs(&self) -> Knobs;
    /// Clears faults, numbering, trace and symbolic names, then starts the trace capture.
    fn start(&self);
    /// Stops the capture and takes its lines.
    fn take(&self) -> Vec<String> {
        let k = self.knobs();
        k.trace_capture(false);
        k.trace_take()
    }
    /// Applies a knob spec written in the loopback's syntax and numbering.
    fn apply_knobs(&self, spec: &str) -> Result<u32, String> {
        self.knobs().apply_knobs(spec)
    }
    fn hold_crs(&self, on: bool) {
        self.knobs().hold_crs(on)
    }
    fn release_crs(&self, order: ReleaseOrder) -> u64 {
        self.knobs().release_crs(order, 0)
    }
    /// Send WRs posted to the provider so far.
    fn send_wrs(&self) -> u64;
    /// Whether `cr` lines are recorded when the CR is polled (not when it is generated).
    fn cr_at_poll(&self) -> bool;
    /// Turns the provider's no-copy mode on or off (a speed-up for scenarios that do not check
    /// data). False when the backend cannot: the payload is then copied and checked.
    fn set_nocopy(&self, on: bool) -> bool {
        lb::set_nocopy(on);
        true
    }
    /// Why scenario `id` cannot run on this backend (None: it runs).
    fn skip(&self, _id: &str) -> Option<&'static str> {
        None
    }
    /// Whether the provider is the harness's own (the loopback): its error CRs are the faults
    /// the scenarios inject and the receiver-not-ready expiries the ledger lists, so a difference
    /// is judged by the ledger's lists alone. False in hardware mode: the provider makes error
    /// CRs of its own, and a difference is also judged by the error CRs the libraries were
    /// handed ([`super::received`]).
    fn provider_known(&self) -> bool {
        true
    }
    /// Applies a knob of the provider itself (the loopback's, e.g. `rnr_timeout_ms`, which no
    /// layer can set). None when the provider is treated as unknown (hardware mode).
    fn provider_knobs(&self, spec: &str) -> Option<Result<u32, String>> {
        Some(lb::api().knobs().apply_knobs(spec))
    }
}

/// The loopback's own trace and knobs.
pub struct Loopback;

impl TraceFaults for Loopback {
    fn name(&self) -> &'static str {
        "loopback"
    }
    fn knobs(&self) -> Knobs {
        lb::api().knobs()
    }
    fn start(&self) {
        lb::reset();
        lb::trace_start();
    }
    fn send_wrs(&self) -> u64 {
        lb::counters().send_wrs
    }
    fn cr_at_poll(&self) -> bool {
        false
    }
}

/// The interposition layer (`urma_interpose_*`) in front of the provider: over the loopback
/// ([`INTERPOSE`], `compat --interpose`), or over a provider treated as unknown ([`HARDWARE`],
/// `compat --device`).
pub struct Layer {
    /// The provider is the loopback, whose control API resets it between runs, counts the CRs
    /// it generated and offers a no-copy mode. False in hardware mode: nothing here, nor
    /// anything the harness calls while it is chosen, reaches the provider's own extensions.
    loopback_underneath: bool,
}

/// `compat --interpose`: the layer over the loopback.
pub static INTERPOSE: Layer = Layer {
    loopback_underneath: true,
};

/// `compat --device`: the layer over an unknown provider (hardware mode).
pub static HARDWARE: Layer = Layer {
    loopback_underneath: false,
};

/// Rewrites a loopback knob spec for the layer: `drop_cr` / `dup_cr` by CR number become
/// `*_send_cr` (the WRITE's or SEND_IMM's send WR) or `*_recv_cr`; other items are the same.
pub fn layer_spec(spec: &str) -> String {
    spec.split([',', ';'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| {
            let Some((k, v)) = item.split_once('=') else {
                return item.to_string();
            };
            let act = match k.trim() {
                "drop_cr" => "drop",
                "dup_cr" => "dup",
                _ => return item.to_string(),
            };
            let Ok(n) = v.trim().parse::<u64>() else {
                return item.to_string();
            };
            if n == 0 {
                return item.to_string();
            }
            let k = (n - 1) / 3;
            match (n - 1) % 3 {
                0 => format!("{act}_send_cr={}", 2 * k + 1),
                1 => format!("{act}_recv_cr={}", k + 1),
                _ => format!("{act}_send_cr={}", 2 * k + 2),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Scenarios [`HARDWARE`] skips, with the reason: each needs a condition that only the loopback
/// provider can make and the interposition layer cannot.
pub const HARDWARE_SKIPS: &[(&str, &str)] = &[(
    "recv-capacity-0",
    "needs the provider to fail a SEND_IMM that finds no posted receive WR within the 200 ms \
     waits (receiver-not-ready retries exhausted, URMA_CR_RNR_RETRY_CNT_EXC_ERR); how long a \
     real provider retries is its transport's RNR policy, which the layer can neither set nor \
     fake without changing the WRs the trace compares",
)];

/// Why the C runner is skipped outside the loopback's own backend.
pub const C_RUNNER_SKIP: &str = "the C runner prints the loopback's own URMA trace through \
     urma_loopback_* (a provider extension), not the interposition layer's";

impl TraceFaults for Layer {
    fn name(&self) -> &'static str {
        if self.loopback_underneath {
            "interpose"
        } else {
            "hardware"
        }
    }
    fn knobs(&self) -> Knobs {
        *layer::knobs()
    }
    fn start(&self) {
        // The loopback underneath: its knobs and counters cleared, its trace off. An unknown
        // provider is not reset (it has no such call): each run creates fresh objects.
        if self.loopback_underneath {
            lb::reset();
        }
        layer::reset();
        layer::knobs().trace_capture(true);
    }
    fn apply_knobs(&self, spec: &str) -> Result<u32, String> {
        layer::knobs().apply_knobs(&layer_spec(spec))
    }
    fn release_crs(&self, order: ReleaseOrder) -> u64 {
        // The layer holds CRs when they are polled, not when they are generated: let the
        // pollers take what the provider has completed, so the release covers the same CRs as
        // the loopback's. Over the loopback: once the layer has seen every CR the loopback
        // generated and its count stayed unchanged for 20 ms; over an unknown provider, whose
        // count is not known: once it has returned at least as many CRs as send WRs were
        // posted through the layer (each one completes; a slow WRITE on a loaded host otherwise
        // completes after a 50 ms quiet spell, and the release misses it) and the count stayed
        // unchanged for 50 ms. Both bounded by 2 s.
        if self.loopback_underneath {
            settle_layer_crs(
                Duration::from_millis(20),
                Some(&|| lb::counters().crs_generated),
            );
        } else {
            settle_layer_crs(
                Duration::from_millis(50),
                Some(&|| layer::counters().send_wrs),
            );
        }
        layer::knobs().release_crs(order, 0)
    }
    fn send_wrs(&self) -> u64 {
        layer::counters().send_wrs
    }
    fn cr_at_poll(&self) -> bool {
        true
    }
    fn set_nocopy(&self, on: bool) -> bool {
        if self.loopback_underneath {
            lb::set_nocopy(on);
        }
        self.loopback_underneath
    }
    fn provider_known(&self) -> bool {
        self.loopback_underneath
    }
    fn provider_knobs(&self, spec: &str) -> Option<Result<u32, String>> {
        self.loopback_underneath
            .then(|| lb::api().knobs().apply_knobs(spec))
    }
    fn skip(&self, id: &str) -> Option<&'static str> {
        if self.loopback_underneath {
            return None;
        }
        HARDWARE_SKIPS
            .iter()
            .find(|(s, _)| *s == id)
            .map(|(_, why)| *why)
    }
}

/// Waits until the layer's count of CRs taken from the provider stayed unchanged for `quiet`
/// and, with `Some(f)`, reached `f()` (at most 2 s: a loaded machine can leave the pollers behind
/// for longer than a fixed quiet time).
fn settle_layer_crs(quiet: Duration, at_least: Option<&dyn Fn() -> u64>) {
    let end = Instant::now() + Duration::from_secs(2);
    let mut last = layer::counters().crs_from_provider;
    let mut since = Instant::now();
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(2));
        let now = layer::counters().crs_from_provider;
        if now != last {
            last = now;
            since = Instant::now();
        } else if at_least.is_none_or(|n| now >= n()) && since.elapsed() >= quiet {
            break;
        }
    }
}

/// Hardware mode for this process (`compat --device NAME [--eid EID]`, and each child of
/// `compat --split --device`): the loopback's control binding forbidden, the [`HARDWARE`]
/// backend chosen, the URMA fixture opened on device `name` and EID `eid` (default its first)
/// through the public API. The interposition layer must be this process's `liburma.so.0`
/// already. Ok(the EID index in use).
pub fn enter_hardware(name: &str, eid: Option<[u8; 16]>) -> Result<u32, String> {
    if !layer::present() {
        return Err(
            "hardware mode: the interposition layer is not this process's liburma.so.0 \
                    (LD_LIBRARY_PATH=<profile>/interpose:... and URMA_INTERPOSE_REAL)"
                .into(),
        );
    }
    lb::forbid("hardware mode (compat --device) uses only the public URMA API")?;
    set(&HARDWARE)?;
    crate::fixture::Loopback::open(name, eid).map(|f| f.eid_index)
}

static CURRENT: OnceLock<&'static dyn TraceFaults> = OnceLock::new();

/// Chooses the backend for the whole process (before the first scenario). Err if another one
/// was chosen already.
pub fn set(b: &'static dyn TraceFaults) -> Result<(), String> {
    CURRENT
        .set(b)
        .map_err(|_| "the harness backend is already chosen".to_string())
}

/// The backend in use ([`Loopback`] unless [`set`] chose another).
pub fn get() -> &'static dyn TraceFaults {
    *CURRENT.get_or_init(|| &Loopback)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_skips_name_catalogue_scenarios() {
        let ids: Vec<String> = super::super::scenario::catalogue()
            .into_iter()
            .map(|s| s.id)
            .collect();
        for (id, why) in HARDWARE_SKIPS {
            assert!(ids.iter().any(|i| i == id), "{id} is not in the catalogue");
            assert_eq!(HARDWARE.skip(id), Some(*why));
        }
        assert_eq!(HARDWARE.skip("len-1"), None);
        assert_eq!(INTERPOSE.skip("recv-capacity-0"), None);
        assert_eq!(HARDWARE.name(), "hardware");
        assert_eq!(INTERPOSE.name(), "interpose");
        assert!(!HARDWARE.provider_known());
        assert!(INTERPOSE.provider_known() && Loopback.provider_known());
    }

    #[test]
    fn cr_numbers_map_to_send_wrs_and_recv_crs() {
        // One request: CR 1 = WRITE 0 (send WR 1), 2 = recv CR of SEND_IMM 0, 3 = its local CR
        // (send WR 2), 4 = WRITE 1 (send WR 3), 5 = second recv CR, 6 = send WR 4.
        assert_eq!(layer_spec("drop_cr=1"), "drop_send_cr=1");
        assert_eq!(layer_spec("dup_cr=2"), "dup_recv_cr=1");
        assert_eq!(layer_spec("dup_cr=3"), "dup_send_cr=2");
        assert_eq!(
            layer_spec("drop_cr=4; dup_cr=5"),
            "drop_send_cr=3,dup_recv_cr=2"
        );
        assert_eq!(layer_spec("dup_cr=6"), "dup_send_cr=4");
        assert_eq!(
            layer_spec("fail_post=3:4096,fail_cr=2:11"),
            "fail_post=3:4096,fail_cr=2:11"
        );
        assert_eq!(
            layer_spec("drop_cr=x"),
            "drop_cr=x",
            "left for the layer to reject"
        );
    }
}
