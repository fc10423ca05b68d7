//! An endpoint's life: attach, renew, detach, and retire by any path.
//!
//! Attaching gives the agent its next controller generation and replaces whatever endpoint was
//! attached before (an agent has one controller at a time). The lease is renewed by the host;
//! nothing runs on a timer: an elapsed lease is *materialized* as `expired` lazily, the next time
//! an operation is admitted through that endpoint (`Store::admitted`), on replacement or at
//! takeover. Detach is desired-state idempotent and withdraws only the exact endpoint named,
//! never its successor. Retiring an endpoint by any path (`retire`) reconciles its wake
//! attempts — a claim not yet past the dispatch fence goes back to pending, a dispatched one
//! becomes `delivery_unknown` — and the task attempts fenced to it, in the same transaction.
//!
//! `wake_capable` is set only by [`Store::register_wake_carrier`], a host-side call; attach input
//! cannot declare it. An agent that a transfer became loses it when the transfer leaves `active`
//! ([`crate::binding`]), and cannot get it back. The host keeps such an agent's carrier with
//! [`Store::renew_carrier_lease`].

use std::collections::HashSet;
use std::time::Duration;

use ahp_store_sql::Tx;
use serde::Serialize;
use serde_json::json;

use super::admission::{admit, admit_host, refuse_transfer_bound};
use super::agent::{self, Agent, check_id as check_agent_id};
use super::attempt;
use super::audit::{self, AuditKind};
use super::bounds::{self, MAX_ENDPOINT_LEASE, MAX_PAGE_LIMIT, MIN_ENDPOINT_LEASE};
use super::endpoint::{
    AgentActor, ENDPOINT_COLUMNS, Endpoint, check_id, from_row, load, load_scoped, mark_wake_capable,
};
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::idempotency::{Check, IdempotencyKey, Mutation, Operation, validate_key};
use super::ids::ENDPOINT_ID_PREFIX;
use super::principal::{Caller, CallerKind, CommunicationPrincipal};
use super::scope::Scope;
use super::state::EndpointState;
use crate::clock::Timestamp;
use crate::db::Store;
use crate::id::new_id;

/// Moves `endpoint` out of `attached` into `to` and, in the same transaction, reconciles the wake
/// attempts and ends the task attempts fenced to it. Its MCP App binding ends with it; an
/// expiry keeps the window's hash (see [`super::app_carrier`]). Returns whether it was attached.
pub(crate) fn retire(tx: &Tx<'_>, endpoint: &str, to: EndpointState, now: Timestamp) -> Result<bool> {
    let ep = load(tx, endpoint)?;
    if ep.state != EndpointState::Attached {
        return Ok(false);
    }
    let changed = tx
        .prepare_cached(
            // An MCP App binding ends with the endpoint; natural expiry alone keeps the
            // window's hash, for the expired-endpoint replacement only (`app_carrier`).
            "UPDATE agent_endpoints SET state = ?2, wake_capable = 0, ended_at = ?3, updated_at = ?3,
                    app_binding_hash = NULL, app_host_id = NULL,
                    app_window_hash = CASE WHEN ?2 = 'expired' THEN app_window_hash ELSE NULL END
             WHERE id = ?1 AND state = 'attached'",
        )?
        .execute((endpoint, to.as_str(), now.as_micros()))?;
    if changed == 1 {
        let kind = match to {
            EndpointState::Detached => AuditKind::EndpointDetached,
            EndpointState::Replaced => AuditKind::EndpointReplaced,
            EndpointState::Expired | EndpointState::Attached => AuditKind::EndpointExpired,
        };
        audit::record(
            tx,
            kind,
            Some(&ep.agent_id),
            None,
            json!({ "endpointId": ep.id, "controllerGeneration": ep.generation }),
            now,
        )?;
        attempt::reconcile_endpoint(tx, endpoint, now)?;
        crate::conversation::delegation::attempt::endpoint_retired(tx, endpoint, now)?;
    }
    Ok(changed == 1)
}

