//! Bootstrap: what an agent's already-running turn reads first, and explicit activation.
//!
//! [`Store::bootstrap`] returns, for the exact agent, endpoint and controller generation, a
//! bounded summary — the Agent Card, the endpoint, an optional selected conversation, how many
//! deliveries are queued and the inbox high-water mark, one wake's safe metadata, and the
//! reply-operation bound — and never a transcript, a message body, a claim fence or a principal.
//!
//! [`Store::activate_wake`] is the conversation protocol's explicit activation: a turn that is already running
//! (started by a person, not by a carrier) accepts one exact *pending* wake. It crosses the
//! dispatch fence at once through an `explicit_activation` attempt bound to the acting endpoint
//! and generation, and returns the consume token. It does not make the endpoint wake-capable
//! and requests no other turn. The activation key is the caller's idempotency key for it: the
//! store keeps only a hash of it, and derives the token from the key and the attempt's random
//! id, so an exact retry (same key, wake, endpoint and generation) recovers the same attempt
//! and the same token after a lost response, while reusing the key for anything else is a
//! conflict. The store never holds the token itself, only its hash.

use ahp_store_sql::{OptionalExtension, Tx};
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::admission;
use super::agent::{self, Agent};
use super::attempt::{self, ATTEMPT_COLUMNS, DispatchTicket, WakeAttempt, attempt_from_row, token_hash};
use super::audit::{self, AuditKind};
use super::bounds::MAX_WAKE_REPLY_OPERATIONS;
use super::conversation::{self, Acting, Conversation};
use super::endpoint::{AgentActor, Endpoint};
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::idempotency::{Mutation, validate_key};
use super::ids::{ATTEMPT_ID_PREFIX, CONSUME_TOKEN_PREFIX};
use super::principal::{Caller, CommunicationPrincipal};
use super::scope::Scope;
use super::state::WakeEvent;
use super::wake::{self, WAKE_COLUMNS, Wake, check_wake_id, load_for, load_wake, wake_from_row};
use crate::db::Store;
use crate::id::new_id;

/// What [`Store::bootstrap`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    /// The acting agent with its card.
    pub agent: Agent,
    /// The acting endpoint.
    pub endpoint: Endpoint,
    /// The selected conversation, if one was named (authorized as the agent).
    pub conversation: Option<Conversation>,
    /// Deliveries queued in the agent's inbox.
    pub queued_count: u64,
    /// The newest queued delivery's order (0 when none is queued).
    pub queued_high_water_order: u64,
    /// The named wake, or else the agent's open (pending or claimed) wake, if any.
    pub wake: Option<Wake>,
    /// Replies one dispatched wake may post under `wakeId` + `operationIndex`.
    pub max_reply_operations: u32,
}

fn activation_key_hash(principal: &CommunicationPrincipal, key: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"ahp:wake-activation-key:v1\0");
    h.update(principal.as_str().as_bytes());
    h.update(b"\0");
    h.update(key.as_bytes());
    hex::encode(h.finalize())
}

fn activation_token(attempt: &str, key: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"ahp:wake-activation-token:v1\0");
    h.update(attempt.as_bytes());
    h.update(b"\0");
    h.update(key.as_bytes());
    format!("{CONSUME_TOKEN_PREFIX}{}", hex::encode(h.finalize()))
}

/// The explicit-activation attempt recorded under `key_hash`, if any.
fn activation_by_key(tx: &Tx<'_>, key_hash: &str) -> Result<Option<WakeAttempt>> {
    let sql = format!("SELECT {ATTEMPT_COLUMNS} FROM wake_attempts WHERE activation_key_hash = ?1");
    tx.prepare_cached(&sql)?
        .query_row([key_hash], |r| Ok(attempt_from_row(r)))
        .optional()?
        .transpose()
}

