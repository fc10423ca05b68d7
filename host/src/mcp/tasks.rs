//! The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on both surfaces: which
//! calls are answered with a task, and `tasks/get`, `tasks/cancel`, `tasks/update`.
//!
//! A call of `activate` (`/mcp`), `ask_agent` or `create_agent_task` (`/mcp/conversations`)
//! is answered with a task when its request declares the extension and speaks the 2026-07-28
//! protocol or later (the extension is not defined for 2025-11-25, so such a session gets the
//! synchronous answer, as does a client that did not declare it). The task is the store's
//! ([`ahp_store::conversation::mcp_task`]): created in the commit of its work, ended in the
//! commit that ends the work, readable from any host of the cluster, owned by the caller's
//! principal (another principal's task, and a task of the other surface, reads as missing:
//! `-32602`). rmcp answers `tasks/*` from a request that did not declare the extension with
//! `-32021` before these run, and checks the `Mcp-Name` header against `taskId`.
//!
//! - `tasks/get` returns the task with, once completed, the result the tool would have
//!   returned synchronously (built from the store when asked, so every host answers alike).
//! - `tasks/cancel` cancels what can be cancelled — an agent task no attempt has started — and
//!   otherwise says why not in the task's `statusMessage` (a question cannot be withdrawn; an
//!   activation, once begun, runs to its end); it always acknowledges, as the extension requires.
//! - `tasks/update` acknowledges: ahp's tools never ask for input, so every response answers
//!   a request never made and is ignored, as the extension says. A call task (the host's own
//!   run of a tool, [`ahp_store::conversation::mcp_call`]: only the conformance suite's fixture
//!   tools make them) takes each answer to a request it made; its `tasks/get` reports the
//!   requests while it waits (`input_required`) and the outcome its run recorded.
//!
//! No task notifications are sent (rmcp 3.11 cannot route `notifications/tasks`); clients
//! poll at `pollIntervalMs`.

use std::sync::Arc;

use ahp_store::conversation::Acting;
use ahp_store::conversation::mcp_task::{Awaited, MCP_TASK_POLL_INTERVAL_MS, MCP_TASK_TTL_MS, McpTask, McpTaskStatus};
use ahp_store::{EventKind, EventPage, Store, TransferOwner, TransferStatus};
use rmcp::ErrorData as McpError;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::handler::server::wrapper::Json;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult, DetailedTask, GetTaskResult, InputResponses,
    JsonObject, Task, TaskPayload, TaskStatus,
};
use rmcp::service::{RequestContext, RoleServer};

use super::changed::Changed;
use super::conversation_schema::AskAgentResult;
use super::delegation_schema::TaskResult;
use super::identity::Asker;
use super::schema::TransferResult;
use crate::carrier::Carriers;
use crate::shared_store::{SharedStore, StoreLock};

/// The first protocol revision the extension is defined for.
pub const TASKS_SINCE: &str = "2026-07-28";

/// Which surface serves a task: each serves the tasks of its own tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// `/mcp`: `activate`.
    Transfers,
    /// `/mcp/conversations`: `ask_agent`, `create_agent_task`.
    Conversations,
}

impl Surface {
    fn serves(self, task: &McpTask) -> bool {
        match (self, &task.awaited) {
            // The fixture tools that make call tasks are on both surfaces.
            (_, Awaited::Call) => true,
            (Self::Transfers, a) => matches!(a, Awaited::Activation { .. }),
            (Self::Conversations, a) => !matches!(a, Awaited::Activation { .. }),
        }
    }
}

/// Whether this call is answered with a task: the request declares the extension and speaks
/// [`TASKS_SINCE`] or later.
pub fn answers_with_task(ctx: &RequestContext<RoleServer>) -> bool {
    let declared = ctx.client_capabilities().is_some_and(|c| c.supports_tasks());
    let modern = ctx.protocol_version().is_some_and(|v| v.as_str() >= TASKS_SINCE);
    declared && modern
}

