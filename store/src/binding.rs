//! A transfer becomes an agent: the binding between an `active` transfer and the Agent identity
//! of the conversation domain it runs as.
//!
//! [`Store::bind_transfer_agent`] is the host's call when a transfer becomes `active` (and again
//! for every transfer still `active` after a host restart, from
//! [`Store::bound_active_transfers`]): the first binding creates the transfer's agent, owned by
//! the communication principal of the transfer's owner ([`TransferOwner`]), and every binding
//! attaches a fresh endpoint for it, replacing the previous one with the next controller
//! generation. The host then registers its sandbox as that endpoint's wake carrier
//! ([`Store::register_wake_carrier`]) and keeps it with [`Store::renew_carrier_lease`].
//!
//! That endpoint is *host-held* ([`Endpoint::host_held`]): the host drives the agent's turns
//! through it as [`TransferOwner::host_caller`], and no other caller — not the owner, though it
//! sees the endpoint in its listings — is admitted through it, nor may attach or detach an
//! endpoint of the transfer's agent (see [`crate::conversation::endpoint`]).
//!
//! Leaving `active` unbinds, inside the transition's own transaction (the hook is the one place
//! every transition is applied, `lifecycle::move_to`): `insolvent` revokes `wake_capable` from the
//! agent's endpoints and gives back its claims not yet past the dispatch fence, so no new turn
//! starts (one already dispatched may still finish); `terminated` or `expired` detaches its
//! endpoint. The agent, its conversations and its transcript stay readable by its owner.
//!
//! These are host-side functions and take no [`Caller`](crate::conversation::Caller): nothing a
//! tool caller or a guest sends reaches them. An agent created by a binding does not count
//! against [`MAX_AGENTS_PER_PRINCIPAL`](crate::conversation::bounds::MAX_AGENTS_PER_PRINCIPAL)
//! (transfers bound it) but does count against [`MAX_AGENTS`](crate::conversation::bounds::MAX_AGENTS).

use std::time::Duration;

#[cfg(any(test, feature = "testing"))]
use ahp_store_sql::OptionalExtension;
use ahp_store_sql::Tx;
use serde::Serialize;
use serde_json::json;

use crate::clock::Timestamp;
use crate::conversation::attempt;
use crate::conversation::audit::{self, AuditKind};
use crate::conversation::bounds::{self, MAX_ENDPOINT_LEASE, MIN_ENDPOINT_LEASE};
use crate::conversation::{
    Agent, AgentCard, CallerKind, CommunicationPrincipal, ConversationError, Endpoint, agent, attachment, endpoint,
};
use crate::db::Store;
use crate::error::{Error, Result};
use crate::event::{self, EventKind};
use crate::owner::TransferOwner;
use crate::state::{Operation, TransferStatus};
#[cfg(any(test, feature = "testing"))]
use crate::transfer::TRANSFER_COLUMNS;
use crate::transfer::{self, MAX_LIST_LIMIT, Transfer};

/// What [`Store::bind_transfer_agent`] returns: the transfer's agent and its fresh endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentBinding {
    /// The bound transfer, `tr_…`.
    pub transfer_id: String,
    /// The agent the transfer became (its `controller_generation` is the endpoint's).
    pub agent: Agent,
    /// The endpoint just attached for it, host-held: not wake-capable until the host registers
    /// its carrier.
    pub endpoint: Endpoint,
}

/// The card of the agent a transfer becomes: its handle is the transfer id (a valid handle, and
/// unique), its name says where the session came from.
fn card_for(t: &Transfer) -> AgentCard {
    let card = AgentCard {
        handle: t.id.clone(),
        display_name: format!("Agent of {}", t.source_host),
        description: format!(
            "The session transferred from {} as {}, running in an ahp sandbox.",
            t.source_host, t.id
        ),
        specialties: Vec::new(),
    };
    if card.validate().is_ok() {
        return card;
    }
    // A source host too long for a display name: name the agent by its transfer alone.
    AgentCard {
        display_name: format!("Agent of {}", t.id),
        description: format!("The session transferred as {}, running in an ahp sandbox.", t.id),
        ..card
    }
}

