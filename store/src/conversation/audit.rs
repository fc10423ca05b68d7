//! The conversation domain's audit log (`communication_events`).
//!
//! Every change of the domain appends one event in its own transaction, so the log and the state
//! never disagree: agents created and updated, endpoints attached, detached, replaced and
//! expired (and revoked as wake carriers when their transfer became insolvent), conversations created and closed, messages posted (with their seq and how many
//! deliveries they queued), deliveries consumed, and each step of a wake (created, claimed,
//! released, dispatched, activated, delivery unknown, consumed). An event holds ids, seqs and
//! counts only — never a message body, an agent's description or specialty labels, an
//! idempotency key or a consume token — so the log can be shown to an operator as it is.

use std::fmt;
use std::str::FromStr;

use ahp_store_sql::{Row, Tx};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::bounds;
use super::error::{ConversationError as Error, ConversationResult as Result};
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
    /// Position in the log; later events have larger ids.
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
        "INSERT INTO communication_events (at, kind, agent_id, conversation_id, detail) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute((now.as_micros(), kind.as_str(), agent, conversation, detail.to_string()))?;
    Ok(())
}

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

impl Store {
    /// Operator-side: the conversation audit log after the exclusive cursor `after_id`, oldest
    /// first, at most `limit` — optionally only the events of one agent or one conversation.
    /// Not reachable from a tool: it spans every principal.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a limit outside 1..=[`MAX_PAGE_LIMIT`](bounds::MAX_PAGE_LIMIT);
    /// [`Error::CorruptRow`] for a row this build cannot read.
    pub fn communication_events(
        &mut self,
        after_id: i64,
        agent: Option<&str>,
        conversation: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditEvent>> {
        bounds::page_limit(limit)?;
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(
            "SELECT id, at, kind, agent_id, conversation_id, detail FROM communication_events
             WHERE id > ?1 AND (?2 IS NULL OR agent_id = ?2) AND (?3 IS NULL OR conversation_id = ?3)
             ORDER BY id LIMIT ?4",
        )?;
        let rows = stmt.query_map((after_id, agent, conversation, limit as i64), |r| Ok(from_row(r)))?;
        rows.map(|r| r?).collect()
    }
}