/// Records the expiry of every attached endpoint whose lease has passed (used at takeover).
pub(crate) fn materialize_all_expired(tx: &Tx<'_>, now: Timestamp) -> Result<u64> {
    // Every endpoint not known to be retired is read and parsed, so an unknown state fails
    // closed here instead of being skipped by a filter on the one known live state.
    let sql = format!(
        "SELECT {ENDPOINT_COLUMNS} FROM agent_endpoints
         WHERE state NOT IN ('detached', 'expired', 'replaced') AND lease_expires_at <= ?1"
    );
    let ids: Vec<String> = tx
        .prepare_cached(&sql)?
        .query_map([now.as_micros()], |r| Ok(from_row(r)))?
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .map(|ep| ep.map(|ep| ep.id))
        .collect::<Result<_>>()?;
    for id in &ids {
        retire(tx, id, EndpointState::Expired, now)?;
    }
    Ok(ids.len() as u64)
}

/// Attaches a new endpoint for agent `a`, bound to `principal`, with the agent's next controller
/// generation and a lease of `lease` from `now`: every endpoint attached before is replaced (or
/// recorded as expired, if its lease had run out) and its wake attempts reconciled, and
/// `endpoint_attached` is recorded. `held_by` [`CallerKind::Host`] makes it host-held (a
/// binding's). The caller has authorized `principal` for `a`.
pub(crate) fn attach(
    tx: &Tx<'_>,
    principal: &CommunicationPrincipal,
    a: &Agent,
    lease: Duration,
    held_by: CallerKind,
    now: Timestamp,
) -> Result<Endpoint> {
    let agent = a.id.as_str();
    // Every endpoint of the agent not known to be retired: an unknown state fails closed
    // (a filter on 'attached' alone would skip it and attach beside it).
    let sql = format!(
        "SELECT {ENDPOINT_COLUMNS} FROM agent_endpoints
         WHERE agent_id = ?1 AND state NOT IN ('detached', 'expired', 'replaced')"
    );
    let previous: Vec<Endpoint> = tx
        .prepare_cached(&sql)?
        .query_map([agent], |r| Ok(from_row(r)))?
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .collect::<Result<_>>()?;
    for prev in previous {
        let to = if prev.lease_expires_at <= now {
            EndpointState::Expired
        } else {
            EndpointState::Replaced
        };
        retire(tx, &prev.id, to, now)?;
    }
    let generation = a.controller_generation + 1;
    let changed = tx
        .prepare_cached("UPDATE agents SET controller_generation = ?2 WHERE id = ?1 AND controller_generation = ?3")?
        .execute((agent, generation as i64, a.controller_generation as i64))?;
    if changed != 1 {
        return Err(Error::corrupt(
            "agents",
            format!("{agent} generation moved under its own write transaction"),
        ));
    }
    let id = new_id(ENDPOINT_ID_PREFIX);
    tx.prepare_cached(
        "INSERT INTO agent_endpoints (id, agent_id, principal, generation, state, lease_expires_at, attached_at, updated_at, lease_micros, host_held)
         VALUES (?1, ?2, ?3, ?4, 'attached', ?5, ?6, ?6, ?7, ?8)",
    )?
    .execute((
        &id,
        agent,
        principal.as_str(),
        generation as i64,
        now.saturating_add(lease).as_micros(),
        now.as_micros(),
        i64::try_from(lease.as_micros()).unwrap_or(i64::MAX),
        i64::from(held_by == CallerKind::Host),
    ))?;
    audit::record(
        tx,
        AuditKind::EndpointAttached,
        Some(agent),
        None,
        json!({ "endpointId": id, "controllerGeneration": generation }),
        now,
    )?;
    load(tx, &id)
}

/// The lease `endpoint` was attached with, within the endpoint bounds.
pub(crate) fn attached_lease(tx: &Tx<'_>, endpoint: &str) -> Result<Duration> {
    let lease: Option<i64> = tx
        .prepare_cached("SELECT lease_micros FROM agent_endpoints WHERE id = ?1")?
        .query_row([endpoint], |r| r.get(0))?;
    Ok(lease
        .and_then(|l| u64::try_from(l).ok())
        .map_or(MAX_ENDPOINT_LEASE / 2, Duration::from_micros)
        .clamp(MIN_ENDPOINT_LEASE, MAX_ENDPOINT_LEASE))
}

