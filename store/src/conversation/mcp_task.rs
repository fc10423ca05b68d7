//! MCP tasks: what a `tools/call` is answered with when the client declared the tasks
//! extension (`io.modelcontextprotocol/tasks`) — a durable handle on work that ends later, which
//! the client polls with `tasks/get`.
//!
//! A task is a row created in the same transaction as the work it stands for (the question
//! `ask_agent` posts, the agent task `create_agent_task` creates, the activation `activate`
//! starts), so a task exists exactly when its work does, whatever crashes after. It is ended —
//! exactly once, by a compare-and-set on `working` — in the same transaction as the event that
//! ends the work: the agent's reply's commit (`answer_replies`, from `post_message`), the agent
//! task's terminal transition (`end_awaiting` from the task's `transition`), the activation's
//! end (`end_awaiting` from `end_activation`). Nothing polls, no timer runs: a task ended on
//! one host reads ended on every host of the cluster, and a host killed between the question
//! and the answer loses nothing (the answer's commit ends the task whoever makes it).
//!
//! A task may also stand for the host's own run of a tool ([`Awaited::Call`], the store side in
//! `mcp_call.rs`): no other row stands for that work, so the run reports through the task's row
//! — the input it asks the client for (`input_required`), the answers collected, its outcome.
//!
//! Each task belongs to the communication principal that created it: another principal's task
//! reads as missing. At most [`MAX_MCP_TASKS_PER_OWNER`] unexpired tasks per owner; each lives
//! [`MCP_TASK_TTL_MS`] from its creation (past it, it reads as missing and the reaper deletes
//! it). `ends` counts terminal writes, so the invariant check (`check.rs`) can prove none was
//! ended twice.

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::Serialize;

use super::error::{ConversationError as Error, ConversationResult as Result};
use super::principal::CommunicationPrincipal;
use crate::clock::Timestamp;
use crate::id::new_id;

/// Prefix of every MCP task id (96 random bits: unguessable, as the extension requires).
pub const MCP_TASK_ID_PREFIX: &str = "mtk_";
/// How long a task lives from its creation, in milliseconds (`ttlMs`): a day.
pub const MCP_TASK_TTL_MS: u64 = 24 * 60 * 60 * 1000;
/// How often a client should poll (`pollIntervalMs`).
pub const MCP_TASK_POLL_INTERVAL_MS: u64 = 1000;
/// Most unexpired tasks one principal holds.
pub const MAX_MCP_TASKS_PER_OWNER: u64 = 1000;
/// Longest status message kept, in bytes.
pub const MAX_MCP_TASK_MESSAGE_BYTES: usize = 1024;

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum McpTaskStatus {
    /// Its work has not ended.
    Working,
    /// Its work waits for the client's answers to the requests it made (a call task's).
    InputRequired,
    /// Its work ended with a result (which may itself report a failure of the work).
    Completed,
    /// Its work could not produce a result.
    Failed,
    /// Its work was cancelled.
    Cancelled,
}

impl McpTaskStatus {
    /// The status's wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Whether it never changes again.
    pub const fn is_terminal(self) -> bool {
        !matches!(self, Self::Working | Self::InputRequired)
    }

    fn parse(s: &str) -> Option<Self> {
        [
            Self::Working,
            Self::InputRequired,
            Self::Completed,
            Self::Failed,
            Self::Cancelled,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }
}

/// The work a task waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Awaited {
    /// An agent's reply to `question` (a human's message at `seq` of `conversation`).
    Reply {
        /// The conversation.
        conversation: String,
        /// The question's message id.
        question: String,
        /// The question's seq: only a later message answers it.
        seq: u64,
    },
    /// The agent task's terminal state.
    AgentTask {
        /// The agent task.
        task: String,
    },
    /// The end of the transfer's activation.
    Activation {
        /// The transfer.
        transfer: String,
    },
    /// The host's own run of the tool, which reports through the task (`mcp_call.rs`).
    Call,
}

