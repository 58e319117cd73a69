//! The catalogue's scenarios of the log callback and its levels.

use crate::harness::ctx::{Delivery, ScenarioRun, Setup, Side};
use crate::harness::scenario::{Scenario, MIB};

/// The scenarios of the log callback and its levels, in catalogue order.
pub fn scenarios() -> Vec<Scenario> {
    vec![
    Scenario::custom(
        "log-levels",
        "log callback registration: NULL rejected, threshold INFO hides DEBUG, threshold 3 hides all",
        Setup::default(),
        crate::steps!(sc_log_levels),
        &[],
    ),
    ]
}

fn sc_log_levels(ctx: &mut ScenarioRun) {
    ctx.log_reg(Side::Send, 0, true);
    ctx.log_reg(Side::Send, 0, false);
    if ctx.init(Side::Send, 1, 2) == 0 {
        ctx.start_pollers(Delivery::Pass);
        let (_, r) = ctx.recv(2 * MIB + 1, 0x2A, 0);
        let (_, s) = ctx.send(2 * MIB + 1, 0x2B, 0x2A, 0);
        if let Some(s) = s {
            ctx.wait(Side::Send, &s, Some(5000));
        }
        if let Some(r) = r {
            ctx.wait(Side::Recv, &r, Some(5000));
        }
        ctx.stop_pollers();
        ctx.log_reg(Side::Send, 3, false);
        ctx.send(0, 0x2C, 0x2D, 0);
        ctx.destroy(Side::Send);
    }
    ctx.log_reg(Side::Send, -1, false);
    ctx.destroy_null(Side::Send);
}
