//! What `ahp serve` runs once it holds its data directory's serve guard, before it serves:
//! takeover reconciliation.
//!
//! Only the process holding the guard may decide what a previous process left behind, since
//! wakes, activations and carriers belong to the process running their guests:
//!
//! 1. wake delivery is reconciled (`reconcile_takeover`): claims that had not crossed the
//!    dispatch fence go back to pending (their turn runs once, here); attempts past the fence —
//!    dispatched, or accepted and never consumed — become `delivery_unknown` (the old process
//!    may have run the turn: never again); every endpoint loses `wake_capable`;
//! 2. activations a crash left in progress fail, so they can be retried with a new token;
//! 3. every transfer still `active` and bound to an agent is re-bound: a new endpoint
//!    generation whose carrier this process registers. Its sandbox is set up fresh at its next
//!    wake, and the agent resumes from its checkpoint;
//! 4. the repair ([`Agents::repair_bindings`]) binds what is still without a carrier: a
//!    transfer the old process activated but never bound (it died between
//!    `complete_activation` and the bind, or the bind failed), and any re-bind of step 3 that
//!    failed.

use serde::Serialize;

use super::Agents;
use crate::shared_store::StoreLock;
use ahp_store::conversation::ReconcileReport;

/// Transfers re-bound per page of the scan.
const PAGE: usize = 200;

/// What a takeover did.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TakeoverReport {
    /// Wake delivery reconciliation.
    pub reconciled: ReconcileReport,
    /// Activations failed as interrupted.
    pub interrupted: Vec<String>,
    /// Active transfers re-bound to a carrier of this process.
    pub rebound: usize,
    /// Active transfers bound by the repair: never bound before, or whose re-bind failed.
    pub repaired: Vec<String>,
}

impl Agents {
    /// Runs the takeover (see the [module docs](self)); `interrupted_reason` is recorded on each
    /// interrupted activation.
    ///
    /// # Errors
    ///
    /// A store failure; the steps already done stay done (each is safe to run again).
    pub fn take_over(&self, interrupted_reason: &str) -> Result<TakeoverReport, crate::sandbox::Error> {
        let reconciled = self.store.locked().reconcile_takeover()?;
        let interrupted = self.store.locked().fail_interrupted_activations(interrupted_reason)?;
        // Model calls in flight when the last host stopped: charged in full (their outcome is
        // unknown), so a crash never makes a call free.
        let charged = self.store.locked().settle_interrupted_model_calls()?;
        if !charged.is_empty() {
            tracing::info!(
                calls = charged.len(),
                "model calls interrupted by the last stop were charged their reservations"
            );
        }
        let mut rebound = 0;
        let mut after: Option<String> = None;
        loop {
            let page = self.store.locked().bound_active_transfers(after.as_deref(), PAGE)?;
            let Some((last, _)) = page.last() else { break };
            after = Some(last.clone());
            for (transfer, _agent) in &page {
                let t = self.store.locked().transfer(transfer)?;
                match self.bind(&t) {
                    Ok(_) => rebound += 1,
                    Err(e) => tracing::warn!(%transfer, error = %e, "cannot re-bind an active transfer"),
                }
            }
            if page.len() < PAGE {
                break;
            }
        }
        let repaired = self.repair_bindings()?;
        Ok(TakeoverReport {
            reconciled,
            interrupted,
            rebound,
            repaired,
        })
    }
}