impl Awaited {
    fn kind(&self) -> &'static str {
        match self {
            Self::Reply { .. } => "reply",
            Self::AgentTask { .. } => "agent_task",
            Self::Activation { .. } => "activation",
            Self::Call => "call",
        }
    }

    /// The awaited row's id; a call's is the task's own.
    fn id(&self) -> Option<&str> {
        match self {
            Self::Reply { question, .. } => Some(question),
            Self::AgentTask { task } => Some(task),
            Self::Activation { transfer } => Some(transfer),
            Self::Call => None,
        }
    }
}

/// A task, as its owner reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpTask {
    /// `mtk_…`.
    pub id: String,
    /// The tool whose call it answered.
    pub tool: String,
    /// The work it waits for.
    pub awaited: Awaited,
    /// Where it is.
    pub status: McpTaskStatus,
    /// What the server says about it (why a cancel was refused, why it failed).
    pub status_message: Option<String>,
    /// What ended it: the reply's message id, the agent task's or the transfer's id.
    pub answer: Option<String>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it stops being readable.
    pub expires_at: Timestamp,
    /// A call task's requests to the client not answered yet, by key (while `input_required`).
    pub input_requests: Option<JsonObject>,
    /// A call task's answers collected since it last asked, by key.
    pub input_responses: Option<JsonObject>,
    /// A call task's outcome once ended: the tool's result (`completed`) or the error
    /// (`failed`).
    pub outcome: Option<JsonObject>,
}

/// A JSON object, as a call task keeps its requests, answers and outcome.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

pub(super) const COLUMNS: &str = "id, tool, awaits_kind, awaits_id, conversation_id, asked_seq, status, \
                                  status_message, answer_id, created_at, updated_at, expires_at, input_requests, \
                                  input_responses, outcome";

pub(super) fn from_row(r: &Row) -> ahp_store_sql::SqlResult<Result<McpTask>> {
    let id: String = r.get(0)?;
    let (tool, kind, awaits, conversation, seq, status): (String, String, String, Option<String>, Option<i64>, String) =
        (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?);
    let (status_message, answer, created_at, updated_at, expires_at): (Option<String>, Option<String>, i64, i64, i64) =
        (r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?, r.get(11)?);
    let (requests, responses, outcome): (Option<String>, Option<String>, Option<String>) =
        (r.get(12)?, r.get(13)?, r.get(14)?);
    let corrupt = |why: String| Error::corrupt("mcp_tasks", format!("{id}: {why}"));
    let object = |column: &str, text: Option<String>| match text {
        None => Ok(None),
        Some(t) => serde_json::from_str::<JsonObject>(&t)
            .map(Some)
            .map_err(|e| corrupt(format!("{column}: {e}"))),
    };
    let (input_requests, input_responses, outcome) = match (
        object("input_requests", requests),
        object("input_responses", responses),
        object("outcome", outcome),
    ) {
        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return Ok(Err(e)),
    };
    let awaited = match (kind.as_str(), conversation, seq) {
        ("reply", Some(conversation), Some(seq)) => Awaited::Reply {
            conversation,
            question: awaits,
            seq: u64::try_from(seq).unwrap_or(0),
        },
        ("agent_task", _, _) => Awaited::AgentTask { task: awaits },
        ("activation", _, _) => Awaited::Activation { transfer: awaits },
        ("call", _, _) => Awaited::Call,
        (other, _, _) => return Ok(Err(corrupt(format!("awaits {other:?}")))),
    };
    let Some(status) = McpTaskStatus::parse(&status) else {
        return Ok(Err(corrupt(format!("status {status:?}"))));
    };
    Ok(Ok(McpTask {
        tool,
        awaited,
        status,
        status_message,
        answer,
        created_at: Timestamp::from_micros(created_at),
        updated_at: Timestamp::from_micros(updated_at),
        expires_at: Timestamp::from_micros(expires_at),
        input_requests,
        input_responses,
        outcome,
        id,
    }))
}