/// The wire form of a stored task.
pub fn wire(task: &McpTask) -> Task {
    let status = match task.status {
        McpTaskStatus::Working => TaskStatus::Working,
        McpTaskStatus::InputRequired => TaskStatus::InputRequired,
        McpTaskStatus::Completed => TaskStatus::Completed,
        McpTaskStatus::Failed => TaskStatus::Failed,
        McpTaskStatus::Cancelled => TaskStatus::Cancelled,
    };
    let mut wire = Task::new(
        task.id.clone(),
        status,
        task.created_at.to_string(),
        task.updated_at.to_string(),
    )
    .with_ttl_ms(MCP_TASK_TTL_MS)
    .with_poll_interval_ms(MCP_TASK_POLL_INTERVAL_MS);
    if let Some(m) = &task.status_message {
        wire = wire.with_status_message(m.clone());
    }
    wire
}

/// A `tools/call` answered with `task`.
pub fn created(task: &McpTask) -> CallToolResponse {
    CallToolResponse::Task(CreateTaskResult::new(wire(task)))
}

fn unknown(id: &str) -> McpError {
    McpError::invalid_params(format!("unknown task: {id}"), None)
}

fn internal(e: impl std::fmt::Display) -> McpError {
    tracing::error!("tasks: {e}");
    McpError::internal_error("the store failed; see the server log", None)
}

/// The asker's task `id` served by `surface`, or `-32602`.
fn load(store: &mut Store, surface: Surface, asker: &Asker, id: &str) -> Result<McpTask, McpError> {
    match store.mcp_task(asker.caller.principal(), id) {
        Ok(Some(t)) if surface.serves(&t) => Ok(t),
        Ok(_) => Err(unknown(id)),
        Err(e) => Err(internal(e)),
    }
}

/// `tasks/get`.
///
/// # Errors
///
/// `-32602` for a task the asker cannot read there; `-32603` if the store fails.
pub async fn get(store: SharedStore, surface: Surface, asker: Asker, id: String) -> Result<GetTaskResult, McpError> {
    blocking(move || {
        let mut s = store.locked();
        let task = load(&mut s, surface, &asker, &id)?;
        let payload = match (task.status, &task.outcome) {
            (McpTaskStatus::Working, _) => TaskPayload::Working,
            (McpTaskStatus::Cancelled, _) => TaskPayload::Cancelled,
            (McpTaskStatus::InputRequired, _) => {
                let requests = serde_json::Value::Object(task.input_requests.clone().unwrap_or_default());
                TaskPayload::InputRequired {
                    input_requests: serde_json::from_value(requests).map_err(internal)?,
                }
            }
            // A call task's run recorded its outcome: its result, or the error it failed with.
            (McpTaskStatus::Completed, Some(result)) => TaskPayload::Completed { result: result.clone() },
            (McpTaskStatus::Failed, Some(error)) => TaskPayload::Failed { error: error.clone() },
            (McpTaskStatus::Failed, None) => {
                let mut error = JsonObject::new();
                error.insert("code".into(), (-32603).into());
                error.insert(
                    "message".into(),
                    task.status_message.clone().unwrap_or_else(|| "failed".into()).into(),
                );
                TaskPayload::Failed { error }
            }
            (McpTaskStatus::Completed, None) => TaskPayload::Completed {
                result: as_object(outcome(&mut s, &asker, &task))?,
            },
        };
        Ok(GetTaskResult::new(DetailedTask::new(wire(&task), payload)))
    })
    .await
}

/// `tasks/cancel`: cancels an unstarted agent task (its MCP task then reads `cancelled`); says
/// why not on anything else that still works.
///
/// # Errors
///
/// `-32602` for a task the asker cannot read there; `-32603` if the store fails.
pub async fn cancel(
    store: SharedStore,
    carriers: Arc<dyn Carriers>,
    surface: Surface,
    asker: Asker,
    id: String,
) -> Result<(), McpError> {
    blocking(move || {
        let mut s = store.locked();
        let task = load(&mut s, surface, &asker, &id)?;
        if task.status.is_terminal() {
            return Ok(());
        }
        let refusal = match &task.awaited {
            Awaited::AgentTask { task: agent_task } => {
                let mut ops = crate::ops::Ops::new(&mut s, carriers.as_ref());
                match ops.delegation().cancel_task(&asker.caller, &Acting::Human, agent_task) {
                    Ok(_) => return Ok(()),
                    Err(e) => format!("not cancelled: {e}"),
                }
            }
            Awaited::Reply { .. } => {
                "not cancelled: a question cannot be withdrawn; the task ends with the agent's reply".to_owned()
            }
            Awaited::Activation { .. } => {
                "not cancelled: an activation runs to its end once begun; the task ends with it".to_owned()
            }
            Awaited::Call => {
                s.cancel_mcp_call(asker.caller.principal(), &id).map_err(internal)?;
                return Ok(());
            }
        };
        s.note_mcp_task(asker.caller.principal(), &id, &refusal)
            .map_err(internal)?;
        Ok(())
    })
    .await
}

