//! Deliveries: the agent inbox.
//!
//! Every message creates one delivery per recipient agent — even for an agent with no endpoint;
//! a later endpoint reads and consumes it. A delivery has its place in its recipient's inbox,
//! `delivery_order` (the inbox cursor), and is `queued` until the agent consumes it.
//!
//! **The cursor cannot skip.** `delivery_order` counts the recipient's deliveries (1, 2, …),
//! assigned as the inbox's maximum + 1 inside the posting transaction (migration 0013), not
//! taken from a sequence. Two posts to one agent read the same maximum, so they cannot both
//! commit — SQLite has one writer; on PostgreSQL one serializable transaction fails with
//! `40001` and the write path runs it again, after the other committed — and so order `n + 1`
//! is only ever handed out after order `n` committed. A reader that has seen order `n` will
//! never later find a delivery below it. (A PostgreSQL sequence, as the table had before, hands
//! values out in the order transactions ask for them: a post that took order 5 could commit
//! after a reader had paged past a 6 that committed first, and that reader never saw 5.) Consume is desired-state
//! idempotent and resolves only inside the acting agent's own inbox. Consuming a delivery never
//! consumes a wake, and consuming a wake never consumes a delivery.

use std::fmt;
use std::str::FromStr;

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::admission;
use super::audit::{self, AuditKind};
use super::bounds;
use super::endpoint::AgentActor;
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::idempotency::Mutation;
use super::message::{self, MESSAGE_COLUMNS, TranscriptMessage};
use super::principal::{Caller, CommunicationPrincipal};
use super::scope::Scope;
use crate::clock::Timestamp;
use crate::db::Store;

/// Whether the recipient has processed a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Waiting in the inbox.
    Queued,
    /// The agent said it processed it.
    Consumed,
}

impl DeliveryState {
    /// Every state.
    pub const ALL: [DeliveryState; 2] = [Self::Queued, Self::Consumed];

    /// The stored and serialized name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Consumed => "consumed",
        }
    }
}

impl fmt::Display for DeliveryState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DeliveryState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown delivery state {s:?}"))
    }
}

/// One inbox entry: a message, as delivered to one agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// The inbox cursor: this delivery's place in its recipient's inbox (1, 2, …), strictly
    /// increasing in the order the deliveries were committed. Orders of different recipients
    /// are unrelated.
    pub delivery_order: u64,
    /// The recipient.
    pub recipient_agent_id: String,
    /// Queued or consumed.
    pub state: DeliveryState,
    /// When it was queued.
    pub created_at: Timestamp,
    /// When it was consumed.
    pub consumed_at: Option<Timestamp>,
    /// How many turns read it while it was queued and ended with it still queued: the
    /// agent's failed tries at answering it (counted by [`Store::finish_turn_spending`]).
    pub tries: u32,
    /// The message.
    pub message: TranscriptMessage,
}

const DELIVERY_COLUMNS: &str = "d.delivery_order, d.recipient_agent_id, d.state, d.created_at, d.consumed_at, d.tries";

fn from_row(r: &Row) -> Result<Delivery> {
    let order: i64 = r.get(0)?;
    let state: String = r.get(2)?;
    let state = state
        .parse()
        .map_err(|e| Error::corrupt("deliveries", format!("delivery {order}: {e}")))?;
    Ok(Delivery {
        delivery_order: u64::try_from(order).map_err(|_| Error::corrupt("deliveries", "negative order"))?,
        recipient_agent_id: r.get(1)?,
        state,
        created_at: Timestamp::from_micros(r.get(3)?),
        consumed_at: r.get::<_, Option<i64>>(4)?.map(Timestamp::from_micros),
        tries: u32::try_from(r.get::<_, i64>(5)?)
            .map_err(|_| Error::corrupt("deliveries", format!("delivery {order}: tries")))?,
        message: message::from_row_at(r, 6)?,
    })
}

