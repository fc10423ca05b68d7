//! What the reaper tick does for the agents this process carries: drop the carriers of
//! transfers that ended, renew leases that are more than half spent, bind the active transfers
//! left without a carrier, and schedule the agents with a wake to claim.

use std::collections::HashMap;

use ahp_store::TransferStatus;

use super::recovery::Failure;
use super::{Agents, CARRIER_LEASE, Carrier, PAGE};
use crate::shared_store::StoreLock;

impl Agents {
    /// Binds every `active` transfer left without a carrier — its binding failed, or a process
    /// died between `complete_activation` and the bind — that this process is not activating
    /// right now (the store's
    /// [`unbound_active_transfers`](ahp_store::Store::unbound_active_transfers)). A transfer
    /// whose component takes no turns is bound once (it gets its agent) and never given a
    /// carrier. Returns the transfers bound. Run on every reaper tick and at takeover.
    ///
    /// # Errors
    ///
    /// A store failure reading the list; the transfers already bound stay bound (one that
    /// cannot be bound is logged and left to the next run).
    pub fn repair_bindings(&self) -> Result<Vec<String>, crate::sandbox::Error> {
        let mut bound = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.store.locked().unbound_active_transfers(after.as_deref(), PAGE)?;
            let Some((last, _)) = page.last() else { break };
            after = Some(last.clone());
            for (transfer, agent) in &page {
                match self.repair(transfer, agent.as_deref()) {
                    Ok(true) => bound.push(transfer.clone()),
                    Ok(false) => {}
                    Err(e) => tracing::warn!(%transfer, error = %e, "cannot bind an active transfer without a carrier"),
                }
            }
            if page.len() < PAGE {
                break;
            }
        }
        Ok(bound)
    }

    /// Binds one transfer listed by the repair if it still needs it; returns whether it bound.
    fn repair(&self, transfer: &str, agent: Option<&str>) -> Result<bool, crate::sandbox::Error> {
        if self.activating.locked().contains(transfer) {
            return Ok(false);
        }
        let t = self.store.locked().transfer(transfer)?;
        if t.status != TransferStatus::Active {
            return Ok(false);
        }
        if let Some(agent) = agent {
            // Bound once already: only a component that takes turns needs a carrier.
            if !self.sandboxes.takes_turns(&t)? {
                return Ok(false);
            }
            // Bound by this process since the list was read?
            if let Some(c) = self.carrier(agent) {
                let mut db = self.store.locked();
                let now = db.now();
                let current = db
                    .get_endpoint(&c.caller, agent, &c.actor.endpoint)
                    .is_ok_and(|ep| ep.wake_capable && ep.generation == c.actor.generation && ep.is_live(now));
                if current {
                    return Ok(false);
                }
            }
        }
        self.bind(&t)?;
        tracing::info!(%transfer, "bound an active transfer that had no carrier");
        Ok(true)
    }

    /// The reaper tick's safety net (after a restart, or for posts another process committed):
    /// schedules every agent this process carries whose endpoint has a wake to claim — one
    /// bounded, paged store query
    /// ([`wake_ready_endpoints`](ahp_store::Store::wake_ready_endpoints)) matched against the
    /// carriers indexed by endpoint and generation — and every agent whose last turn's end is
    /// still to be settled. If the query fails, every carrier is scheduled.
    pub fn schedule_all(&self) {
        let by_endpoint: HashMap<(String, u64), String> = self
            .carriers
            .locked()
            .iter()
            .map(|(agent, c)| ((c.actor.endpoint.clone(), c.actor.generation), agent.clone()))
            .collect();
        let mut due: Vec<String> = self.unsettled.locked().iter().cloned().collect();
        let mut after: Option<String> = None;
        loop {
            let page = match self.store.locked().wake_ready_endpoints(after.as_deref(), PAGE) {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot list the agents with wakes; scheduling every carrier");
                    due.extend(by_endpoint.into_values());
                    break;
                }
            };
            for actor in &page {
                if let Some(agent) = by_endpoint.get(&(actor.endpoint.clone(), actor.generation)) {
                    due.push(agent.clone());
                }
            }
            match page.last() {
                Some(last) if page.len() == PAGE => after = Some(last.endpoint.clone()),
                _ => break,
            }
        }
        for agent in due {
            self.schedule(&agent);
        }
    }

    /// Drops the carriers (and sandboxes) of transfers no longer `active`, or gone; returns
    /// their transfer ids. A transfer that cannot be read now is kept and looked at again on
    /// the next tick.
    ///
    /// # Errors
    ///
    /// The first store failure met (after every other carrier was looked at).
    pub fn sweep(&self) -> Result<Vec<String>, crate::sandbox::Error> {
        let held: Vec<Carrier> = self.carriers.locked().values().cloned().collect();
        let mut ended = Vec::new();
        let mut failed = None;
        for c in held {
            let read = self.store.locked().transfer(&c.transfer);
            let active = match read {
                Ok(t) => t.status == TransferStatus::Active,
                Err(ahp_store::Error::TransferNotFound(_)) => false,
                Err(e) => {
                    tracing::warn!(transfer = %c.transfer, error = %e, "cannot read the transfer of a carrier; keeping it");
                    failed.get_or_insert(e);
                    continue;
                }
            };
            if !active {
                self.release_carrier(&c);
                ended.push(c.transfer);
            }
        }
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(ended),
        }
    }

    /// Renews the endpoint lease of every carrier this process holds that has less than half
    /// of [`CARRIER_LEASE`] left (a fresh lease is not written again). A carrier whose endpoint
    /// is gone is dropped; one whose renewal failed otherwise is kept and tried again on the
    /// next tick (it still has half a lease).
    pub fn renew_leases(&self) {
        let held: Vec<Carrier> = self.carriers.locked().values().cloned().collect();
        let now = self.store.locked().now();
        let due = now.saturating_add(CARRIER_LEASE / 2);
        for c in held {
            if c.lease_expires_at > due {
                continue;
            }
            let agent = &c.actor.agent;
            let renewed =
                self.store
                    .locked()
                    .renew_carrier_lease(agent, &c.actor.endpoint, c.actor.generation, CARRIER_LEASE);
            match renewed {
                Ok(ep) => {
                    if let Some(held) = self.carriers.locked().get_mut(agent)
                        && held.actor == c.actor
                    {
                        held.lease_expires_at = ep.lease_expires_at;
                    }
                }
                Err(e) => match Failure::of(&e) {
                    Failure::Gone(why) => {
                        tracing::info!(%agent, %why, "the carrier's endpoint is gone; dropping it");
                        self.release_carrier(&c);
                    }
                    failure => {
                        tracing::warn!(%agent, ?failure, "cannot renew the carrier's lease; keeping it, the next tick retries")
                    }
                },
            }
        }
    }
}
