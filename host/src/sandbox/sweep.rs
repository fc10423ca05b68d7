//! Dropping the live sandboxes whose transfers can no longer run.
//!
//! A live sandbox exists to serve later turns of an `active` transfer. When the transfer leaves
//! `active` by a path the sandbox did not see — `ahp transfer terminate` from another process,
//! the insolvency reaper, a `report_usage` over MCP that exhausted the budget — its Store,
//! instance and pool slot would otherwise stay until the host restarts. `ahp serve` sweeps on
//! every reaper tick.

use ahp_store::TransferStatus;

use super::Sandboxes;
use crate::shared_store::StoreLock;

impl Sandboxes {
    /// Drops every live sandbox whose transfer is no longer `active` (or no longer exists), and
    /// returns their transfer ids. A sandbox that is mid-turn is not in the live map and is left
    /// to the next sweep.
    ///
    /// # Errors
    ///
    /// A store failure while reading a transfer; the sandboxes already checked stay swept.
    pub fn drop_finished(&self) -> Result<Vec<String>, super::Error> {
        let ids: Vec<String> = self.live().idle.keys().cloned().collect();
        let mut finished = Vec::new();
        for id in ids {
            let still_active = match self.store.locked().transfer(&id) {
                Ok(t) => t.status == TransferStatus::Active,
                Err(ahp_store::Error::TransferNotFound(_)) => false,
                Err(e) => {
                    self.drop_all(&finished);
                    return Err(e.into());
                }
            };
            if !still_active {
                finished.push(id);
            }
        }
        self.drop_all(&finished);
        Ok(finished)
    }

    fn drop_all(&self, ids: &[String]) {
        let mut live = self.live();
        for id in ids {
            live.remove(id);
        }
    }
}
