//! Call tasks: an MCP task whose work is the host's own run of the tool ([`Awaited::Call`]).
//!
//! No message, agent task or activation stands for such work, so the run reports through the
//! task's row, and the client reads it there with `tasks/get`:
//!
//! - the run asks the client for input ([`ask_mcp_call_input`](crate::Store::ask_mcp_call_input)):
//!   the task reads `input_required` with the requests, by key;
//! - the client answers with `tasks/update`
//!   ([`answer_mcp_call_input`](crate::Store::answer_mcp_call_input)): each answer to a pending
//!   request moves it from the requests to the collected answers, an answer to anything else is
//!   ignored (as the extension says), and the answer to the last pending request sets the task
//!   `working` again; the run reads the answers from the row;
//! - the run ends it ([`end_mcp_call`](crate::Store::end_mcp_call): the tool's result, or the
//!   error it failed with), or the client cancels it
//!   ([`cancel_mcp_call`](crate::Store::cancel_mcp_call)) — whichever commits first, by a
//!   compare-and-set on the task not having ended, so a cancelled run's late result is dropped
//!   and a task ends once.
//!
//! Every JSON a row keeps is bounded ([`MAX_MCP_CALL_JSON_BYTES`], [`MAX_MCP_CALL_INPUT_REQUESTS`])
//! and checked before anything is written; a task is read and changed only by its owner.

use ahp_store_sql::{OptionalExtension, Tx};

use super::error::{ConversationError as Error, ConversationResult as Result};
use super::mcp_task::{Awaited, COLUMNS, JsonObject, McpTask, McpTaskStatus, check_id, create_in, from_row};
use super::principal::CommunicationPrincipal;
use crate::clock::Timestamp;

/// Most requests a call task has pending at once.
pub const MAX_MCP_CALL_INPUT_REQUESTS: usize = 16;
/// Longest key of a request, in bytes.
pub const MAX_MCP_CALL_INPUT_KEY_BYTES: usize = 64;
/// Largest JSON a call task keeps in one column (its requests, its collected answers, its
/// outcome), in bytes.
pub const MAX_MCP_CALL_JSON_BYTES: usize = 64 * 1024;

fn missing() -> Error {
    Error::invalid("taskId", "no such task")
}

fn bounded(field: &'static str, value: &JsonObject) -> Result<String> {
    let text = serde_json::to_string(value).map_err(|e| Error::invalid(field, e.to_string()))?;
    if text.len() > MAX_MCP_CALL_JSON_BYTES {
        return Err(Error::invalid(
            field,
            format!("{} bytes, more than {MAX_MCP_CALL_JSON_BYTES}", text.len()),
        ));
    }
    Ok(text)
}

/// `owner`'s unexpired call task `id`, read in `tx`.
fn load(tx: &Tx<'_>, owner: &CommunicationPrincipal, id: &str, now: Timestamp) -> Result<McpTask> {
    if !check_id(id) {
        return Err(missing());
    }
    tx.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM mcp_tasks
         WHERE id = ?1 AND owner_principal = ?2 AND awaits_kind = 'call' AND expires_at > ?3"
    ))?
    .query_row((id, owner.as_str(), now.as_micros()), from_row)
    .optional()?
    .transpose()?
    .ok_or_else(missing)
}

impl crate::Store {
    /// Creates `owner`'s task for the host's run of `tool` (before the run begins: the task
    /// exists once the client can be told of it).
    ///
    /// # Errors
    ///
    /// [`Error::LimitReached`] at the per-principal bound of unexpired tasks.
    pub fn create_mcp_call(&mut self, owner: &CommunicationPrincipal, tool: &str) -> Result<McpTask> {
        crate::db::Store::retrying(self, |s| {
            let (tx, now) = s.begin_immediate()?;
            let task = create_in(&tx, owner, tool, &Awaited::Call, now)?;
            tx.commit()?;
            Ok(task)
        })
    }

    /// The run of `owner`'s call task `id` asks the client for `requests` (by key; what each is
    /// — an `elicitation/create`, a `sampling/createMessage` — is the caller's): the task reads
    /// `input_required` and the answers of any earlier round are dropped. Returns the task.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`]: no request, more than [`MAX_MCP_CALL_INPUT_REQUESTS`], a key
    /// empty or longer than [`MAX_MCP_CALL_INPUT_KEY_BYTES`], requests larger than
    /// [`MAX_MCP_CALL_JSON_BYTES`], a task `owner` cannot read, or one that is not `working`.
    pub fn ask_mcp_call_input(
        &mut self,
        owner: &CommunicationPrincipal,
        id: &str,
        requests: &JsonObject,
    ) -> Result<McpTask> {
        if requests.is_empty() || requests.len() > MAX_MCP_CALL_INPUT_REQUESTS {
            return Err(Error::invalid(
                "inputRequests",
                format!(
                    "{} requests; between 1 and {MAX_MCP_CALL_INPUT_REQUESTS}",
                    requests.len()
                ),
            ));
        }
        if let Some(k) = requests
            .keys()
            .find(|k| k.is_empty() || k.len() > MAX_MCP_CALL_INPUT_KEY_BYTES)
        {
            return Err(Error::invalid(
                "inputRequests",
                format!("key {k:?}: 1 to {MAX_MCP_CALL_INPUT_KEY_BYTES} bytes"),
            ));
        }
        let text = bounded("inputRequests", requests)?;
        crate::db::Store::retrying(self, |s| {
            let (tx, now) = s.begin_immediate()?;
            let task = load(&tx, owner, id, now)?;
            if task.status != McpTaskStatus::Working {
                return Err(Error::invalid(
                    "taskId",
                    format!("the task is {}, not working", task.status.as_str()),
                ));
            }
            tx.prepare_cached(
                "UPDATE mcp_tasks SET status = 'input_required', input_requests = ?2, input_responses = NULL,
                     updated_at = ?3
                 WHERE id = ?1 AND status = 'working'",
            )?
            .execute((id, &text, now.as_micros()))?;
            let task = load(&tx, owner, id, now)?;
            tx.commit()?;
            Ok(task)
        })
    }

