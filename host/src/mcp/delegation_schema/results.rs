//! The results of the tools, and the views of the store's resources inside them.

use ahp_store::delegation::{AgentTask, AgentWait, Goal, TaskAttempt, WaitSource};
use schemars::JsonSchema;
use serde::Serialize;

use super::args::*;

/// One attempt of a task.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttemptView {
    /// `tka_…`.
    pub attempt_id: String,
    /// `tsk_…`.
    pub task_id: String,
    /// 1 for the first attempt.
    pub number: u64,
    /// The assignee (`agt_…`).
    pub assignee_agent_id: String,
    /// The endpoint it is fenced to (`ep_…`).
    pub endpoint_id: String,
    /// That endpoint's controller generation.
    pub controller_generation: u64,
    /// The `agent_task_attempt` wake it is delivered by (`wk_…`).
    pub wake_id: String,
    /// active, succeeded, failed, cancelled, revoked or delivery_unknown.
    pub state: String,
    /// The result text, once finished.
    pub result: Option<String>,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC, once finished.
    pub finished_at: Option<String>,
}

impl From<&TaskAttempt> for AttemptView {
    fn from(a: &TaskAttempt) -> Self {
        Self {
            attempt_id: a.id.clone(),
            task_id: a.task_id.clone(),
            number: a.number,
            assignee_agent_id: a.assignee_agent_id.clone(),
            endpoint_id: a.endpoint_id.clone(),
            controller_generation: a.generation,
            wake_id: a.wake_id.clone(),
            state: a.state.to_string(),
            result: a.result.clone(),
            started_at: a.started_at.to_string(),
            finished_at: a.finished_at.map(|t| t.to_string()),
        }
    }
}

/// A task.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskView {
    /// `tsk_…`.
    pub task_id: String,
    /// The agent that created it (`agt_…`); `null`: the owner as a human.
    pub creator_agent_id: Option<String>,
    /// The agent that does it (`agt_…`).
    pub assignee_agent_id: String,
    /// The goal it serves (`goal_…`).
    pub goal_id: Option<String>,
    /// Its title.
    pub title: String,
    /// Its instructions.
    pub instructions: String,
    /// open, running, succeeded, failed or cancelled.
    pub state: String,
    /// The result text of the attempt that finished it.
    pub result: Option<String>,
    /// Attempts started so far.
    pub attempt_count: u64,
    /// The newest attempt.
    pub current_attempt: Option<AttemptView>,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// RFC 3339 UTC.
    pub updated_at: String,
    /// RFC 3339 UTC, once terminal.
    pub terminal_at: Option<String>,
}

impl From<&AgentTask> for TaskView {
    fn from(t: &AgentTask) -> Self {
        Self {
            task_id: t.id.clone(),
            creator_agent_id: t.creator_agent_id.clone(),
            assignee_agent_id: t.assignee_agent_id.clone(),
            goal_id: t.goal_id.clone(),
            title: t.title.clone(),
            instructions: t.instructions.clone(),
            state: t.state.to_string(),
            result: t.result.clone(),
            attempt_count: t.attempt_count,
            current_attempt: t.current_attempt.as_ref().map(Into::into),
            created_at: t.created_at.to_string(),
            updated_at: t.updated_at.to_string(),
            terminal_at: t.terminal_at.map(|x| x.to_string()),
        }
    }
}

/// The resource `create_agent_task`, `cancel_agent_task` and `complete_agent_task_attempt` return, in the write envelope
/// ([`Changed`](crate::mcp::changed::Changed): with `replayed` and `stateChanged`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskResult {
    /// `tsk_…`.
    pub task_id: String,
    /// The task as it now is.
    pub task: TaskView,
}

impl From<&AgentTask> for TaskResult {
    fn from(t: &AgentTask) -> Self {
        Self {
            task_id: t.id.clone(),
            task: t.into(),
        }
    }
}

/// What `get_agent_task` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskResult {
    /// `tsk_…`.
    pub task_id: String,
    /// The task.
    pub task: TaskView,
    /// Every attempt, oldest first (at most 16).
    pub attempts: Vec<AttemptView>,
}

/// What `list_agent_tasks` returns.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskListResult {
    /// The page, by id.
    pub tasks: Vec<TaskView>,
    /// The cursor of the next page, when this one is full.
    pub next_after: Option<String>,
}

/// One source of a wait.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitSourceView {
    /// `tsk_…`.
    pub task_id: String,
    /// The task's state now.
    pub task_state: String,
    /// RFC 3339 UTC: when its terminal fact reached the wait.
    pub matched_at: Option<String>,
}