/// Queues `message` for `recipient` at the end of its inbox; returns its delivery order (see
/// the module docs for why it is the inbox's maximum + 1, and why that cannot skip).
pub(crate) fn queue(tx: &Tx<'_>, message: &str, recipient: &str, now: Timestamp) -> Result<u64> {
    let order: i64 = tx
        .prepare_cached(
            "INSERT INTO deliveries (message_id, recipient_agent_id, delivery_order, state, created_at)
             VALUES (?1, ?2, (SELECT coalesce(max(delivery_order), 0) + 1 FROM deliveries WHERE recipient_agent_id = ?2),
                     'queued', ?3)
             RETURNING delivery_order",
        )?
        .query_row((message, recipient, now.as_micros()), |r| r.get(0))?;
    u64::try_from(order).map_err(|_| Error::corrupt("deliveries", format!("delivery order {order}")))
}

fn load(conn: &Tx<'_>, agent: &str, message: &str) -> Result<Delivery> {
    let sql = format!(
        "SELECT {DELIVERY_COLUMNS}, {MESSAGE_COLUMNS} FROM deliveries d JOIN messages m ON m.id = d.message_id
         WHERE d.recipient_agent_id = ?1 AND d.message_id = ?2"
    );
    conn.prepare_cached(&sql)?
        .query_row((agent, message), |r| Ok(from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::MessageNotFound(message.to_owned())))
}

