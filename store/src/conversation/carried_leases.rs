//! Renewing the leases of every agent a host carries in one transaction.
//!
//! A host keeps each carried agent's endpoint leased ([`Store::renew_carrier_lease`] renews
//! one). A host carrying a million mostly parked agents cannot pay a commit per agent per half
//! lease, so [`Store::renew_carried_leases`] renews, in one statement and one commit, every
//! endpoint this store's host carries whose lease runs out soon: attached, wake-capable,
//! host-held, its `host_id` this host's, its lease still live. An endpoint it skips — replaced,
//! detached, expired, claimed by another host — is the host's to look at one by one, as
//! before (the single renewal says why it cannot be renewed).

use std::time::Duration;

use super::bounds::{self, MAX_ENDPOINT_LEASE, MIN_ENDPOINT_LEASE};
use super::error::{ConversationError as Error, ConversationResult as Result};
use crate::clock::Timestamp;
use crate::db::Store;

/// Most endpoints one [`Store::renew_carried_leases`] call renews.
pub const MAX_LEASE_RENEWALS: usize = 10_000;

/// What one [`Store::renew_carried_leases`] renewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenewedLeases {
    /// The lease every renewed endpoint now has.
    pub lease_expires_at: Timestamp,
    /// The endpoints renewed, soonest-expiring first: `(agent, endpoint, generation)`.
    pub endpoints: Vec<(String, String, u64)>,
}

/// The endpoints a renewal takes: this host's carried endpoints whose live lease runs out by
/// `?3`, soonest first, at most `?4` (`?1` the host, `?2` now).
const DUE: &str = "SELECT id FROM agent_endpoints
     WHERE host_id = ?1 AND state = 'attached' AND host_held = 1 AND wake_capable = 1
       AND lease_expires_at > ?2 AND lease_expires_at <= ?3
     ORDER BY lease_expires_at, id LIMIT ?4";

impl Store {
    /// Host-side: extends to `lease` from now, in one transaction, the lease of every endpoint
    /// this host carries (see the [module docs](self)) whose lease, still live, runs out within
    /// `due_within` — the soonest `limit` of them. Returns what it renewed; nothing is written
    /// when none is due.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a lease outside
    /// [`MIN_ENDPOINT_LEASE`]..=[`MAX_ENDPOINT_LEASE`], a `due_within` over half of `lease`, or
    /// a limit outside 1..=[`MAX_LEASE_RENEWALS`], changing nothing; the database's failure
    /// (nothing renewed).
    pub fn renew_carried_leases(
        &mut self,
        lease: Duration,
        due_within: Duration,
        limit: usize,
    ) -> Result<RenewedLeases> {
        bounds::lease("lease", lease, MIN_ENDPOINT_LEASE, MAX_ENDPOINT_LEASE)?;
        if due_within > lease / 2 {
            // A lease just renewed must not be due again soon: a caller renewing until none is
            // due would not stop.
            return Err(Error::invalid("due_within", "must be at most half the lease"));
        }
        if limit == 0 || limit > MAX_LEASE_RENEWALS {
            return Err(Error::invalid("limit", format!("must be 1 to {MAX_LEASE_RENEWALS}")));
        }
        let me = self.host_id.clone();
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            let due = now.saturating_add(due_within);
            let expires = now.saturating_add(lease);
            let params = (&me, now.as_micros(), due.as_micros(), limit as i64);
            let endpoints: Vec<(String, String, u64)> = tx
                .prepare_cached(&format!(
                    "SELECT e.agent_id, e.id, e.generation FROM agent_endpoints e
                     WHERE e.id IN ({DUE}) ORDER BY e.lease_expires_at, e.id"
                ))?
                .query_map(params, |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?))
                })?
                .map(|row| {
                    let (agent, id, generation) = row?;
                    let generation = u64::try_from(generation)
                        .map_err(|_| Error::corrupt("agent_endpoints", format!("{id}: generation")))?;
                    Ok((agent, id, generation))
                })
                .collect::<Result<_>>()?;
            if endpoints.is_empty() {
                return Ok(RenewedLeases {
                    lease_expires_at: expires,
                    endpoints,
                });
            }
            let renewed = tx
                .prepare_cached(&format!(
                    "UPDATE agent_endpoints SET lease_expires_at = ?5, updated_at = ?2 WHERE id IN ({DUE})"
                ))?
                .execute((&me, now.as_micros(), due.as_micros(), limit as i64, expires.as_micros()))?;
            if renewed != endpoints.len() {
                return Err(Error::corrupt(
                    "agent_endpoints",
                    format!(
                        "{renewed} leases renewed of the {} read under the same write transaction",
                        endpoints.len()
                    ),
                ));
            }
            tx.commit()?;
            Ok(RenewedLeases {
                lease_expires_at: expires,
                endpoints,
            })
        })
    }
}
