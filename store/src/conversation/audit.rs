//! The conversation domain's audit log (`communication_events`).
//!
//! Every change of the domain appends one event in its own transaction, so the log and the state
//! never disagree: agents created and updated, endpoints attached, detached, replaced and
//! expired (and revoked as wake carriers when their transfer became insolvent), conversations created and closed, messages posted (with their seq and how many
//! deliveries they queued), deliveries consumed, and each step of a wake (created, claimed,
//! released, dispatched, activated, delivery unknown, consumed). An event holds ids, seqs and
//! counts only — never a message body, an agent's description or specialty labels, an
//! idempotency key or a consume token — so the log can be shown to an operator as it is.
//!
//! **Order.** Each event holds its place among its agent's events (`agent_seq`) and among its
//! conversation's (`conversation_seq`), each assigned as that stream's maximum + 1 inside the
//! writing transaction (migration 0013). Two transactions appending to one stream read the same
//! maximum, so they cannot both commit (SQLite has one writer; on PostgreSQL one serializable
//! transaction fails with `40001` and runs again after the other committed): a stream's order
//! is its commit order, and a reader tailing one agent's or one conversation's events never
//! misses one that committed late. The whole log has no such counter — one would make every
//! write of the domain wait for every other — so its unfiltered listing is in the order of the
//! event ids, which on PostgreSQL (an identity) is the order the writers took them: a page
//! boundary there can pass an event that commits a moment later. Tail an agent or a
//! conversation to follow the log.

use std::fmt;
use std::str::FromStr;

use ahp_store_sql::Tx;
#[cfg(any(test, feature = "testing"))]
use ahp_store_sql::{OptionalExtension, Row};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(any(test, feature = "testing"))]
use super::bounds;
#[cfg(any(test, feature = "testing"))]
use super::error::ConversationError as Error;
use super::error::ConversationResult as Result;
use crate::clock::Timestamp;
use crate::db::Store;

closed_enum!(
    /// What happened in the conversation domain.
    AuditKind, "communication event kind", {
        /// An agent was created.
        AgentCreated = "agent_created",
        /// An agent's card changed (the detail has its new profile revision).
        AgentUpdated = "agent_updated",
        /// An endpoint was attached with the agent's next controller generation.
        EndpointAttached = "endpoint_attached",
        /// An endpoint was detached by its principal.
        EndpointDetached = "endpoint_detached",
        /// An endpoint was replaced by a newer one.
        EndpointReplaced = "endpoint_replaced",
        /// An endpoint's lease ran out and the expiry was recorded.
        EndpointExpired = "endpoint_expired",
        /// An endpoint stopped being wake-capable because its agent's transfer became
        /// `insolvent`: the agent gets no more turns, but stays attached and readable.
        EndpointWakeRevoked = "endpoint_wake_revoked",
        /// An MCP App View bound the endpoint (the detail says whether it took over from an
        /// earlier View of its window); never the View's fence or window.
        AppViewBound = "app_view_bound",
        /// The MCP App View that held the endpoint let it go.
        AppViewUnbound = "app_view_unbound",
        /// An App-carried endpoint that expired was replaced by its successor, one generation on.
        AppEndpointReplaced = "app_endpoint_replaced",
        /// A conversation was created.
        ConversationCreated = "conversation_created",
        /// A conversation was closed.
        ConversationClosed = "conversation_closed",
        /// An agent joined a conversation after it was created.
        ParticipantAdded = "participant_added",
        /// A message was posted (ids, seq and the number of deliveries; never its body).
        MessagePosted = "message_posted",
        /// A delivery was consumed by its recipient.
        DeliveryConsumed = "delivery_consumed",
        /// The agent's owner skipped a queued delivery (a message the agent could not answer):
        /// consumed without an answer.
        DeliverySkipped = "delivery_skipped",
        /// A wake intent was created for an agent.
        WakeCreated = "wake_created",
        /// A carrier claimed a wake.
        WakeClaimed = "wake_claimed",
        /// A claim was given up before the dispatch fence; the wake is pending again.
        WakeReleased = "wake_released",
        /// A wake crossed the dispatch fence through a carrier.
        WakeDispatched = "wake_dispatched",
        /// A running turn accepted a pending wake through bootstrap's explicit activation.
        WakeActivated = "wake_activated",
        /// After the fence, the outcome could not be confirmed.
        WakeDeliveryUnknown = "wake_delivery_unknown",
        /// The agent consumed a wake.
        WakeConsumed = "wake_consumed",
        /// An agent task was created (ids only; never its title, instructions or result).
        TaskCreated = "agent_task_created",
        /// A task attempt started, fenced to the assignee's endpoint and generation.
        TaskAttemptStarted = "agent_task_attempt_started",
        /// A task attempt ended: succeeded, failed, cancelled, revoked or delivery unknown.
        TaskAttemptEnded = "agent_task_attempt_ended",
        /// An agent task was cancelled.
        TaskCancelled = "agent_task_cancelled",
        /// An agent wait was registered.
        WaitRegistered = "agent_wait_registered",
        /// An agent wait fired its one wake.
        WaitTriggered = "agent_wait_triggered",
        /// An agent wait was cancelled.
        WaitCancelled = "agent_wait_cancelled",
        /// A goal was created, checkpointed, completed or abandoned (the detail says which).
        GoalChanged = "goal_changed",
        /// An `agent_task_terminal` attention event was recorded.
        AttentionRecorded = "attention_recorded",
    }
);