impl Store {
    /// The acting agent's inbox after the exclusive cursor `after_order`, in delivery order
    /// (the order the deliveries were committed), at most `limit`; with `queued_only`, consumed
    /// deliveries are skipped. Reading consumes nothing. Passing the last order read as the next
    /// `after_order` tails the inbox without ever missing a delivery (see the module docs).
    /// A delivery in a state this build does not know is never skipped: it fails the read.
    ///
    /// # Errors
    ///
    /// The endpoint admission errors; [`Error::InvalidInput`] for a bad limit;
    /// [`Error::MissingScope`] without `communication:read`.
    pub fn read_inbox(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        after_order: u64,
        limit: usize,
        queued_only: bool,
    ) -> Result<Vec<Delivery>> {
        caller.require(Scope::Read)?;
        actor.validate()?;
        bounds::page_limit(limit)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            admission::admit(&tx, caller, actor, now)?;
            let sql = format!(
                "SELECT {DELIVERY_COLUMNS}, {MESSAGE_COLUMNS} FROM deliveries d JOIN messages m ON m.id = d.message_id
                 WHERE d.recipient_agent_id = ?1 AND d.delivery_order > ?2 AND (?3 = 0 OR d.state <> 'consumed')
                 ORDER BY d.delivery_order LIMIT ?4"
            );
            let mut stmt = tx.prepare_cached(&sql)?;
            let rows = stmt.query_map(
                (
                    &actor.agent,
                    i64::try_from(after_order).unwrap_or(i64::MAX),
                    queued_only,
                    limit as i64,
                ),
                |r| Ok(from_row(r)),
            )?;
            rows.map(|r| r?).collect()
        })
    }

    /// Marks the acting agent's delivery of `message` consumed. Desired-state idempotent: an
    /// already consumed delivery is returned with `state_changed = false`. Never touches a wake.
    ///
    /// A no-op — a delivery already consumed, a message not delivered to this agent, a refused
    /// endpoint — is answered from a read transaction and never takes the database's write lock,
    /// so a guest consuming the same message in a loop costs reads, not writes. Only a queued
    /// delivery is consumed, in its own `BEGIN IMMEDIATE` transaction that checks again.
    ///
    /// # Errors
    ///
    /// [`Error::MessageNotFound`] if the message was not delivered to this agent (or does not
    /// exist); the endpoint admission errors; [`Error::MissingScope`].
    pub fn consume_delivery(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        message: &str,
    ) -> Result<Mutation<Delivery>> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        message::check_id(message)?;
        self.admitted(|s| {
            if let Some(consumed) = s.consumed_delivery(caller, actor, message)? {
                return Ok(Mutation::unchanged(consumed));
            }
            let (tx, now) = s.begin_immediate()?;
            admission::admit(&tx, caller, actor, now)?;
            let consumed = consume_in(&tx, actor, message, now)?;
            if consumed.state_changed {
                tx.commit()?;
            }
            Ok(consumed)
        })
    }

    /// Consumes each of `messages` in the acting agent's inbox, in one transaction: what a
    /// turn consumed, recorded at once (a host holds a turn's consumes until its end, or until
    /// the turn reads its inbox again). Each is as [`consume_delivery`](Self::consume_delivery)
    /// — already consumed is a no-op — and either all are recorded or none. Returns how many
    /// changed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for more than [`MAX_TURN_CONSUMES`](bounds::MAX_TURN_CONSUMES)
    /// ids or a malformed one; [`Error::MessageNotFound`] for a message not delivered to this
    /// agent (nothing is consumed); the endpoint admission errors; [`Error::MissingScope`].
    pub fn consume_deliveries(&mut self, caller: &Caller, actor: &AgentActor, messages: &[String]) -> Result<usize> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        check_consumes(messages)?;
        if messages.is_empty() {
            return Ok(0);
        }
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            admission::admit(&tx, caller, actor, now)?;
            let changed = consume_all_in(&tx, actor, messages, now)?;
            tx.commit()?;
            Ok(changed)
        })
    }

    /// The acting agent's delivery of `message`, from a read transaction: what a host checks
    /// before it holds a turn's consume for the turn's end ([`consume_deliveries`](Self::consume_deliveries)).
    ///
    /// # Errors
    ///
    /// [`Error::MessageNotFound`] if the message was not delivered to this agent (or does not
    /// exist); the endpoint admission errors; [`Error::InvalidInput`]; [`Error::MissingScope`].
    pub fn read_delivery(&mut self, caller: &Caller, actor: &AgentActor, message: &str) -> Result<Delivery> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        message::check_id(message)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            admission::admit(&tx, caller, actor, now)?;
            load(&tx, &actor.agent, message)
        })
    }

    /// The read half of [`consume_delivery`](Self::consume_delivery): admits the actor and
    /// loads its delivery in a read transaction; `Some` if it is already consumed (nothing to
    /// do), `None` if it is queued (the write transaction consumes it).
    fn consumed_delivery(&mut self, caller: &Caller, actor: &AgentActor, message: &str) -> Result<Option<Delivery>> {
        let (tx, now) = self.begin_read()?;
        admission::admit(&tx, caller, actor, now)?;
        let d = load(&tx, &actor.agent, message)?;
        Ok((d.state == DeliveryState::Consumed).then_some(d))
    }
}

impl Store {
    /// The queued deliveries of `agent`, an agent the caller owns, after the exclusive cursor
    /// `after_order`, oldest first, at most `limit`: what waits for it, each with its
    /// [`tries`](Delivery::tries) — how the owner finds a message the agent is stuck on.
    ///
    /// # Errors
    ///
    /// [`Error::AgentNotFound`] unless the caller owns `agent`; [`Error::InvalidInput`] for a
    /// malformed id or a limit outside 1..=[`MAX_PAGE_LIMIT`](bounds::MAX_PAGE_LIMIT);
    /// [`Error::MissingScope`] without `communication:read`.
    pub fn queued_deliveries(
        &mut self,
        caller: &Caller,
        agent: &str,
        after_order: u64,
        limit: usize,
    ) -> Result<Vec<Delivery>> {
        caller.require(Scope::Read)?;
        self.queued_deliveries_of(Some(caller.principal()), agent, after_order, limit)
    }

    /// [`queued_deliveries`](Self::queued_deliveries) of any agent, for the operator (the CLI):
    /// never reachable from a tool.
    ///
    /// # Errors
    ///
    /// [`Error::AgentNotFound`] for no such agent; [`Error::InvalidInput`] as there.
    pub fn operator_queued_deliveries(&mut self, agent: &str, after_order: u64, limit: usize) -> Result<Vec<Delivery>> {
        self.queued_deliveries_of(None, agent, after_order, limit)
    }

