//! What the reaper tick does for the agents this process carries: drop the carriers of
//! transfers that ended, renew leases that are more than half spent, bind the active transfers
//! left without a carrier, and schedule the agents with a wake to claim.

use std::collections::HashSet;

use ahp_store::TransferStatus;
use ahp_store::conversation::MAX_LEASE_RENEWALS;

use super::recovery::Failure;
use super::{Agents, CARRIER_LEASE, Carrier, PAGE};
use crate::shared_store::StoreLock;

/// Transfers one periodic repair examines ([`Agents::repair_some_bindings`]): every one up to
/// this many, each tick; beyond, a walk of several ticks (ten for a million).
pub const REPAIR_SLICE: usize = ahp_store::MAX_EXAMINED_TRANSFERS;

impl Agents {
    /// The periodic repair: binds the active transfers left without a carrier (as
    /// [`repair_bindings`](Self::repair_bindings) does) among the next `examine` transfers,
    /// continuing where the last call stopped and starting over
    /// after the last one — so a tick's cost is bounded by `examine`, not by the host's agents,
    /// and every transfer is examined once per walk. Returns the transfers bound.
    ///
    /// # Errors
    ///
    /// A store failure reading the slice (the next call reads the same slice again).
    pub fn repair_some_bindings(&self, examine: usize) -> Result<Vec<String>, crate::sandbox::Error> {
        let after = self.repair_after.locked().clone();
        let slice = self.store.locked().unbound_among_active(after.as_deref(), examine)?;
        *self.repair_after.locked() = slice.next_after;
        let mut bound = Vec::new();
        self.repair_listed(&slice.unbound, &mut bound);
        Ok(bound)
    }

    /// Binds every `active` transfer left without a carrier — its binding failed, or a process
    /// died between `complete_activation` and the bind — that this process is not activating
    /// right now (the store's
    /// [`unbound_active_transfers`](ahp_store::Store::unbound_active_transfers)). A transfer
    /// whose component takes no turns is bound once (it gets its agent) and never given a
    /// carrier. Returns the transfers bound. Run at takeover, at start and when agents are
    /// handed here; the periodic ticks run [`repair_some_bindings`](Self::repair_some_bindings).
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
            self.repair_listed(&page, &mut bound);
            if page.len() < PAGE {
                break;
            }
        }
        Ok(bound)
    }

    /// [`repair`](Self::repair)s each `(transfer, agent)` listed, adding those it bound to
    /// `bound`; one that cannot be bound is logged and left to the next run.
    fn repair_listed(&self, listed: &[(String, Option<String>)], bound: &mut Vec<String>) {
        for (transfer, agent) in listed {
            match self.repair(transfer, agent.as_deref()) {
                Ok(true) => bound.push(transfer.clone()),
                Ok(false) => {}
                Err(e) => tracing::warn!(%transfer, error = %e, "cannot bind an active transfer without a carrier"),
            }
        }
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
    /// bounded, paged store query over the open wakes
    /// ([`carried_with_wakes`](ahp_store::Store::carried_with_wakes)), so its cost follows the
    /// agents with work, not the agents carried — and every agent whose last turn's end is
    /// still to be settled. If the query fails, every carrier held is scheduled.
    pub fn schedule_all(&self) {
        let mut due: Vec<String> = self.unsettled.locked().iter().cloned().collect();
        let mut after: Option<String> = None;
        loop {
            let page = match self.store.locked().carried_with_wakes(after.as_deref(), PAGE) {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot list the agents with wakes; scheduling every carrier held");
                    due.extend(self.carriers.locked().iter().map(|(agent, _)| agent.clone()));
                    break;
                }
            };
            due.extend(page.iter().map(|actor| actor.agent.clone()));
            match page.last() {
                Some(last) if page.len() == PAGE => after = Some(last.agent.clone()),
                _ => break,
            }
        }
        for agent in due {
            self.schedule(&agent);
        }
    }

    /// Drops the carriers (and sandboxes) of transfers no longer `active`, or gone; returns
    /// their transfer ids; and forgets the carriers held for agents with no sandbox here (bound
    /// at a takeover and not woken since, say): their rows still say this process carries them,
    /// and a wake reads them again. Only the carriers held are looked at — a parked agent's
    /// transfer that ended was detached by the store, and nothing of it is held here. The store
    /// is asked about a thousand carriers at a time
    /// ([`active_among`](ahp_store::Store::active_among): one statement per hundred), not one
    /// read each. Carriers whose batch cannot be read now are kept and looked at again on the
    /// next tick.
    ///
    /// # Errors
    ///
    /// The first store failure met (after every other batch was looked at).
    pub fn sweep(&self) -> Result<Vec<String>, crate::sandbox::Error> {
        let held: Vec<Carrier> = self.carriers.locked().values().cloned().collect();
        let mut ended = Vec::new();
        let mut failed = None;
        for batch in held.chunks(ahp_store::transfer::MAX_LIST_LIMIT) {
            let ids: Vec<String> = batch.iter().map(|c| c.transfer.clone()).collect();
            let active: HashSet<String> = match self.store.locked().active_among(&ids) {
                Ok(active) => active.into_iter().collect(),
                Err(e) => {
                    tracing::warn!(carriers = batch.len(), error = %e, "cannot read the transfers of these carriers; keeping them");
                    failed.get_or_insert(e);
                    continue;
                }
            };
            for c in batch {
                if !active.contains(&c.transfer) {
                    self.release_carrier(c);
                    ended.push(c.transfer.clone());
                } else if !self.sandboxes.is_live(&c.transfer) {
                    self.forget_carrier(c);
                }
            }
        }
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(ended),
        }
    }

    /// Renews the endpoint lease of every agent this process carries (held or parked: the
    /// store's rows say which) that has less than half of [`CARRIER_LEASE`] left (a fresh lease
    /// is not written again): all of them in one commit per [`MAX_LEASE_RENEWALS`]
    /// ([`renew_carried_leases`]), so that a host carrying a million parked agents does not
    /// commit once per agent. A carrier held that the bulk renewal passed over (its endpoint
    /// replaced, detached, expired or claimed by another host) is renewed alone: one whose
    /// endpoint is gone is dropped; one whose renewal failed otherwise is kept and tried again
    /// on the next tick (it still has half a lease), as is everything when the bulk renewal
    /// fails.
    ///
    /// [`renew_carried_leases`]: ahp_store::Store::renew_carried_leases
    pub fn renew_leases(&self) {
        let now = self.store.locked().now();
        let due = now.saturating_add(CARRIER_LEASE / 2);
        loop {
            let renewed =
                self.store
                    .locked()
                    .renew_carried_leases(CARRIER_LEASE, CARRIER_LEASE / 2, MAX_LEASE_RENEWALS);
            match renewed {
                Ok(r) => {
                    let mut carriers = self.carriers.locked();
                    for (agent, endpoint, generation) in &r.endpoints {
                        if let Some(held) = carriers.get_mut(agent)
                            && held.actor.endpoint == *endpoint
                            && held.actor.generation == *generation
                        {
                            held.lease_expires_at = r.lease_expires_at;
                        }
                    }
                    if r.endpoints.len() < MAX_LEASE_RENEWALS {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot renew the carriers' leases; the next tick retries");
                    return;
                }
            }
        }
        let passed_over: Vec<Carrier> = self
            .carriers
            .locked()
            .values()
            .filter(|c| c.lease_expires_at <= due)
            .cloned()
            .collect();
        for c in passed_over {
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
