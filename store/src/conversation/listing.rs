//! The coordinator-facing agent listing: each of the caller's agents with the readiness facts
//! the conversation protocol projects beside its card — how many live endpoints it has and how many deliveries
//! wait in its inbox, and its current endpoint (from which a host decides whether it holds a
//! carrier for it).

use ahp_store_sql::OptionalExtension;
use serde::Serialize;

use super::agent::{self, AGENT_COLUMNS, Agent};
use super::bounds;
use super::endpoint::{self, ENDPOINT_COLUMNS, Endpoint};
use super::error::ConversationResult as Result;
use super::principal::Caller;
use super::scope::Scope;
use super::wake::nonneg;
use crate::db::Store;

/// One agent of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentListing {
    /// The agent and its card.
    pub agent: Agent,
    /// Its current endpoint, when one is attached with an unexpired lease.
    pub current_endpoint: Option<Endpoint>,
    /// How many live endpoints it has (0 or 1: attaching replaces the previous one).
    pub active_endpoint_count: u64,
    /// Deliveries queued in its inbox.
    pub queued_count: u64,
}

impl Store {
    /// The caller's agents ordered by id after the exclusive cursor `after`, each with its
    /// current endpoint and queued count, read in one snapshot.
    ///
    /// # Errors
    ///
    /// [`ConversationError::InvalidInput`](super::ConversationError::InvalidInput) for a bad limit
    /// or cursor; [`ConversationError::MissingScope`](super::ConversationError::MissingScope)
    /// without `communication:read`; a corrupt row fails closed.
    pub fn list_agent_listings(
        &mut self,
        caller: &Caller,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AgentListing>> {
        caller.require(Scope::Read)?;
        bounds::page_limit(limit)?;
        if let Some(a) = after {
            agent::check_id(a)?;
        }
        let (tx, now) = self.begin_read()?;
        let sql =
            format!("SELECT {AGENT_COLUMNS} FROM agents WHERE owner_principal = ?1 AND id > ?2 ORDER BY id LIMIT ?3");
        let agents: Vec<Agent> = tx
            .prepare_cached(&sql)?
            .query_map((caller.principal().as_str(), after.unwrap_or(""), limit as i64), |r| {
                Ok(agent::from_row(r))
            })?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .collect::<Result<_>>()?;
        let ep_sql = format!(
            "SELECT {ENDPOINT_COLUMNS} FROM agent_endpoints
             WHERE agent_id = ?1 AND state NOT IN ('detached', 'expired', 'replaced')"
        );
        let mut out = Vec::with_capacity(agents.len());
        for agent in agents {
            let current = tx
                .prepare_cached(&ep_sql)?
                .query_row([&agent.id], |r| Ok(endpoint::from_row(r)))
                .optional()?
                .transpose()?
                .filter(|e| e.is_live(now));
            let queued: i64 = tx
                .prepare_cached(
                    "SELECT count(*) FROM deliveries WHERE recipient_agent_id = ?1 AND state <> 'consumed'",
                )?
                .query_row([&agent.id], |r| r.get(0))?;
            out.push(AgentListing {
                active_endpoint_count: u64::from(current.is_some()),
                queued_count: nonneg("deliveries", &agent.id, queued)?,
                current_endpoint: current,
                agent,
            });
        }
        Ok(out)
    }
}
