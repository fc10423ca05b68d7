//! Agent endpoints: a principal-bound attachment of a host or client to an agent, with a
//! controller generation and a bounded lease.
//!
//! This file holds the endpoint as a record (its row, its loads); its life — attach, renew,
//! detach, retire — is [`attachment`](super::attachment). Every agent-acting operation is
//! admitted (`admission`) through [`AgentActor`]: the exact current endpoint
//! id and generation, bound to the caller's principal and the agent.
//!
//! **Host-held endpoints.** The endpoint a binding attaches for a transfer's agent is
//! *host-held* ([`Endpoint::host_held`]): only the host's own caller
//! ([`Caller::is_host`]) is admitted through it, so the transfer's owner — who sees the endpoint
//! id and generation in its listings — can talk to the agent as the human but never act as it:
//! post as it, read its inbox, consume its deliveries, claim, activate or consume its wakes, or
//! renew its lease ([`ConversationError::HostHeldEndpoint`](Error::HostHeldEndpoint)). For the
//! same reason no caller attaches or detaches an endpoint of a transfer's agent
//! ([`ConversationError::TransferBoundAgent`](Error::TransferBoundAgent)). A message whose
//! author endpoint is host-held was therefore written by the agent's turn in its sandbox
//! ([`Store::host_held_endpoints`](crate::Store::host_held_endpoints): the console's provenance).

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::Serialize;

use super::agent::check_id as check_agent_id;
use super::bounds::{self};
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::ids::ENDPOINT_ID_PREFIX;
use super::principal::Caller;
use super::state::EndpointState;
use crate::clock::Timestamp;

/// An endpoint as its principal sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// `ep_…`.
    pub id: String,
    /// The agent it controls.
    pub agent_id: String,
    /// Its controller generation: the agent's attach count when it was attached.
    pub generation: u64,
    /// Its stored state (an attached endpoint whose lease has passed is not live; see [`Endpoint::is_live`]).
    pub state: EndpointState,
    /// When the lease runs out unless renewed.
    pub lease_expires_at: Timestamp,
    /// Whether its host registered a wake carrier for it.
    pub wake_capable: bool,
    /// Whether the host holds it (a binding attached it for a transfer's agent): only the host
    /// acts through it. See the [module docs](self).
    pub host_held: bool,
    /// When it was attached.
    pub attached_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it stopped being attached.
    pub ended_at: Option<Timestamp>,
    /// The host that attached it, for a host-held endpoint ([`crate::hosts`]).
    pub host_id: Option<String>,
    /// While an MCP App View holds its binding: the host whose process the View bound it on
    /// ([`super::app_carrier`]).
    pub app_host_id: Option<String>,
}

impl Endpoint {
    /// Whether it is attached with an unexpired lease at `now`.
    pub fn is_live(&self, now: Timestamp) -> bool {
        self.state == EndpointState::Attached && now < self.lease_expires_at
    }
}

/// The exact identity an agent acts under: agent, current endpoint and controller generation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AgentActor {
    /// `agt_…`.
    pub agent: String,
    /// `ep_…`, the agent's current endpoint.
    pub endpoint: String,
    /// That endpoint's controller generation.
    pub generation: u64,
}

impl AgentActor {
    /// The actor for `endpoint` as attached.
    pub fn of(endpoint: &Endpoint) -> Self {
        Self {
            agent: endpoint.agent_id.clone(),
            endpoint: endpoint.id.clone(),
            generation: endpoint.generation,
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        check_agent_id(&self.agent)?;
        check_id(&self.endpoint)
    }
}

pub(crate) const ENDPOINT_COLUMNS: &str = "id, agent_id, generation, state, lease_expires_at, wake_capable, attached_at, updated_at, ended_at, host_held, host_id, app_host_id";

pub(crate) fn from_row(r: &Row) -> Result<Endpoint> {
    let id: String = r.get(0)?;
    let state: String = r.get(3)?;
    let state = state
        .parse()
        .map_err(|e| Error::corrupt("agent_endpoints", format!("{id}: {e}")))?;
    let generation: i64 = r.get(2)?;
    Ok(Endpoint {
        agent_id: r.get(1)?,
        generation: u64::try_from(generation)
            .map_err(|_| Error::corrupt("agent_endpoints", format!("{id}: generation")))?,
        state,
        lease_expires_at: Timestamp::from_micros(r.get(4)?),
        wake_capable: r.get::<_, i64>(5)? == 1,
        attached_at: Timestamp::from_micros(r.get(6)?),
        updated_at: Timestamp::from_micros(r.get(7)?),
        ended_at: r.get::<_, Option<i64>>(8)?.map(Timestamp::from_micros),
        host_held: r.get::<_, i64>(9)? == 1,
        host_id: r.get(10)?,
        app_host_id: r.get(11)?,
        id,
    })
}

pub(crate) fn check_id(endpoint: &str) -> Result<()> {
    bounds::id("endpointId", endpoint, ENDPOINT_ID_PREFIX)
}

/// Loads `endpoint` of `agent` attached by `caller`; anything else is [`Error::EndpointNotFound`].
pub(super) fn load_scoped(conn: &Tx<'_>, caller: &Caller, agent: &str, endpoint: &str) -> Result<Endpoint> {
    let sql =
        format!("SELECT {ENDPOINT_COLUMNS} FROM agent_endpoints WHERE id = ?1 AND agent_id = ?2 AND principal = ?3");
    conn.prepare_cached(&sql)?
        .query_row((endpoint, agent, caller.principal().as_str()), |r| Ok(from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::EndpointNotFound(endpoint.to_owned())))
}

pub(crate) fn load(conn: &Tx<'_>, endpoint: &str) -> Result<Endpoint> {
    let sql = format!("SELECT {ENDPOINT_COLUMNS} FROM agent_endpoints WHERE id = ?1");
    conn.prepare_cached(&sql)?
        .query_row([endpoint], |r| Ok(from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::EndpointNotFound(endpoint.to_owned())))
}

/// Makes `endpoint` wake-capable in `tx` (its admission checked by the caller) and returns it.
pub(crate) fn mark_wake_capable(tx: &Tx<'_>, endpoint: &str, now: Timestamp) -> Result<Endpoint> {
    // A push carrier replaces any MCP App binding, and the window's continuity with it.
    tx.prepare_cached(
        "UPDATE agent_endpoints SET wake_capable = 1, updated_at = ?2,
                app_binding_hash = NULL, app_window_hash = NULL, app_host_id = NULL
         WHERE id = ?1",
    )?
    .execute((endpoint, now.as_micros()))?;
    load(tx, endpoint)
}