/// The lease `ep` is renewed by, when less than half of it is left at `now`; `None` before.
pub(crate) fn renewal_due(tx: &Tx<'_>, ep: &Endpoint, now: Timestamp) -> Result<Option<Duration>> {
    let lease = attached_lease(tx, &ep.id)?;
    let left = ep.lease_expires_at.as_micros().saturating_sub(now.as_micros());
    Ok((u128::try_from(left).unwrap_or(0) * 2 < lease.as_micros()).then_some(lease))
}

/// Renews the admitted endpoint `ep` by the lease it was attached with once less than half of
/// it is left (so a burst of calls costs one write, not one each), in `tx`; returns it as it
/// then is.
pub(crate) fn renew_when_half_spent(tx: &Tx<'_>, ep: Endpoint, now: Timestamp) -> Result<Endpoint> {
    let Some(lease) = renewal_due(tx, &ep, now)? else {
        return Ok(ep);
    };
    tx.prepare_cached("UPDATE agent_endpoints SET lease_expires_at = ?2, updated_at = ?3 WHERE id = ?1")?
        .execute((&ep.id, now.saturating_add(lease).as_micros(), now.as_micros()))?;
    load(tx, &ep.id)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AttachRequest<'a> {
    agent: &'a str,
    lease_micros: u128,
}

impl Store {
    /// Attaches a new endpoint for `agent`, bound to the caller, with the agent's next controller
    /// generation and a lease of `lease`. An endpoint attached before is replaced (or recorded
    /// as expired, if its lease had run out) and its wake attempts reconciled. The new endpoint
    /// is not wake-capable until its host calls [`Store::register_wake_carrier`].
    ///
    /// # Errors
    ///
    /// [`Error::AgentNotFound`] unless the caller owns the agent; [`Error::TransferBoundAgent`]
    /// for a transfer's agent (its endpoint is the host's); [`Error::InvalidInput`] for a
    /// lease outside [`MIN_ENDPOINT_LEASE`]..=[`MAX_ENDPOINT_LEASE`] or a bad key;
    /// [`Error::IdempotencyConflict`]; [`Error::MissingScope`]. A refusal changes nothing.
    pub fn attach_endpoint(
        &mut self,
        caller: &Caller,
        agent: &str,
        lease: Duration,
        idempotency_key: &str,
    ) -> Result<Mutation<Endpoint>> {
        caller.require(Scope::Manage)?;
        check_agent_id(agent)?;
        bounds::lease("lease", lease, MIN_ENDPOINT_LEASE, MAX_ENDPOINT_LEASE)?;
        validate_key(idempotency_key)?;
        let request = AttachRequest {
            agent,
            lease_micros: lease.as_micros(),
        };
        let check = Check::new(
            Operation::AttachEndpoint,
            &IdempotencyKey::from(idempotency_key),
            &request,
        );
        self.retrying(|s| {
            let (tx, now) = s.begin_immediate()?;
            let a = agent::load_owned(&tx, caller.principal(), agent)?;
            refuse_transfer_bound(&tx, caller, agent)?;
            if let Some(id) = check.replay(&tx, caller.principal(), now)? {
                return Ok(Mutation::replayed(load_scoped(&tx, caller, agent, &id)?));
            }
            let ep = attach(&tx, caller.principal(), &a, lease, caller.kind(), now)?;
            check.record(&tx, caller.principal(), &ep.id, now)?;
            tx.commit()?;
            Ok(Mutation::changed(ep))
        })
    }