impl Store {
    /// Explicitly activates the acting agent's pending `wake` for a turn that is already running.
    /// Returns the ticket with its consume token; an exact retry with the same
    /// `activation_key` returns the same attempt and token (`replayed`).
    ///
    /// # Errors
    ///
    /// [`Error::IdempotencyConflict`] when `activation_key` was used for another wake, endpoint or
    /// generation; [`Error::WakeNotFound`] for a wake not targeting the agent (or none);
    /// [`Error::InvalidWakeState`] unless the wake is pending; [`Error::LimitReached`] while
    /// another wake of the agent is dispatched and unresolved; the endpoint admission errors;
    /// [`Error::InvalidInput`] for a bad id or key; [`Error::MissingScope`].
    pub fn activate_wake(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        wake: &str,
        activation_key: &str,
    ) -> Result<Mutation<DispatchTicket>> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        check_wake_id(wake)?;
        validate_key(activation_key).map_err(|_| {
            Error::invalid(
                "activationIdempotencyKey",
                format!(
                    "must be 1 to {} printable ASCII characters",
                    super::bounds::MAX_IDEMPOTENCY_KEY_BYTES
                ),
            )
        })?;
        let key_hash = activation_key_hash(caller.principal(), activation_key);
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            let ep = admission::admit(&tx, caller, actor, now)?;
            if let Some(a) = activation_by_key(&tx, &key_hash)? {
                if a.wake_id != wake || a.endpoint_id != ep.id || a.generation != ep.generation {
                    return Err(Error::IdempotencyConflict {
                        operation: "activate_wake",
                    });
                }
                let token = activation_token(&a.id, activation_key);
                let w = load_for(&tx, &actor.agent, wake)?;
                return Ok(Mutation::replayed(DispatchTicket {
                    wake: w,
                    attempt: a,
                    consume_token: token,
                }));
            }
            let w = load_for(&tx, &actor.agent, wake)?;
            if w.state.after(WakeEvent::Activate).is_none() {
                return Err(Error::InvalidWakeState {
                    wake: w.id,
                    operation: "activate",
                    state: w.state,
                });
            }
            attempt::check_unresolved(&tx, &actor.agent, &ep.id)?;
            let id = new_id(ATTEMPT_ID_PREFIX);
            let token = activation_token(&id, activation_key);
            tx.prepare_cached(
                "INSERT INTO wake_attempts (id, wake_id, agent_id, endpoint_id, generation, state, claim_expires_at,
                                            consume_token_hash, claimed_at, dispatched_at, kind, activation_key_hash, seq)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'dispatched', ?6, ?7, ?6, ?6, 'explicit_activation', ?8,
                         (SELECT coalesce(max(seq), 0) + 1 FROM wake_attempts WHERE wake_id = ?2))",
            )?
            .execute((
                &id,
                &w.id,
                &actor.agent,
                &ep.id,
                ep.generation as i64,
                now.as_micros(),
                token_hash(&token),
                &key_hash,
            ))?;
            let changed = tx
                .prepare_cached(
                    "UPDATE wakes SET state = 'dispatched', dispatched_at = ?2, updated_at = ?2 WHERE id = ?1 AND state = 'pending'",
                )?
                .execute((&w.id, now.as_micros()))?;
            if changed != 1 {
                return Err(Error::corrupt("wakes", format!("{} moved under its own write transaction", w.id)));
            }
            audit::record(
                &tx,
                AuditKind::WakeActivated,
                Some(&actor.agent),
                None,
                json!({ "wakeId": w.id, "attemptId": id, "endpointId": ep.id, "controllerGeneration": ep.generation }),
                now,
            )?;
            let ticket = DispatchTicket {
                wake: load_wake(&tx, &w.id)?,
                attempt: attempt::load_attempt(&tx, &id)?,
                consume_token: token,
            };
            tx.commit()?;
            Ok(Mutation::changed(ticket))
        })
    }

    /// The bounded bootstrap summary for the exact acting agent, endpoint and generation,
    /// optionally selecting a conversation the agent participates in and one of its wakes.
    ///
    /// # Errors
    ///
    /// The endpoint admission errors; [`Error::ConversationNotFound`] / [`Error::WakeNotFound`]
    /// outside the agent's reach; [`Error::InvalidInput`] for a malformed id;
    /// [`Error::MissingScope`] without `communication:read`.
    pub fn bootstrap(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        conversation: Option<&str>,
        wake: Option<&str>,
    ) -> Result<Bootstrap> {
        caller.require(Scope::Read)?;
        actor.validate()?;
        if let Some(c) = conversation {
            conversation::check_id(c)?;
        }
        if let Some(w) = wake {
            check_wake_id(w)?;
        }
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            let ep = admission::admit(&tx, caller, actor, now)?;
            let agent = agent::load_owned(&tx, caller.principal(), &actor.agent)?;
            let conversation = match conversation {
                Some(c) => Some(conversation::summary(
                    &tx,
                    caller,
                    &Acting::Agent(actor.clone()),
                    c,
                    now,
                )?),
                None => None,
            };
            let (queued, high): (i64, Option<i64>) = tx
                .prepare_cached(
                    "SELECT count(*), max(delivery_order) FROM deliveries
                     WHERE recipient_agent_id = ?1 AND state <> 'consumed'",
                )?
                .query_row([&actor.agent], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let wake = match wake {
                Some(w) => Some(load_for(&tx, &actor.agent, w)?),
                None => {
                    let sql = format!(
                        "SELECT {WAKE_COLUMNS} FROM wakes WHERE agent_id = ?1 AND state NOT IN ('dispatched', 'consumed')
                         ORDER BY created_at DESC LIMIT 1"
                    );
                    tx.prepare_cached(&sql)?
                        .query_row([&actor.agent], |r| Ok(wake_from_row(r)))
                        .optional()?
                        .transpose()?
                }
            };
            Ok(Bootstrap {
                agent,
                endpoint: ep,
                conversation,
                queued_count: wake::nonneg("deliveries", &actor.agent, queued)?,
                queued_high_water_order: wake::nonneg("deliveries", &actor.agent, high.unwrap_or(0))?,
                wake,
                max_reply_operations: MAX_WAKE_REPLY_OPERATIONS,
            })
        })
    }
}