    /// The owner skips the queued delivery of `message` to `agent`, an agent the caller owns:
    /// it is consumed without an answer (audited `delivery_skipped`, naming who skipped it), so
    /// the agent's next turn goes on with the messages after it. Desired-state idempotent: a
    /// delivery already consumed is returned with `state_changed = false`.
    ///
    /// # Errors
    ///
    /// [`Error::AgentNotFound`] unless the caller owns `agent`; [`Error::MessageNotFound`] if
    /// the message was not delivered to it; [`Error::InvalidInput`] for a malformed id;
    /// [`Error::MissingScope`] without `communication:manage`.
    pub fn skip_delivery(&mut self, caller: &Caller, agent: &str, message: &str) -> Result<Mutation<Delivery>> {
        caller.require(Scope::Manage)?;
        self.skip_delivery_of(Some(caller.principal()), agent, message)
    }

    /// [`skip_delivery`](Self::skip_delivery) of any agent's delivery, for the operator (the
    /// CLI): never reachable from a tool.
    ///
    /// # Errors
    ///
    /// [`Error::AgentNotFound`] for no such agent; as [`skip_delivery`](Self::skip_delivery).
    pub fn operator_skip_delivery(&mut self, agent: &str, message: &str) -> Result<Mutation<Delivery>> {
        self.skip_delivery_of(None, agent, message)
    }

    /// The queued deliveries of `agent`: owned by `owner`, or any agent's for the operator.
    fn queued_deliveries_of(
        &mut self,
        owner: Option<&CommunicationPrincipal>,
        agent: &str,
        after_order: u64,
        limit: usize,
    ) -> Result<Vec<Delivery>> {
        super::agent::check_id(agent)?;
        bounds::page_limit(limit)?;
        self.admitted(|s| {
            let (tx, _) = s.begin_read()?;
            load_agent(&tx, owner, agent)?;
            let sql = format!(
                "SELECT {DELIVERY_COLUMNS}, {MESSAGE_COLUMNS} FROM deliveries d JOIN messages m ON m.id = d.message_id
                 WHERE d.recipient_agent_id = ?1 AND d.delivery_order > ?2 AND d.state = 'queued'
                 ORDER BY d.delivery_order LIMIT ?3"
            );
            let mut stmt = tx.prepare_cached(&sql)?;
            let rows = stmt.query_map(
                (agent, i64::try_from(after_order).unwrap_or(i64::MAX), limit as i64),
                |r| Ok(from_row(r)),
            )?;
            rows.map(|r| r?).collect()
        })
    }

    /// Skips `agent`'s delivery of `message`: owned by `owner`, or any agent's for the operator.
    fn skip_delivery_of(
        &mut self,
        owner: Option<&CommunicationPrincipal>,
        agent: &str,
        message: &str,
    ) -> Result<Mutation<Delivery>> {
        super::agent::check_id(agent)?;
        message::check_id(message)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            load_agent(&tx, owner, agent)?;
            let d = load(&tx, agent, message)?;
            if d.state == DeliveryState::Consumed {
                return Ok(Mutation::unchanged(d));
            }
            tx.prepare_cached(
                "UPDATE deliveries SET state = 'consumed', consumed_at = ?3
                 WHERE recipient_agent_id = ?1 AND message_id = ?2 AND state = 'queued'",
            )?
            .execute((agent, message, now.as_micros()))?;
            let d = load(&tx, agent, message)?;
            audit::record(
                &tx,
                AuditKind::DeliverySkipped,
                Some(agent),
                Some(&d.message.conversation_id),
                json!({
                    "messageId": message,
                    "deliveryOrder": d.delivery_order,
                    "tries": d.tries,
                    "by": owner.map_or("operator", CommunicationPrincipal::as_str),
                }),
                now,
            )?;
            tx.commit()?;
            Ok(Mutation::changed(d))
        })
    }
}