/// Creates the task of `owner`'s call of `tool`, waiting for `awaited`, in the transaction
/// that creates the work.
///
/// # Errors
///
/// [`Error::LimitReached`] at [`MAX_MCP_TASKS_PER_OWNER`] unexpired tasks of `owner`.
pub(crate) fn create_in(
    tx: &Tx<'_>,
    owner: &CommunicationPrincipal,
    tool: &str,
    awaited: &Awaited,
    now: Timestamp,
) -> Result<McpTask> {
    let live: i64 = tx
        .prepare_cached("SELECT count(*) FROM mcp_tasks WHERE owner_principal = ?1 AND expires_at > ?2")?
        .query_row((owner.as_str(), now.as_micros()), |r| r.get(0))?;
    if live as u64 >= MAX_MCP_TASKS_PER_OWNER {
        return Err(Error::LimitReached {
            what: "unexpired MCP tasks per principal",
            limit: MAX_MCP_TASKS_PER_OWNER,
        });
    }
    let id = new_id(MCP_TASK_ID_PREFIX);
    let expires = Timestamp::from_micros(now.as_micros() + (MCP_TASK_TTL_MS as i64) * 1000);
    let (conversation, seq) = match awaited {
        Awaited::Reply { conversation, seq, .. } => (Some(conversation.as_str()), Some(*seq as i64)),
        _ => (None, None),
    };
    tx.prepare_cached(
        "INSERT INTO mcp_tasks (id, owner_principal, tool, awaits_kind, awaits_id, conversation_id, asked_seq,
                                status, created_at, updated_at, expires_at, ends)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'working', ?8, ?8, ?9, 0)",
    )?
    .execute((
        &id,
        owner.as_str(),
        tool,
        awaited.kind(),
        awaited.id().unwrap_or(&id),
        conversation,
        seq,
        now.as_micros(),
        expires.as_micros(),
    ))?;
    Ok(McpTask {
        id,
        tool: tool.to_owned(),
        awaited: awaited.clone(),
        status: McpTaskStatus::Working,
        status_message: None,
        answer: None,
        created_at: now,
        updated_at: now,
        expires_at: expires,
        input_requests: None,
        input_responses: None,
        outcome: None,
    })
}

/// The task `owner` already created for `awaited`'s work, if any: what a replayed call answers.
///
/// # Errors
///
/// Only if the database fails or the row is corrupt.
pub(crate) fn created_for(tx: &Tx<'_>, owner: &CommunicationPrincipal, awaited: &Awaited) -> Result<Option<McpTask>> {
    tx.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM mcp_tasks WHERE owner_principal = ?1 AND awaits_kind = ?2 AND awaits_id = ?3"
    ))?
    .query_row((owner.as_str(), awaited.kind(), awaited.id()), from_row)
    .optional()?
    .transpose()
}

/// Ends, with `message` (an agent's message at `seq` of `conversation`, replying to
/// `reply_to`), every working task asked in that conversation before it that it answers: a
/// reply to the question, or a message replying to nothing. A message replying to another
/// message answers no other question. Returns how many it ended.
///
/// # Errors
///
/// Only if the database fails.
pub(crate) fn answer_replies(
    tx: &Tx<'_>,
    conversation: &str,
    seq: u64,
    message: &str,
    reply_to: Option<&str>,
    now: Timestamp,
) -> Result<usize> {
    let set = "SET status = 'completed', answer_id = ?3, updated_at = ?4, ended_at = ?4, ends = ends + 1";
    let n = match reply_to {
        None => tx
            .prepare_cached(&format!(
                "UPDATE mcp_tasks {set}
                 WHERE awaits_kind = 'reply' AND conversation_id = ?1 AND status = 'working' AND asked_seq < ?2"
            ))?
            .execute((conversation, seq as i64, message, now.as_micros()))?,
        Some(question) => tx
            .prepare_cached(&format!(
                "UPDATE mcp_tasks {set}
                 WHERE awaits_kind = 'reply' AND conversation_id = ?1 AND status = 'working' AND asked_seq < ?2
                   AND awaits_id = ?5"
            ))?
            .execute((conversation, seq as i64, message, now.as_micros(), question))?,
    };
    Ok(n)
}