/// `tasks/update`: acknowledged for a task the asker can read. A call task takes each answer
/// to a request it made; every other answer is ignored (no other ahp task asks for input).
///
/// # Errors
///
/// `-32602` for a task the asker cannot read there, or answers too large to keep; `-32603` if
/// the store fails.
pub async fn update(
    store: SharedStore,
    surface: Surface,
    asker: Asker,
    id: String,
    answers: InputResponses,
) -> Result<(), McpError> {
    blocking(move || {
        let mut s = store.locked();
        let task = load(&mut s, surface, &asker, &id)?;
        if task.awaited != Awaited::Call {
            return Ok(());
        }
        let answers: JsonObject = answers.into_iter().collect();
        match s.answer_mcp_call_input(asker.caller.principal(), &id, &answers) {
            Ok(_) => Ok(()),
            Err(e @ ahp_store::conversation::ConversationError::InvalidInput { .. }) => {
                Err(McpError::invalid_params(e.to_string(), None))
            }
            Err(e) => Err(internal(e)),
        }
    })
    .await
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, McpError> + Send + 'static) -> Result<T, McpError> {
    tokio::task::spawn_blocking(f).await.map_err(internal)?
}

fn as_object(result: CallToolResult) -> Result<JsonObject, McpError> {
    match serde_json::to_value(result).map_err(internal)? {
        serde_json::Value::Object(o) => Ok(o),
        _ => Err(internal("a tool result is not an object")),
    }
}

/// A structured result, as a tool returns one (the one conversion both the tools and a
/// completed task's result use).
pub(super) fn structured<T: serde::Serialize + schemars::JsonSchema + 'static>(value: T) -> CallToolResult {
    match Json(value).into_call_tool_result() {
        Ok(CallToolResponse::Complete(r)) => r,
        _ => CallToolResult::error(vec![ContentBlock::text("the result could not be serialized")]),
    }
}

fn failed(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// The result a completed task reports: what its tool would have returned synchronously, read
/// now from the store (a read the asker may no longer make is reported as the tool's error).
fn outcome(store: &mut Store, asker: &Asker, task: &McpTask) -> CallToolResult {
    match &task.awaited {
        Awaited::Reply {
            conversation, question, ..
        } => {
            let read = |s: &mut Store, id: &str| s.read_message(&asker.caller, conversation, id);
            let answer = task.answer.as_deref().unwrap_or_default();
            match (read(store, question), read(store, answer)) {
                (Ok(q), Ok(r)) => structured(AskAgentResult::answered(&q, &r, &task.id)),
                (Err(e), _) | (_, Err(e)) => failed(format!("the conversation cannot be read: {e}")),
            }
        }
        Awaited::AgentTask { task: agent_task } => {
            match store.get_agent_task(&asker.caller, &Acting::Human, agent_task) {
                Ok(t) => structured(Changed::<TaskResult>::unchanged(&t)),
                Err(e) => failed(format!("the agent task cannot be read: {e}")),
            }
        }
        Awaited::Activation { transfer } => activation_outcome(store, &asker.owner, transfer),
        Awaited::Call => failed("the run recorded no outcome".to_owned()),
    }
}

/// What `activate` returns for an activation that ended: the transfer once active (or
/// insolvent), else the failure with its reason.
fn activation_outcome(store: &mut Store, owner: &TransferOwner, transfer: &str) -> CallToolResult {
    let page = EventPage {
        limit: 20,
        before: None,
    };
    let status = match store.get_status_as(transfer, owner, page) {
        Ok(s) => s,
        Err(e) => return failed(format!("the transfer cannot be read: {e}")),
    };
    let t = &status.transfer;
    if matches!(t.status, TransferStatus::Active | TransferStatus::Insolvent) {
        return structured(TransferResult::from(t));
    }
    let reason = status
        .page
        .events
        .iter()
        .rev()
        .find(|e| e.kind == EventKind::ActivationFailed)
        .and_then(|e| e.detail["reason"].as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("the transfer is {}", t.status));
    failed(format!(
        "activation of {transfer} failed: {reason}; the transfer stays {} and a retry needs a new activate token",
        t.status
    ))
}
