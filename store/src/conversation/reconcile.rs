//! Takeover reconciliation: what a successor host runs once it owns the database.
//!
//! Opening the database never declares a wake carrier dead. Only after a successor has acquired
//! ownership of the database (its instance guard) does it call [`Store::reconcile_takeover`]:
//! every claim that had not crossed the dispatch fence is released back to its pending wake;
//! every dispatched attempt whose outcome was never reported, and every accepted one whose wake
//! was never consumed, becomes `delivery_unknown` (the old host may have started the turn, so
//! it is never redispatched; and only the old endpoint could have consumed it); every endpoint's
//! `wake_capable` is cleared, because the registry of carriers lived in the old process (an MCP
//! App binding keeps its fence's and window's hashes, for its View to bind again:
//! [`super::app_carrier`]); and
//! endpoints whose lease has passed are recorded as expired.

use serde::Serialize;

use super::attachment;
use super::attempt;
use super::error::ConversationResult as Result;
use crate::db::Store;

/// What a takeover reconciliation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileReport {
    /// Pre-fence claims released back to pending.
    pub released_claims: u64,
    /// Post-fence attempts (dispatched, or accepted and never consumed) marked
    /// `delivery_unknown`.
    pub marked_unknown: u64,
    /// Endpoints whose elapsed lease was recorded as expired.
    pub expired_endpoints: u64,
    /// Endpoints that lost `wake_capable`.
    pub wake_carriers_cleared: u64,
}

impl Store {
    /// Reconciles wake delivery after this process took over the database from a previous
    /// owner. Run it once at startup, after acquiring ownership; running it again is harmless.
    ///
    /// # Errors
    ///
    /// Only if SQLite fails (nothing is changed then).
    pub fn reconcile_takeover(&mut self) -> Result<ReconcileReport> {
        self.retrying(|s| {
            let (tx, now) = s.begin_immediate()?;
            // Expired endpoints first: retiring one reconciles its own attempts too.
            let before_released: i64 =
                tx.query_row("SELECT count(*) FROM wake_attempts WHERE state = 'claimed'", [], |r| {
                    r.get(0)
                })?;
            let before_dispatched: i64 = tx.query_row(
                "SELECT count(*) FROM wake_attempts WHERE state IN ('dispatched', 'accepted')",
                [],
                |r| r.get(0),
            )?;
            let expired_endpoints = attachment::materialize_all_expired(&tx, now)?;
            attempt::reconcile_all(&tx, now)?;
            let cleared = tx.execute(
                "UPDATE agent_endpoints SET wake_capable = 0, app_host_id = NULL, updated_at = ?1 WHERE wake_capable = 1",
                [now.as_micros()],
            )?;
            tx.commit()?;
            Ok(ReconcileReport {
                released_claims: before_released as u64,
                marked_unknown: before_dispatched as u64,
                expired_endpoints,
                wake_carriers_cleared: cleared as u64,
            })
        })
    }
}
