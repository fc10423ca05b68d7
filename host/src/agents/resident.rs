//! The carriers this process holds in memory: those of the agents it has driven or bound
//! since their sandbox was last parked. A parked agent's carrier is not held: its rows say
//! that this host carries it ([`ahp_store::Store::carried_agent`]), and it is read from them
//! when a wake comes for it, so a host carrying a million parked agents holds a carrier only
//! for each live one.

use std::collections::HashMap;

use super::Carrier;

/// The carriers held, by agent, and the agent of each one's transfer (to forget a parked one).
#[derive(Debug, Default)]
pub(super) struct Resident {
    by_agent: HashMap<String, Carrier>,
    agent_of: HashMap<String, String>,
}

impl Resident {
    /// The carrier held for `agent`.
    pub(super) fn get(&self, agent: &str) -> Option<&Carrier> {
        self.by_agent.get(agent)
    }

    /// The carrier held for `agent`, to update its lease.
    pub(super) fn get_mut(&mut self, agent: &str) -> Option<&mut Carrier> {
        self.by_agent.get_mut(agent)
    }

    /// Whether a carrier is held for `agent`.
    pub(super) fn contains(&self, agent: &str) -> bool {
        self.by_agent.contains_key(agent)
    }

    /// Holds `c`, in place of any carrier held for its agent.
    pub(super) fn insert(&mut self, c: Carrier) {
        let (agent, transfer) = (c.actor.agent.clone(), c.transfer.clone());
        if let Some(old) = self.by_agent.insert(agent.clone(), c)
            && old.transfer != transfer
            && self.agent_of.get(&old.transfer) == Some(&agent)
        {
            self.agent_of.remove(&old.transfer);
        }
        self.agent_of.insert(transfer, agent);
    }

    /// Stops holding the carrier of `agent`; returns it.
    pub(super) fn remove(&mut self, agent: &str) -> Option<Carrier> {
        let c = self.by_agent.remove(agent)?;
        if self.agent_of.get(&c.transfer) == Some(&c.actor.agent) {
            self.agent_of.remove(&c.transfer);
        }
        Some(c)
    }

    /// Stops holding the carrier of `transfer`'s agent; returns it.
    pub(super) fn remove_transfer(&mut self, transfer: &str) -> Option<Carrier> {
        let agent = self.agent_of.get(transfer)?.clone();
        self.remove(&agent)
    }

    /// How many carriers are held.
    pub(super) fn len(&self) -> usize {
        self.by_agent.len()
    }

    /// The carriers held.
    pub(super) fn values(&self) -> impl Iterator<Item = &Carrier> {
        self.by_agent.values()
    }

    /// The carriers held, by agent.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&String, &Carrier)> {
        self.by_agent.iter()
    }
}
