//! Live moves: an operator moves a running agent from the host that carries it to another
//! live host (`ahp agent move AGENT --to HOST`).
//!
//! [`Store::request_agent_move`] records the request; the carrying host stops claiming the
//! agent's wakes, lets its current turn end (the turn's checkpoint is durable with it), and
//! [`hands it over`](Store::hand_over_agent) in one transaction fenced by the endpoint and
//! generation it carries: the endpoint is detached (its wake attempts reconciled) and the
//! transfer is carried by the receiving host from then on. The receiving host binds it at the
//! next generation, which completes the move, restores the agent from its checkpoint and serves
//! the deliveries that queued meanwhile. Nothing is posted twice and nothing is lost: messages
//! committed during the move wait in the agent's inbox, and a wake is only ever claimed through
//! the one attached endpoint.
//!
//! There is no tool for it: a move is the operator's, through the database the operator holds.

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::Serialize;

use crate::clock::Timestamp;
use crate::conversation::{EndpointState, attachment, endpoint};
use crate::db::Store;
use crate::error::{Error, Result};
use crate::hosts::validate_host_id;

/// Most moves one host hands over per call of [`Store::pending_moves`].
pub const MAX_PENDING_MOVES: usize = 200;

/// One requested move.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentMove {
    /// The transfer whose agent moves.
    pub transfer_id: String,
    /// The host carrying it when the move was asked for.
    pub from_host: String,
    /// Where it goes.
    pub to_host: String,
    /// When the operator asked.
    pub requested_at: Timestamp,
    /// When the carrying host handed it over (the receiving host has not bound it yet).
    pub handed_over_at: Option<Timestamp>,
}

const MOVE_COLUMNS: &str = "transfer_id, from_host, to_host, requested_at, handed_over_at";

fn move_from_row(r: &Row) -> ahp_store_sql::SqlResult<AgentMove> {
    Ok(AgentMove {
        transfer_id: r.get(0)?,
        from_host: r.get(1)?,
        to_host: r.get(2)?,
        requested_at: Timestamp::from_micros(r.get(3)?),
        handed_over_at: r.get::<_, Option<i64>>(4)?.map(Timestamp::from_micros),
    })
}

fn load(tx: &Tx<'_>, transfer: &str) -> Result<Option<AgentMove>> {
    let sql = format!("SELECT {MOVE_COLUMNS} FROM agent_moves WHERE transfer_id = ?1");
    Ok(tx
        .prepare_cached(&sql)?
        .query_row([transfer], move_from_row)
        .optional()?)
}

