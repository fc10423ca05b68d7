//! What a host reads of the agents it carries, so that it need not hold them: a host carrying
//! a million parked agents keeps none of them in memory, and reads one from its rows when a
//! wake comes for it.
//!
//! The rows already say who carries an agent: its attached endpoint is wake-capable, held by
//! a host, and names that host (`host_id`); its transfer is bound to it. Two reads serve the
//! host: [`Store::carried_agent`] (one agent, when a wake comes for it) and
//! [`Store::carried_with_wakes`] (the agents of this host with a wake to claim, for the tick's
//! safety net), each over an index: the attached endpoint of an agent, the open wakes.

use ahp_store_sql::OptionalExtension;

use crate::conversation::endpoint::{self, AgentActor, ENDPOINT_COLUMNS, Endpoint};
use crate::conversation::{agent, carrier::MAX_READY_PAGE};
use crate::db::Store;
use crate::error::{Error, Result};
use crate::state::TransferStatus;
use crate::transfer::{self, Transfer};

/// An agent this store's host carries, as its rows say ([`Store::carried_agent`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarriedAgent {
    /// Its attached, wake-capable endpoint, held by this host, lease live.
    pub endpoint: Endpoint,
    /// Its transfer, `active`.
    pub transfer: Transfer,
}

impl Store {
    /// Host-side: `agent` as this store's host carries it — its attached endpoint wake-capable,
    /// host-held, naming this host, its lease live, and its transfer `active` — or `None` when
    /// any of that is not so (another host's, detached, expired, not registered, ended).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed agent id; [`Error::CorruptRow`] for a row that
    /// does not parse.
    pub fn carried_agent(&mut self, agent: &str) -> Result<Option<CarriedAgent>> {
        agent::check_id(agent)?;
        let me = self.host_id.clone();
        let now = self.now();
        let tx = self.autocommit();
        let sql = format!(
            "SELECT {ENDPOINT_COLUMNS} FROM agent_endpoints
             WHERE agent_id = ?1 AND state = 'attached' AND wake_capable = 1 AND host_held = 1
               AND host_id = ?2 AND lease_expires_at > ?3"
        );
        let endpoint = tx
            .prepare_cached(&sql)?
            .query_row((agent, &me, now.as_micros()), |r| Ok(endpoint::from_row(r)))
            .optional()?
            .transpose()?;
        let Some(endpoint) = endpoint else { return Ok(None) };
        let id: Option<String> = tx
            .prepare_cached("SELECT id FROM transfers WHERE agent_id = ?1")?
            .query_row([agent], |r| r.get(0))
            .optional()?;
        let Some(id) = id else { return Ok(None) };
        let transfer = transfer::load(&tx, &id)?;
        if transfer.status != TransferStatus::Active {
            return Ok(None);
        }
        Ok(Some(CarriedAgent { endpoint, transfer }))
    }

    /// Host-side: the agents this store's host carries (as [`carried_agent`](Self::carried_agent)
    /// says, but for the transfer's status) that have a wake not yet past the dispatch fence
    /// (pending, or claimed), as the actor each endpoint was registered for, by agent id after
    /// the exclusive cursor `after`, at most `limit`. Read from the open wakes, not from every
    /// carried endpoint: its cost follows the agents with work, not the agents carried.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed cursor or a limit outside
    /// 1..=[`MAX_READY_PAGE`]; [`Error::CorruptRow`] for a negative generation.
    pub fn carried_with_wakes(&mut self, after: Option<&str>, limit: usize) -> Result<Vec<AgentActor>> {
        if limit == 0 || limit > MAX_READY_PAGE {
            return Err(Error::invalid("limit", format!("must be 1 to {MAX_READY_PAGE}")));
        }
        if let Some(a) = after {
            agent::check_id(a)?;
        }
        let me = self.host_id.clone();
        let now = self.now();
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(
            // CROSS JOIN: SQLite keeps the open wakes as the outer loop (their partial index),
            // rather than this host's every endpoint.
            "SELECT e.agent_id, e.id, e.generation FROM wakes w
             CROSS JOIN agent_endpoints e
             WHERE w.state IN ('pending', 'claimed') AND w.agent_id > ?1
               AND e.agent_id = w.agent_id AND e.state = 'attached' AND e.wake_capable = 1 AND e.host_held = 1 AND e.host_id = ?2 AND e.lease_expires_at > ?3
             ORDER BY w.agent_id LIMIT ?4",
        )?;
        let rows = stmt.query_map((after.unwrap_or(""), &me, now.as_micros(), limit as i64), |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?))
        })?;
        rows.map(|r| {
            let (agent, endpoint, generation) = r?;
            let generation = u64::try_from(generation)
                .map_err(|_| Error::corrupt("agent_endpoints", format!("{endpoint}: generation")))?;
            Ok(AgentActor {
                agent,
                endpoint,
                generation,
            })
        })
        .collect()
    }
}