    /// Extends the lease of the actor's current endpoint to `lease` from now.
    ///
    /// # Errors
    ///
    /// The admission errors ([`Error::AgentNotFound`], [`Error::EndpointNotFound`],
    /// [`Error::HostHeldEndpoint`], [`Error::EndpointNotCurrent`], [`Error::StaleGeneration`],
    /// [`Error::EndpointExpired`]); [`Error::InvalidInput`] for a lease out of bounds;
    /// [`Error::MissingScope`].
    pub fn renew_endpoint(&mut self, caller: &Caller, actor: &AgentActor, lease: Duration) -> Result<Endpoint> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        bounds::lease("lease", lease, MIN_ENDPOINT_LEASE, MAX_ENDPOINT_LEASE)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            admit(&tx, caller, actor, now)?;
            tx.prepare_cached("UPDATE agent_endpoints SET lease_expires_at = ?2, updated_at = ?3 WHERE id = ?1")?
                .execute((&actor.endpoint, now.saturating_add(lease).as_micros(), now.as_micros()))?;
            let ep = load(&tx, &actor.endpoint)?;
            tx.commit()?;
            Ok(ep)
        })
    }

    /// Renews the actor's current endpoint by the lease it was attached with — what a host does
    /// on every agent-acting call, so that renewal is never the model's chore. Writes only when
    /// less than half of that lease is left (so a burst of calls costs one commit, not one
    /// each); otherwise the endpoint is returned as it is.
    ///
    /// # Errors
    ///
    /// The admission errors ([`Error::AgentNotFound`], [`Error::EndpointNotFound`],
    /// [`Error::HostHeldEndpoint`], [`Error::EndpointNotCurrent`], [`Error::StaleGeneration`],
    /// [`Error::EndpointExpired`]); [`Error::MissingScope`] without either communication scope.
    pub fn touch_endpoint(&mut self, caller: &Caller, actor: &AgentActor) -> Result<Endpoint> {
        if !caller.has(Scope::Manage) {
            caller.require(Scope::Read)?;
        }
        actor.validate()?;
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            let ep = admit(&tx, caller, actor, now)?;
            let ep = renew_when_half_spent(&tx, ep, now)?;
            tx.commit()?;
            Ok(ep)
        })
    }

    /// Detaches exactly `endpoint` of `agent`. Desired-state idempotent: an endpoint that is
    /// already not attached (detached, replaced, expired) is returned unchanged. Works after the
    /// lease ran out, too. Its wake attempts are reconciled.
    ///
    /// # Errors
    ///
    /// [`Error::AgentNotFound`] / [`Error::EndpointNotFound`] outside the caller's reach;
    /// [`Error::TransferBoundAgent`] for a transfer's agent (whatever the endpoint's state);
    /// [`Error::MissingScope`]. A refusal changes nothing.
    pub fn detach_endpoint(&mut self, caller: &Caller, agent: &str, endpoint: &str) -> Result<Mutation<Endpoint>> {
        caller.require(Scope::Manage)?;
        check_agent_id(agent)?;
        check_id(endpoint)?;
        self.retrying(|s| {
            let (tx, now) = s.begin_immediate()?;
            agent::load_owned(&tx, caller.principal(), agent)?;
            refuse_transfer_bound(&tx, caller, agent)?;
            let ep = load_scoped(&tx, caller, agent, endpoint)?;
            if ep.state != EndpointState::Attached {
                return Ok(Mutation::unchanged(ep));
            }
            retire(&tx, endpoint, EndpointState::Detached, now)?;
            let ep = load(&tx, endpoint)?;
            tx.commit()?;
            Ok(Mutation::changed(ep))
        })
    }

    /// One endpoint of an agent the caller owns, as stored.
    ///
    /// # Errors
    ///
    /// [`Error::AgentNotFound`] / [`Error::EndpointNotFound`]; [`Error::MissingScope`].
    pub fn get_endpoint(&mut self, caller: &Caller, agent: &str, endpoint: &str) -> Result<Endpoint> {
        caller.require(Scope::Read)?;
        check_agent_id(agent)?;
        check_id(endpoint)?;
        agent::load_owned(&self.autocommit(), caller.principal(), agent)?;
        load_scoped(&self.autocommit(), caller, agent, endpoint)
    }

    /// Host-side: which of `endpoints` (ids of message authors the caller was shown) are
    /// host-held — so a message posted through one was written by its agent's turn in the
    /// sandbox, since no other caller is admitted through it. Unknown and malformed ids are
    /// simply not in the answer; the answer says nothing else about an endpoint.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for more than [`MAX_PAGE_LIMIT`] ids (one transcript page).
    pub fn host_held_endpoints(&mut self, endpoints: &[&str]) -> Result<HashSet<String>> {
        if endpoints.len() > MAX_PAGE_LIMIT {
            return Err(Error::invalid("endpoints", format!("at most {MAX_PAGE_LIMIT}")));
        }
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached("SELECT 1 FROM agent_endpoints WHERE id = ?1 AND host_held = 1")?;
        let mut held = HashSet::new();
        for id in endpoints.iter().copied().filter(|id| check_id(id).is_ok()) {
            if !held.contains(id) && stmt.exists([id])? {
                held.insert(id.to_owned());
            }
        }
        Ok(held)
    }

    /// Host-side: records that this host holds a wake carrier for the exact endpoint and
    /// generation, making it `wake_capable`. Never reachable from attach input or from a model.
    /// The agent of a transfer that is no longer `active` gets no carrier: its turns ended with
    /// its transfer.
    ///
    /// # Errors
    ///
    /// [`Error::EndpointNotFound`] if no such endpoint of that agent exists;
    /// [`Error::EndpointNotCurrent`], [`Error::StaleGeneration`] or [`Error::EndpointExpired`]
    /// unless it is the live current endpoint; [`Error::NotWakeCapable`] when the agent's
    /// transfer is not `active`.
    pub fn register_wake_carrier(&mut self, agent: &str, endpoint: &str, generation: u64) -> Result<Endpoint> {
        check_agent_id(agent)?;
        check_id(endpoint)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            admit_host(&tx, agent, endpoint, generation, now)?;
            let transfer_ended = tx
                .prepare_cached("SELECT 1 FROM transfers WHERE agent_id = ?1 AND status <> 'active'")?
                .exists([agent])?;
            if transfer_ended {
                return Err(Error::NotWakeCapable(endpoint.to_owned()));
            }
            let ep = mark_wake_capable(&tx, endpoint, now)?;
            tx.commit()?;
            Ok(ep)
        })
    }

    /// Host-side: extends the lease of the exact current endpoint and generation of `agent` to
    /// `lease` from now — what a host holding an agent's carrier (a transfer's sandbox) does to
    /// keep it, without a [`Caller`]: only the host reaches it. A replaced, detached or expired
    /// endpoint, or an older generation, is refused; a lease that ran out is recorded as expired.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed id or a lease outside
    /// [`MIN_ENDPOINT_LEASE`]..=[`MAX_ENDPOINT_LEASE`]; [`Error::EndpointNotFound`] if no such
    /// endpoint of that agent exists; [`Error::EndpointNotCurrent`], [`Error::StaleGeneration`]
    /// or [`Error::EndpointExpired`] unless it is the live current endpoint.
    pub fn renew_carrier_lease(
        &mut self,
        agent: &str,
        endpoint: &str,
        generation: u64,
        lease: Duration,
    ) -> Result<Endpoint> {
        check_agent_id(agent)?;
        check_id(endpoint)?;
        bounds::lease("lease", lease, MIN_ENDPOINT_LEASE, MAX_ENDPOINT_LEASE)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            admit_host(&tx, agent, endpoint, generation, now)?;
            tx.prepare_cached("UPDATE agent_endpoints SET lease_expires_at = ?2, updated_at = ?3 WHERE id = ?1")?
                .execute((endpoint, now.saturating_add(lease).as_micros(), now.as_micros()))?;
            let ep = load(&tx, endpoint)?;
            tx.commit()?;
            Ok(ep)
        })
    }
}

impl Store {
    /// Runs `op` on the store's write path ([`Store::retrying`]: a busy database runs it
    /// again from the start); if it was refused because an endpoint's lease had run out,
    /// records that expiry (reconciling the endpoint's wake attempts) before returning the
    /// refusal.
    pub(crate) fn admitted<T>(&mut self, op: impl FnMut(&mut Self) -> Result<T>) -> Result<T> {
        match self.retrying(op) {
            Err(Error::EndpointExpired { endpoint }) => {
                self.retrying(|s| {
                    let (tx, now) = s.begin_immediate()?;
                    let changed = tx
                        .prepare_cached("SELECT 1 FROM agent_endpoints WHERE id = ?1 AND lease_expires_at <= ?2")?
                        .exists((&endpoint, now.as_micros()))?;
                    if changed {
                        retire(&tx, &endpoint, EndpointState::Expired, now)?;
                    }
                    tx.commit()?;
                    Ok::<_, Error>(())
                })?;
                Err(Error::EndpointExpired { endpoint })
            }
            other => other,
        }
    }
}