impl From<&WaitSource> for WaitSourceView {
    fn from(s: &WaitSource) -> Self {
        Self {
            task_id: s.task_id.clone(),
            task_state: s.task_state.to_string(),
            matched_at: s.matched_at.map(|t| t.to_string()),
        }
    }
}

/// A wait.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitView {
    /// `wait_…`.
    pub wait_id: String,
    /// The agent it wakes (`agt_…`).
    pub agent_id: String,
    /// The goal it is scoped to.
    pub goal_id: Option<String>,
    /// any or all.
    pub mode: String,
    /// waiting, triggered or cancelled.
    pub state: String,
    /// Its sources, in registration order.
    pub sources: Vec<WaitSourceView>,
    /// The one Wait-origin wake it made (`wk_…`), once triggered.
    pub wake_id: Option<String>,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// RFC 3339 UTC.
    pub updated_at: String,
    /// RFC 3339 UTC, once triggered.
    pub triggered_at: Option<String>,
    /// RFC 3339 UTC, once cancelled.
    pub cancelled_at: Option<String>,
}

impl From<&AgentWait> for WaitView {
    fn from(w: &AgentWait) -> Self {
        Self {
            wait_id: w.id.clone(),
            agent_id: w.agent_id.clone(),
            goal_id: w.goal_id.clone(),
            mode: w.mode.to_string(),
            state: w.state.to_string(),
            sources: w.sources.iter().map(Into::into).collect(),
            wake_id: w.wake_id.clone(),
            created_at: w.created_at.to_string(),
            updated_at: w.updated_at.to_string(),
            triggered_at: w.triggered_at.map(|t| t.to_string()),
            cancelled_at: w.cancelled_at.map(|t| t.to_string()),
        }
    }
}

/// The resource `register_agent_wait`, `read_agent_wait` and `cancel_agent_wait` return, in the write envelope
/// ([`Changed`](crate::mcp::changed::Changed): with `replayed` and `stateChanged`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitResult {
    /// `wait_…`.
    pub wait_id: String,
    /// The wait as it now is.
    pub wait: WaitView,
}

impl From<&AgentWait> for WaitResult {
    fn from(w: &AgentWait) -> Self {
        Self {
            wait_id: w.id.clone(),
            wait: w.into(),
        }
    }
}

/// A goal.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoalView {
    /// `goal_…`.
    pub goal_id: String,
    /// The agent that created it; `null`: the owner as a human.
    pub creator_agent_id: Option<String>,
    /// The agent its tasks' terminal results wake.
    pub controller_agent_id: Option<String>,
    /// Its title.
    pub title: String,
    /// What "done" means, fixed at creation.
    pub completion_intent: String,
    /// The plan as of the last checkpoint.
    pub plan: Vec<PlanStepArgs>,
    /// The last checkpoint's note.
    pub note: String,
    /// Bumped by every checkpoint; a checkpoint names the one it is based on.
    pub revision: u64,
    /// active, completed or abandoned.
    pub state: String,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// RFC 3339 UTC.
    pub updated_at: String,
    /// RFC 3339 UTC, once completed or abandoned.
    pub closed_at: Option<String>,
}

impl From<&Goal> for GoalView {
    fn from(g: &Goal) -> Self {
        Self {
            goal_id: g.id.clone(),
            creator_agent_id: g.creator_agent_id.clone(),
            controller_agent_id: g.controller_agent_id.clone(),
            title: g.title.clone(),
            completion_intent: g.completion_intent.clone(),
            plan: g.plan.iter().map(Into::into).collect(),
            note: g.note.clone(),
            revision: g.revision,
            state: g.state.to_string(),
            created_at: g.created_at.to_string(),
            updated_at: g.updated_at.to_string(),
            closed_at: g.closed_at.map(|t| t.to_string()),
        }
    }
}

/// The resource `create_goal`, `get_goal`, `checkpoint_goal` and `complete_goal` return, in the write envelope
/// ([`Changed`](crate::mcp::changed::Changed): with `replayed` and `stateChanged`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoalResult {
    /// `goal_…`.
    pub goal_id: String,
    /// The goal as it now is.
    pub goal: GoalView,
}

impl From<&Goal> for GoalResult {
    fn from(g: &Goal) -> Self {
        Self {
            goal_id: g.id.clone(),
            goal: g.into(),
        }
    }
}
