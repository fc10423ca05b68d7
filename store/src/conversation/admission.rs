//! Endpoint admission: an agent acts only through the exact endpoint and controller
//! generation it was bound with. [`admit`] checks a caller's agent-acting operation (owner,
//! endpoint, holder, state, generation, lease, in that order, so nothing about a foreign
//! resource is revealed); [`admit_host`] a host-side call on the endpoint it carries;
//! [`Store::admitted`] runs an operation so that an expiry it met is recorded.

use ahp_store_sql::Tx;

use super::agent;
use super::endpoint::{AgentActor, Endpoint, load, load_scoped};
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::principal::Caller;
use super::state::EndpointState;
use crate::clock::Timestamp;

/// Admits an agent-acting operation: the caller owns the agent, the endpoint is that agent's,
/// bound to the caller, held by a caller of its kind (a host-held endpoint admits only the
/// host), attached, of the given generation, and its lease has not run out. Checks run in that
/// order, so nothing about a foreign resource is revealed, and a client refused a host-held
/// endpoint learns nothing of its state and records nothing (not even an expiry).
///
/// An elapsed lease yields [`Error::EndpointExpired`]; run the operation through
/// [`Store::admitted`] so that the expiry is then recorded.
pub(crate) fn admit(conn: &Tx<'_>, caller: &Caller, actor: &AgentActor, now: Timestamp) -> Result<Endpoint> {
    agent::load_owned(conn, caller.principal(), &actor.agent)?;
    let ep = load_scoped(conn, caller, &actor.agent, &actor.endpoint)?;
    if ep.host_held && !caller.is_host() {
        return Err(Error::HostHeldEndpoint(ep.id));
    }
    if ep.state != EndpointState::Attached {
        return Err(Error::EndpointNotCurrent {
            endpoint: ep.id,
            state: ep.state,
        });
    }
    if ep.generation != actor.generation {
        return Err(Error::StaleGeneration {
            endpoint: ep.id,
            given: actor.generation,
            current: ep.generation,
        });
    }
    if now >= ep.lease_expires_at {
        return Err(Error::EndpointExpired { endpoint: ep.id });
    }
    Ok(ep)
}

/// Refuses a client acting through a host-held endpoint of an agent it owns, before anything
/// else is read: for the paths that look up an idempotent replay before admitting the actor
/// (`post_message`), so that a replay cannot act through the host's endpoint either. Anything
/// not the caller's is left to the admission that follows (and is not found there).
pub(crate) fn refuse_host_held(conn: &Tx<'_>, caller: &Caller, actor: &AgentActor) -> Result<()> {
    if caller.is_host() {
        return Ok(());
    }
    let held = conn
        .prepare_cached(
            "SELECT 1 FROM agent_endpoints e JOIN agents a ON a.id = e.agent_id
             WHERE e.id = ?1 AND e.agent_id = ?2 AND e.principal = ?3 AND e.host_held = 1 AND a.owner_principal = ?3",
        )?
        .exists((&actor.endpoint, &actor.agent, caller.principal().as_str()))?;
    if held {
        return Err(Error::HostHeldEndpoint(actor.endpoint.clone()));
    }
    Ok(())
}

/// Refuses a client's attach or detach for `agent` (which the caller owns) when the agent is a
/// transfer's: its endpoints are the host's to attach (binding) and withdraw (the transfer's
/// end), in every status of the transfer.
pub(crate) fn refuse_transfer_bound(conn: &Tx<'_>, caller: &Caller, agent: &str) -> Result<()> {
    if caller.is_host() {
        return Ok(());
    }
    let bound = conn
        .prepare_cached("SELECT 1 FROM transfers WHERE agent_id = ?1")?
        .exists([agent])?;
    if bound {
        return Err(Error::TransferBoundAgent(agent.to_owned()));
    }
    Ok(())
}

/// Admits a host-side call on the exact `endpoint` and `generation` of `agent`: the endpoint is
/// that agent's, attached, of that generation, with an unexpired lease. (No principal: only the
/// host reaches these calls.)
pub(crate) fn admit_host(
    conn: &Tx<'_>,
    agent: &str,
    endpoint: &str,
    generation: u64,
    now: Timestamp,
) -> Result<Endpoint> {
    let ep = load(conn, endpoint)?;
    if ep.agent_id != agent {
        return Err(Error::EndpointNotFound(endpoint.to_owned()));
    }
    if ep.state != EndpointState::Attached {
        return Err(Error::EndpointNotCurrent {
            endpoint: ep.id,
            state: ep.state,
        });
    }
    if ep.generation != generation {
        return Err(Error::StaleGeneration {
            endpoint: ep.id,
            given: generation,
            current: ep.generation,
        });
    }
    if now >= ep.lease_expires_at {
        return Err(Error::EndpointExpired { endpoint: ep.id });
    }
    Ok(ep)
}