impl Store {
    /// The operator asks for `agent` (a transfer's agent, `agt_…`) to move to host `to`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed agent or host id, an agent that is no
    /// transfer's, a transfer that is not `active` or not carried by any host, a host `to` that
    /// is not live or already carries it, or a move of it already pending. A refusal changes
    /// nothing.
    pub fn request_agent_move(&mut self, agent: &str, to: &str) -> Result<AgentMove> {
        crate::conversation::agent::check_id(agent)?;
        validate_host_id(to)?;
        self.write_at(|tx, now| {
            let row: Option<(String, String, Option<String>)> = tx
                .prepare_cached("SELECT id, status, host_id FROM transfers WHERE agent_id = ?1")?
                .query_row([agent], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()?;
            let Some((transfer, status, from)) = row else {
                return Err(Error::invalid("agent", format!("{agent} is not a transfer's agent")));
            };
            if status != "active" {
                return Err(Error::invalid(
                    "agent",
                    format!("its transfer {transfer} is {status}, not active"),
                ));
            }
            let Some(from) = from else {
                return Err(Error::invalid("agent", format!("no host carries {agent} yet")));
            };
            if from == to {
                return Err(Error::invalid("toHost", format!("{to} already carries {agent}")));
            }
            let live: Option<i64> = tx
                .prepare_cached("SELECT lease_expires_at FROM hosts WHERE id = ?1 AND state = 'live'")?
                .query_row([to], |r| r.get(0))
                .optional()?;
            if live.is_none_or(|until| until <= now.as_micros()) {
                return Err(Error::invalid("toHost", format!("host {to} is not live")));
            }
            if load(tx, &transfer)?.is_some() {
                return Err(Error::invalid("agent", format!("a move of {agent} is already pending")));
            }
            tx.prepare_cached(
                "INSERT INTO agent_moves (transfer_id, from_host, to_host, requested_at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute((&transfer, &from, to, now.as_micros()))?;
            load(tx, &transfer)?
                .ok_or_else(|| Error::corrupt("agent_moves", "the move vanished in its own transaction"))
        })
    }

    /// The moves away from this store's host still to hand over, oldest first.
    ///
    /// # Errors
    ///
    /// A database failure.
    pub fn pending_moves(&mut self) -> Result<Vec<AgentMove>> {
        let me = self.host_id.clone();
        let sql = format!(
            "SELECT {MOVE_COLUMNS} FROM agent_moves WHERE from_host = ?1 AND handed_over_at IS NULL
             ORDER BY requested_at, transfer_id LIMIT {MAX_PENDING_MOVES}"
        );
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(&sql)?;
        let rows = stmt.query_map([&me], move_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The move of `transfer`, if one is pending or handed over and not yet completed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed transfer id.
    #[cfg(any(test, feature = "testing"))]
    pub fn agent_move(&mut self, transfer: &str) -> Result<Option<AgentMove>> {
        crate::transfer::check_id(transfer)?;
        load(&self.autocommit(), transfer)
    }

    /// Hands `transfer`'s agent over to the host its pending move names, in one transaction
    /// fenced by the endpoint and generation this host carries it through: that endpoint is
    /// detached (its wake attempts reconciled) and the receiving host carries the transfer from
    /// now on. Call it between turns, once no turn of the agent runs here.
    ///
    /// The receiving host must still be live, with an unexpired lease: a host that died after
    /// the move was asked for would never bind the agent, and once claimed (`expired`) no other
    /// host would either. Such a move is dropped instead, and the agent stays here.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when no move of it is pending from this host, or `endpoint` at
    /// `generation` is not the agent's attached endpoint any more (nothing changes then);
    /// [`Error::CarriedElsewhere`] when this host no longer carries it;
    /// [`Error::MoveTargetNotLive`] when the receiving host is not live any more (the move is
    /// dropped, nothing else changes).
    pub fn hand_over_agent(&mut self, transfer: &str, endpoint_id: &str, generation: u64) -> Result<AgentMove> {
        crate::transfer::check_id(transfer)?;
        endpoint::check_id(endpoint_id).map_err(Error::from)?;
        let me = self.host_id.clone();
        // The outer result is the transaction's (rolled back on error); the inner one a refusal
        // committed with the move it dropped.
        self.write_at(|tx, now| {
            crate::hosts::check_carries(tx, transfer, &me)?;
            let pending = load(tx, transfer)?.filter(|m| m.from_host == me && m.handed_over_at.is_none());
            let Some(m) = pending else {
                return Err(Error::invalid(
                    "transfer",
                    format!("no move of {transfer} is pending from {me}"),
                ));
            };
            let ep = endpoint::load(tx, endpoint_id).map_err(Error::from)?;
            if ep.state != EndpointState::Attached || ep.generation != generation {
                return Err(Error::invalid(
                    "endpoint",
                    format!("{endpoint_id} at generation {generation} is not the agent's attached endpoint"),
                ));
            }
            if let Some(why) = not_live(tx, &m.to_host, now)? {
                tx.prepare_cached("DELETE FROM agent_moves WHERE transfer_id = ?1")?
                    .execute([transfer])?;
                return Ok(Err(Error::MoveTargetNotLive {
                    transfer: transfer.to_owned(),
                    host: m.to_host,
                    why,
                }));
            }
            attachment::retire(tx, endpoint_id, EndpointState::Detached, now).map_err(Error::from)?;
            tx.prepare_cached("UPDATE transfers SET host_id = ?2, updated_at = ?3 WHERE id = ?1")?
                .execute((transfer, &m.to_host, now.as_micros()))?;
            tx.prepare_cached("UPDATE agent_moves SET handed_over_at = ?2 WHERE transfer_id = ?1")?
                .execute((transfer, now.as_micros()))?;
            load(tx, transfer)?
                .ok_or_else(|| Error::corrupt("agent_moves", "the move vanished in its own transaction"))
                .map(Ok)
        })?
    }
}

/// Why host `id` cannot receive an agent at `now` (it is not `live` with an unexpired lease),
/// or `None` when it can.
fn not_live(tx: &Tx<'_>, id: &str, now: Timestamp) -> Result<Option<String>> {
    let row: Option<(String, i64)> = tx
        .prepare_cached("SELECT state, lease_expires_at FROM hosts WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(match row {
        None => Some("no such host".into()),
        Some((state, _)) if state != "live" => Some(format!("it is {state}")),
        Some((_, until)) if until <= now.as_micros() => {
            Some(format!("its lease ran out at {}", Timestamp::from_micros(until)))
        }
        Some(_) => None,
    })
}

#[cfg(test)]
mod tests;