/// The agent's current endpoint (attached, whatever its lease), or `None`. Every endpoint not
/// known to be retired is parsed, so an unknown state fails closed.
fn current_endpoint(tx: &Tx<'_>, agent: &str) -> Result<Option<Endpoint>> {
    let ids: Vec<String> = tx
        .prepare_cached(
            "SELECT id FROM agent_endpoints WHERE agent_id = ?1 AND state NOT IN ('detached', 'expired', 'replaced')",
        )?
        .query_map([agent], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut current = None;
    for id in ids {
        current = Some(endpoint::load(tx, &id)?);
    }
    Ok(current)
}

/// Unbinds `t`'s agent as `t` moves to `to` (called by `lifecycle::move_to` for every status
/// change, in the transition's transaction): `insolvent` revokes `wake_capable` from the agent's
/// endpoints and releases its claims not yet past the dispatch fence; `terminated` and
/// `expired` detach its current endpoint (reconciling its wake attempts: claims released,
/// dispatched ones `delivery_unknown`). Each appends `agent_unbound` to the transfer's log.
/// Other moves, and transfers with no agent, are left alone.
pub(crate) fn unbind(tx: &Tx<'_>, t: &Transfer, to: TransferStatus, now: Timestamp) -> Result<()> {
    let Some(agent) = t.agent_id.as_deref() else {
        return Ok(());
    };
    let current = current_endpoint(tx, agent)?;
    let what = match to {
        TransferStatus::Insolvent => {
            tx.prepare_cached(
                "UPDATE agent_endpoints SET wake_capable = 0, updated_at = ?2 WHERE agent_id = ?1 AND wake_capable = 1",
            )?
            .execute((agent, now.as_micros()))?;
            if let Some(ep) = current.as_ref().filter(|ep| ep.wake_capable) {
                let detail = json!({ "endpointId": ep.id, "controllerGeneration": ep.generation });
                audit::record(tx, AuditKind::EndpointWakeRevoked, Some(agent), None, detail, now)?;
            }
            if let Some(ep) = &current {
                // A claim not yet past the dispatch fence would start a turn: give it back.
                // A dispatched turn is already running; it may finish and consume.
                attempt::release_claims(tx, &ep.id, now)?;
            }
            "wake_revoked"
        }
        TransferStatus::Terminated | TransferStatus::Expired => {
            if let Some(ep) = &current {
                attachment::retire(tx, &ep.id, crate::conversation::EndpointState::Detached, now)?;
            }
            "detached"
        }
        _ => return Ok(()),
    };
    let detail = json!({
        "agentId": agent,
        "endpointId": current.as_ref().map(|e| e.id.as_str()),
        "generation": current.as_ref().map(|e| e.generation),
        "endpoint": what,
    });
    event::append(tx, &t.id, EventKind::AgentUnbound, now, detail)
}

/// A bound agent its transfer's owner does not own is a broken row, not a missing agent.
fn owned_agent(tx: &Tx<'_>, owner: &CommunicationPrincipal, t: &Transfer, agent: &str) -> Result<Agent> {
    agent::load_owned(tx, owner, agent).map_err(|e| match e {
        ConversationError::AgentNotFound(_) => Error::CorruptRow {
            table: "transfers",
            reason: format!("{}: bound agent {agent} is not its owner's", t.id),
        },
        other => other.into(),
    })
}

/// [`Store::bind_transfer_agent`] in `tx`, for `host` (the lease checked by the caller).
pub(crate) fn bind_in(
    tx: &Tx<'_>,
    host: &str,
    transfer: &str,
    lease: Duration,
    now: Timestamp,
) -> Result<AgentBinding> {
    let t = transfer::load(tx, transfer)?;
    transfer::check(&t, Operation::BindAgent)?;
    crate::hosts::check_carries(tx, transfer, host)?;
    let owner: TransferOwner = t.owner()?;
    let principal = CommunicationPrincipal::from_subject(&owner.subject())?;
    let agent = match t.agent_id.as_deref() {
        Some(id) => owned_agent(tx, &principal, &t, id)?,
        None => {
            let id = agent::insert(tx, &principal, &card_for(&t), now)?;
            let changed = tx
                .prepare_cached(
                    "UPDATE transfers SET agent_id = ?2, updated_at = ?3 WHERE id = ?1 AND agent_id IS NULL",
                )?
                .execute((transfer, &id, now.as_micros()))?;
            if changed != 1 {
                return Err(Error::CorruptRow {
                    table: "transfers",
                    reason: format!("{transfer} changed under its own write transaction"),
                });
            }
            owned_agent(tx, &principal, &t, &id)?
        }
    };
    let endpoint = attachment::attach(tx, &principal, &agent, lease, CallerKind::Host, now)?;
    tx.prepare_cached("UPDATE agent_endpoints SET host_id = ?2 WHERE id = ?1")?
        .execute((&endpoint.id, host))?;
    tx.prepare_cached("UPDATE transfers SET host_id = ?2 WHERE id = ?1")?
        .execute((transfer, host))?;
    // A move handed over is complete once the agent is bound again.
    tx.prepare_cached("DELETE FROM agent_moves WHERE transfer_id = ?1 AND handed_over_at IS NOT NULL")?
        .execute([transfer])?;
    let agent = owned_agent(tx, &principal, &t, &agent.id)?;
    let detail = json!({
        "agentId": agent.id,
        "endpointId": endpoint.id,
        "generation": endpoint.generation,
    });
    event::append(tx, transfer, EventKind::AgentBound, now, detail)?;
    Ok(AgentBinding {
        transfer_id: transfer.to_owned(),
        agent,
        endpoint,
    })
}

impl Store {
    /// Host-side: binds the `active` transfer to its Agent identity and attaches a fresh
    /// host-held endpoint for that agent with a lease of `lease`. The first call creates the agent
    /// (owned by the communication principal of the transfer's owner, with a card derived from
    /// the transfer) and records it as the transfer's `agentId`; every later call (a re-bind
    /// after a host restart) keeps that agent and replaces its endpoint with the next controller
    /// generation, reconciling the old endpoint's wake attempts. One immediate transaction,
    /// which appends `agent_bound` (`{agentId, endpointId, generation}`) to the transfer's log
    /// and `endpoint_attached` (and `agent_created` the first time) to the conversation log.
    ///
    /// The endpoint is not wake-capable until the host registers its carrier with
    /// [`register_wake_carrier`](Self::register_wake_carrier).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed transfer id or a lease outside
    /// [`MIN_ENDPOINT_LEASE`]..=[`MAX_ENDPOINT_LEASE`]; [`Error::TransferNotFound`];
    /// [`Error::CarriedElsewhere`] when another host carries the transfer;
    /// [`Error::InvalidTransition`] (operation `bind_agent`, naming the status) unless the
    /// transfer is `active`; [`Error::Conversation`] with
    /// [`ConversationError::LimitReached`] when the store already holds
    /// [`MAX_AGENTS`](bounds::MAX_AGENTS) agents. A refusal changes nothing.
    pub fn bind_transfer_agent(&mut self, transfer: &str, lease: Duration) -> Result<AgentBinding> {
        transfer::check_id(transfer)?;
        bounds::lease("lease", lease, MIN_ENDPOINT_LEASE, MAX_ENDPOINT_LEASE)?;
        let host = self.host_id.clone();
        // The time is read once the write lock is held, as every conversation operation does:
        // the replaced endpoint's lease is judged, and the new one starts, at the commit's moment.
        self.write_at(|tx, now| bind_in(tx, &host, transfer, lease, now))
    }

    /// Host-side: the transfer `agent` was bound to, if it is a transfer's agent (in any status:
    /// the binding outlives the transfer's end).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed agent id; [`Error::CorruptRow`] for a row this
    /// build cannot read.
    #[cfg(any(test, feature = "testing"))]
    pub fn agent_transfer(&mut self, agent: &str) -> Result<Option<Transfer>> {
        agent::check_id(agent)?;
        let sql = format!("SELECT {TRANSFER_COLUMNS} FROM transfers WHERE agent_id = ?1");
        self.autocommit()
            .prepare_cached(&sql)?
            .query_row([agent], |r| Ok(transfer::from_row(r)))
            .optional()?
            .transpose()
    }

    /// Host-side: the `active` transfers that are bound to an agent, as `(transfer id, agent id)`
    /// ordered by transfer id after the exclusive cursor `after`, at most `limit` — what a host
    /// re-binds at takeover.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed cursor or a limit outside 1..=[`MAX_LIST_LIMIT`].
    pub fn bound_active_transfers(&mut self, after: Option<&str>, limit: usize) -> Result<Vec<(String, String)>> {
        if limit == 0 || limit > MAX_LIST_LIMIT {
            return Err(Error::invalid("limit", format!("must be 1 to {MAX_LIST_LIMIT}")));
        }
        if let Some(a) = after {
            transfer::check_id(a)?;
        }
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(
            "SELECT id, agent_id FROM transfers
             WHERE status = 'active' AND agent_id IS NOT NULL AND id > ?1 ORDER BY id LIMIT ?2",
        )?;
        let rows = stmt.query_map((after.unwrap_or(""), limit as i64), |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Host-side: the `active` transfers without a carrier — no attached, wake-capable endpoint
    /// with an unexpired lease for their agent (a lease that lapsed while its host ran on, never
    /// renewed, leaves an agent no host drives), or no agent at all (a binding that failed, or a process that died
    /// between the activation's end and the bind) — as `(transfer id, agent id if bound)`
    /// ordered by transfer id after the exclusive cursor `after`, at most `limit`: what a host
    /// binds on its periodic repair and at takeover. Only the transfers this store's host
    /// carries, or that no host carries yet, are listed. A transfer whose component takes no turns
    /// (built for `ahp:agent@0.1.0`) never gets a wake-capable endpoint, so it is listed while
    /// it is active; the host tells it apart.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed cursor or a limit outside 1..=[`MAX_LIST_LIMIT`].
    pub fn unbound_active_transfers(
        &mut self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Option<String>)>> {
        if limit == 0 || limit > MAX_LIST_LIMIT {
            return Err(Error::invalid("limit", format!("must be 1 to {MAX_LIST_LIMIT}")));
        }
        if let Some(a) = after {
            transfer::check_id(a)?;
        }
        let me = self.host_id.clone();
        let now = self.now();
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(
            "SELECT t.id, t.agent_id FROM transfers t
             WHERE t.status = 'active' AND t.id > ?1 AND (t.host_id IS NULL OR t.host_id = ?3)
               AND NOT EXISTS (SELECT 1 FROM agent_endpoints e
                               WHERE e.agent_id = t.agent_id AND e.state = 'attached' AND e.wake_capable = 1
                                 AND e.lease_expires_at > ?4)
             ORDER BY t.id LIMIT ?2",
        )?;
        let rows = stmt.query_map((after.unwrap_or(""), limit as i64, &me, now.as_micros()), |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// Most transfers one [`Store::unbound_among_active`] call examines: a host's periodic
/// repair walks its transfers this many at a time (~0.1 s each at a million), not all at once.
pub const MAX_EXAMINED_TRANSFERS: usize = 100_000;

/// One slice of a host's active transfers, examined for a carrier ([`Store::unbound_among_active`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExaminedTransfers {
    /// Those without a carrier, as `(transfer id, agent id if bound)`, by transfer id.
    pub unbound: Vec<(String, Option<String>)>,
    /// The last transfer examined when the slice was full (the cursor of the next slice);
    /// `None` when it reached the last one (the next walk starts over).
    pub next_after: Option<String>,
}

impl Store {
    /// Host-side: examines the next `examine` transfers by transfer id after the exclusive
    /// cursor `after` (whatever their state), and returns the active ones this store's host
    /// carries (or that no host carries yet) without a carrier — as
    /// [`unbound_active_transfers`](Self::unbound_active_transfers) lists them — and where the
    /// next slice starts. Unlike that list, whose every page may read every active transfer to
    /// find a few unbound ones, a slice reads at most `examine` transfers.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed cursor or `examine` outside
    /// 1..=[`MAX_EXAMINED_TRANSFERS`].
    pub fn unbound_among_active(&mut self, after: Option<&str>, examine: usize) -> Result<ExaminedTransfers> {
        if examine == 0 || examine > MAX_EXAMINED_TRANSFERS {
            return Err(Error::invalid(
                "examine",
                format!("must be 1 to {MAX_EXAMINED_TRANSFERS}"),
            ));
        }
        if let Some(a) = after {
            transfer::check_id(a)?;
        }
        let me = self.host_id.clone();
        let now = self.now();
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(
            // The slice is a range of the primary key whatever the transfers' states: a filter
            // on status or host in the WHERE would let the planner read every active transfer
            // through their indexes and sort them.
            "SELECT t.id, t.agent_id,
                    CASE WHEN t.status = 'active' AND (t.host_id IS NULL OR t.host_id = ?3)
                          AND NOT EXISTS (SELECT 1 FROM agent_endpoints e
                                          WHERE e.agent_id = t.agent_id AND e.state = 'attached'
                                            AND e.wake_capable = 1 AND e.lease_expires_at > ?4)
                         THEN 1 ELSE 0 END
             FROM transfers t WHERE t.id > ?1 ORDER BY t.id LIMIT ?2",
        )?;
        let rows = stmt.query_map((after.unwrap_or(""), examine as i64, &me, now.as_micros()), |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, bool>(2)?,
            ))
        })?;
        let mut slice = ExaminedTransfers::default();
        let mut examined = 0;
        let mut last = None;
        for row in rows {
            let (transfer, agent, unbound) = row?;
            examined += 1;
            if unbound {
                slice.unbound.push((transfer.clone(), agent));
            }
            last = Some(transfer);
        }
        slice.next_after = last.filter(|_| examined == examine);
        Ok(slice)
    }
}

#[cfg(test)]
mod carried_tests;
#[cfg(test)]
mod host_held_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod unbound_tests;