/// Checks that `agent` exists and, for an `owner`, that it owns it: else [`Error::AgentNotFound`].
fn load_agent(tx: &Tx<'_>, owner: Option<&CommunicationPrincipal>, agent: &str) -> Result<()> {
    match owner {
        Some(owner) => super::agent::load_owned(tx, owner, agent).map(drop),
        None => {
            let found: Option<i64> = tx
                .prepare_cached("SELECT 1 FROM agents WHERE id = ?1")?
                .query_row([agent], |r| r.get(0))
                .optional()?;
            found.map(drop).ok_or_else(|| Error::AgentNotFound(agent.to_owned()))
        }
    }
}

/// Checks a list of messages to consume at once: at most
/// [`MAX_TURN_CONSUMES`](bounds::MAX_TURN_CONSUMES), each a well-formed message id.
pub(crate) fn check_consumes(messages: &[String]) -> Result<()> {
    if messages.len() > bounds::MAX_TURN_CONSUMES {
        return Err(Error::invalid(
            "consumes",
            format!("at most {} messages at once", bounds::MAX_TURN_CONSUMES),
        ));
    }
    messages.iter().try_for_each(|m| message::check_id(m))
}

/// Consumes the acting agent's delivery of `message` inside `tx` (admitted already): a queued
/// delivery becomes `consumed` and is audited; a consumed one is returned unchanged.
fn consume_in(tx: &Tx<'_>, actor: &AgentActor, message: &str, now: Timestamp) -> Result<Mutation<Delivery>> {
    let d = load(tx, &actor.agent, message)?;
    if d.state == DeliveryState::Consumed {
        return Ok(Mutation::unchanged(d));
    }
    tx.prepare_cached(
        "UPDATE deliveries SET state = 'consumed', consumed_at = ?3
         WHERE recipient_agent_id = ?1 AND message_id = ?2 AND state = 'queued'",
    )?
    .execute((&actor.agent, message, now.as_micros()))?;
    let d = load(tx, &actor.agent, message)?;
    audit::record(
        tx,
        AuditKind::DeliveryConsumed,
        Some(&actor.agent),
        Some(&d.message.conversation_id),
        json!({ "messageId": message, "deliveryOrder": d.delivery_order, "endpointId": actor.endpoint }),
        now,
    )?;
    Ok(Mutation::changed(d))
}

/// Consumes the acting agent's delivery of `message` inside `tx` if it has one still queued
/// (what an agent's reply to it does); a message not delivered to the agent, or already
/// consumed, is left as it is. Returns whether it consumed.
pub(crate) fn consume_if_queued(tx: &Tx<'_>, actor: &AgentActor, message: &str, now: Timestamp) -> Result<bool> {
    match consume_in(tx, actor, message, now) {
        Ok(consumed) => Ok(consumed.state_changed),
        Err(Error::MessageNotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Counts one more try for each of the acting agent's deliveries of `messages` still queued
/// (checked with [`check_consumes`]); a message not delivered to it, or consumed, is left.
pub(crate) fn count_tries_in(tx: &Tx<'_>, actor: &AgentActor, messages: &[String]) -> Result<()> {
    let mut stmt = tx.prepare_cached(
        "UPDATE deliveries SET tries = tries + 1
         WHERE recipient_agent_id = ?1 AND message_id = ?2 AND state = 'queued'",
    )?;
    for m in messages {
        stmt.execute((&actor.agent, m))?;
    }
    Ok(())
}

/// [`consume_in`] for each of `messages` (checked with [`check_consumes`]); returns how many
/// changed.
pub(crate) fn consume_all_in(tx: &Tx<'_>, actor: &AgentActor, messages: &[String], now: Timestamp) -> Result<usize> {
    let mut changed = 0;
    for m in messages {
        changed += usize::from(consume_in(tx, actor, m, now)?.state_changed);
    }
    Ok(changed)
}