    /// The client's `tasks/update` of `owner`'s call task `id`: each of `responses` whose key is
    /// pending moves from the requests to the collected answers; the rest are ignored (so is
    /// every answer to a task that asks nothing). When none is left pending the task is
    /// `working` again. Returns the task as it now reads.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`]: a task `owner` cannot read, or answers that would make the
    /// collected ones larger than [`MAX_MCP_CALL_JSON_BYTES`] (nothing is then kept).
    pub fn answer_mcp_call_input(
        &mut self,
        owner: &CommunicationPrincipal,
        id: &str,
        responses: &JsonObject,
    ) -> Result<McpTask> {
        crate::db::Store::retrying(self, |s| {
            let (tx, now) = s.begin_immediate()?;
            let task = load(&tx, owner, id, now)?;
            let (Some(mut pending), McpTaskStatus::InputRequired) = (task.input_requests.clone(), task.status) else {
                return Ok(task);
            };
            let mut collected = task.input_responses.clone().unwrap_or_default();
            let mut answered = 0;
            for (key, answer) in responses {
                if pending.remove(key).is_some() {
                    collected.insert(key.clone(), answer.clone());
                    answered += 1;
                }
            }
            if answered == 0 {
                return Ok(task);
            }
            let collected = bounded("inputResponses", &collected)?;
            let (status, pending) = if pending.is_empty() {
                (McpTaskStatus::Working, None)
            } else {
                (McpTaskStatus::InputRequired, Some(bounded("inputRequests", &pending)?))
            };
            tx.prepare_cached(
                "UPDATE mcp_tasks SET status = ?2, input_requests = ?3, input_responses = ?4, updated_at = ?5
                 WHERE id = ?1 AND status = 'input_required'",
            )?
            .execute((id, status.as_str(), pending, &collected, now.as_micros()))?;
            let task = load(&tx, owner, id, now)?;
            tx.commit()?;
            Ok(task)
        })
    }

    /// The run of `owner`'s call task `id` ended with `outcome`: the tool's result (`status`
    /// [`McpTaskStatus::Completed`]) or the error it failed with ([`McpTaskStatus::Failed`]).
    /// Returns whether this ended it (`false`: it had already ended, e.g. cancelled).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`]: a status that does not end a run, an outcome larger than
    /// [`MAX_MCP_CALL_JSON_BYTES`], or a task `owner` cannot read.
    pub fn end_mcp_call(
        &mut self,
        owner: &CommunicationPrincipal,
        id: &str,
        status: McpTaskStatus,
        outcome: &JsonObject,
    ) -> Result<bool> {
        if !matches!(status, McpTaskStatus::Completed | McpTaskStatus::Failed) {
            return Err(Error::invalid("status", "a run ends completed or failed"));
        }
        let text = bounded("outcome", outcome)?;
        self.end_call(owner, id, status, Some(&text))
    }

    /// The client cancels `owner`'s call task `id`; its run's outcome, should it come, is
    /// dropped. Returns whether this ended it (`false`: it had already ended).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a task `owner` cannot read.
    pub fn cancel_mcp_call(&mut self, owner: &CommunicationPrincipal, id: &str) -> Result<bool> {
        self.end_call(owner, id, McpTaskStatus::Cancelled, None)
    }

    fn end_call(
        &mut self,
        owner: &CommunicationPrincipal,
        id: &str,
        status: McpTaskStatus,
        outcome: Option<&str>,
    ) -> Result<bool> {
        crate::db::Store::retrying(self, |s| {
            let (tx, now) = s.begin_immediate()?;
            load(&tx, owner, id, now)?;
            let n = tx
                .prepare_cached(
                    "UPDATE mcp_tasks SET status = ?2, outcome = ?3, input_requests = NULL, updated_at = ?4,
                         ended_at = ?4, ends = ends + 1
                     WHERE id = ?1 AND status IN ('working', 'input_required')",
                )?
                .execute((id, status.as_str(), outcome, now.as_micros()))?;
            tx.commit()?;
            Ok(n == 1)
        })
    }
}