/// Ends every working task waiting for `awaited` (an agent task or an activation) with
/// `status`, answered by the awaited work itself and saying `message`. Returns how many.
///
/// # Errors
///
/// Only if the database fails.
pub(crate) fn end_awaiting(
    tx: &Tx<'_>,
    awaited: &Awaited,
    status: McpTaskStatus,
    message: Option<&str>,
    now: Timestamp,
) -> Result<usize> {
    debug_assert!(status.is_terminal());
    let message = message.map(|m| truncate(m, MAX_MCP_TASK_MESSAGE_BYTES));
    Ok(tx
        .prepare_cached(
            "UPDATE mcp_tasks SET status = ?3, status_message = COALESCE(?4, status_message), answer_id = ?2,
                 updated_at = ?5, ended_at = ?5, ends = ends + 1
             WHERE awaits_kind = ?1 AND awaits_id = ?2 AND status = 'working'",
        )?
        .execute((awaited.kind(), awaited.id(), status.as_str(), message, now.as_micros()))?)
}

pub(super) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

pub(super) fn check_id(id: &str) -> bool {
    crate::id::is_well_formed(id, MCP_TASK_ID_PREFIX)
}

impl crate::Store {
    /// `owner`'s task `id`, unexpired; `None` for a malformed, unknown, expired or another
    /// principal's id (the same answer: a task's existence is not revealed).
    ///
    /// # Errors
    ///
    /// Only if the database fails or the row is corrupt.
    pub fn mcp_task(&mut self, owner: &CommunicationPrincipal, id: &str) -> Result<Option<McpTask>> {
        if !check_id(id) {
            return Ok(None);
        }
        let (tx, now) = self.begin_read()?;
        tx.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM mcp_tasks WHERE id = ?1 AND owner_principal = ?2 AND expires_at > ?3"
        ))?
        .query_row((id, owner.as_str(), now.as_micros()), from_row)
        .optional()?
        .transpose()
    }

    /// Says `message` on `owner`'s working task `id` (e.g. why a cancel was refused); a
    /// terminal task keeps what it said. Returns the task as it now reads.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (field `taskId`) for a task `owner` cannot read.
    pub fn note_mcp_task(&mut self, owner: &CommunicationPrincipal, id: &str, message: &str) -> Result<McpTask> {
        let message = truncate(message, MAX_MCP_TASK_MESSAGE_BYTES).to_owned();
        let missing = || Error::invalid("taskId", "no such task");
        if !check_id(id) {
            return Err(missing());
        }
        crate::db::Store::retrying(self, |s| {
            let (tx, now) = s.begin_immediate()?;
            tx.prepare_cached(
                "UPDATE mcp_tasks SET status_message = ?3, updated_at = ?4
                 WHERE id = ?1 AND owner_principal = ?2 AND status IN ('working', 'input_required')
                   AND expires_at > ?4",
            )?
            .execute((id, owner.as_str(), &message, now.as_micros()))?;
            let task = tx
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM mcp_tasks WHERE id = ?1 AND owner_principal = ?2 AND expires_at > ?3"
                ))?
                .query_row((id, owner.as_str(), now.as_micros()), from_row)
                .optional()?
                .transpose()?
                .ok_or_else(missing)?;
            tx.commit()?;
            Ok(task)
        })
    }

    /// Deletes the tasks whose time ran out (the reaper's sweep); returns how many.
    ///
    /// # Errors
    ///
    /// Only if the database fails.
    pub fn reap_mcp_tasks(&mut self) -> Result<usize> {
        crate::db::Store::retrying(self, |s| {
            let (tx, now) = s.begin_immediate()?;
            let n = tx
                .prepare_cached("DELETE FROM mcp_tasks WHERE expires_at <= ?1")?
                .execute([now.as_micros()])?;
            tx.commit()?;
            Ok(n)
        })
    }
}