/// One entry of the conversation audit log.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// The event's id: the cursor a read of the log takes. Ids follow the order
    /// of writing; one agent's or one conversation's events are listed in commit order (see
    /// the module docs).
    pub id: i64,
    /// When it happened.
    pub at: Timestamp,
    /// What happened.
    pub kind: AuditKind,
    /// The agent it concerns, if any.
    pub agent_id: Option<String>,
    /// The conversation it concerns, if any.
    pub conversation_id: Option<String>,
    /// Ids, seqs and counts; never content, keys or tokens.
    pub detail: Value,
}

/// Appends an event in `tx`.
pub(crate) fn record(
    tx: &Tx<'_>,
    kind: AuditKind,
    agent: Option<&str>,
    conversation: Option<&str>,
    detail: Value,
    now: Timestamp,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO communication_events (at, kind, agent_id, conversation_id, detail, agent_seq, conversation_seq)
         VALUES (?1, ?2, ?3, ?4, ?5,
                 CASE WHEN ?3 IS NULL THEN NULL
                      ELSE (SELECT coalesce(max(agent_seq), 0) + 1 FROM communication_events WHERE agent_id = ?3) END,
                 CASE WHEN ?4 IS NULL THEN NULL
                      ELSE (SELECT coalesce(max(conversation_seq), 0) + 1 FROM communication_events WHERE conversation_id = ?4) END)",
    )?
    .execute((now.as_micros(), kind.as_str(), agent, conversation, detail.to_string()))?;
    Ok(())
}

#[cfg(any(test, feature = "testing"))]
fn from_row(r: &Row) -> Result<AuditEvent> {
    let id: i64 = r.get(0)?;
    let kind: String = r.get(2)?;
    let detail: String = r.get(5)?;
    Ok(AuditEvent {
        id,
        at: Timestamp::from_micros(r.get(1)?),
        kind: kind
            .parse()
            .map_err(|e| Error::corrupt("communication_events", format!("{id}: {e}")))?,
        agent_id: r.get(3)?,
        conversation_id: r.get(4)?,
        detail: serde_json::from_str(&detail)
            .map_err(|e| Error::corrupt("communication_events", format!("{id}: detail: {e}")))?,
    })
}

#[cfg(any(test, feature = "testing"))]
/// Which stream of the log a read follows, and so which counter orders it.
#[derive(Clone, Copy)]
enum Stream {
    /// One agent's events (optionally only those of one conversation), by `agent_seq`.
    Agent,
    /// One conversation's events, by `conversation_seq`.
    Conversation,
    /// Every event, by `id`.
    Whole,
}

#[cfg(any(test, feature = "testing"))]
impl Stream {
    fn of(agent: Option<&str>, conversation: Option<&str>) -> Self {
        match (agent, conversation) {
            (Some(_), _) => Self::Agent,
            (None, Some(_)) => Self::Conversation,
            (None, None) => Self::Whole,
        }
    }

    /// The column that orders the stream.
    fn order(self) -> &'static str {
        match self {
            Self::Agent => "agent_seq",
            Self::Conversation => "conversation_seq",
            Self::Whole => "id",
        }
    }
}

impl Store {
    /// Operator-side: the conversation audit log after the exclusive cursor `after_id` (the id
    /// of the last event read, 0 for the start), at most `limit` — optionally only the events
    /// of one agent or one conversation. Not reachable from a tool: it spans every principal.
    ///
    /// One agent's events are in the order they were committed (their `agent_seq`), and so
    /// are one conversation's (`conversation_seq`): passing the last id read as the next
    /// `after_id` tails such a stream without ever missing an event. The unfiltered log is in
    /// the order of the ids, which on PostgreSQL need not be commit order (see the module
    /// docs).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a limit outside 1..=[`MAX_PAGE_LIMIT`](bounds::MAX_PAGE_LIMIT),
    /// or (field `after_id`) for a cursor that is not an event of the agent or conversation
    /// read; [`Error::CorruptRow`] for a row this build cannot read.
    #[cfg(any(test, feature = "testing"))]
    pub fn communication_events(
        &mut self,
        after_id: i64,
        agent: Option<&str>,
        conversation: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditEvent>> {
        bounds::page_limit(limit)?;
        let stream = Stream::of(agent, conversation);
        let order = stream.order();
        let (tx, _) = self.begin_read()?;
        // The cursor's place in the stream: the event `after_id` itself, which must be in it.
        let after = match stream {
            Stream::Whole => after_id,
            _ if after_id == 0 => 0,
            _ => tx
                .prepare_cached(&format!(
                    "SELECT {order} FROM communication_events
                     WHERE id = ?1 AND (?2 IS NULL OR agent_id = ?2) AND (?3 IS NULL OR conversation_id = ?3)"
                ))?
                .query_row((after_id, agent, conversation), |r| r.get::<_, Option<i64>>(0))
                .optional()?
                .flatten()
                .ok_or_else(|| Error::invalid("after_id", "is not an event of the agent or conversation read"))?,
        };
        let sql = format!(
            "SELECT id, at, kind, agent_id, conversation_id, detail FROM communication_events
             WHERE {order} > ?1 AND (?2 IS NULL OR agent_id = ?2) AND (?3 IS NULL OR conversation_id = ?3)
             ORDER BY {order} LIMIT ?4"
        );
        let mut stmt = tx.prepare_cached(&sql)?;
        let rows = stmt.query_map((after, agent, conversation, limit as i64), |r| Ok(from_row(r)))?;
        rows.map(|r| r?).collect()
    }
}
