//! The delegation tools' arguments and results, in camelCase: tasks, their attempts, waits and
//! goals.
//!
//! The conventions are the conversation tools' ([`conversation_schema`](super::conversation_schema)):
//! doc comments on fields are the JSON Schema descriptions clients see; arguments are converted
//! into the store's types, which validate and bound them; mutations say `replayed` and
//! `stateChanged`; no result carries a principal, a digest or an idempotency key.
//!
//! **Acting.** A call either names the agent it acts as — `agentId`, `endpointId` and
//! `controllerGeneration` together ([`ActingArgs`], required by the agent-only tools
//! `complete_agent_task_attempt` and `register_agent_wait`) — or, where the human owner may act
//! too, names all three or none ([`MaybeActingArgs`]; none: the caller as the human owner).
//! Provenance is in every view: a task's creator (`creatorAgentId`, `null` for the owner as a
//! human), its assignee and goal; an attempt's endpoint, generation and wake; a wait's wake.

use ahp_store::delegation::{
    AgentTask, AgentWait, Goal, PlanStep, StepStatus, TaskAttempt, TaskOutcome, TaskState, WaitMode, WaitSource,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::conversation_schema::ActingArgs;

/// The optional agent identity of a call the human owner may make too: all three or none.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaybeActingArgs {
    /// Act as this agent (all three together); absent: as the human owner.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// The agent's current endpoint (`ep_…`).
    #[serde(default)]
    pub endpoint_id: Option<String>,
    /// That endpoint's controller generation.
    #[serde(default)]
    pub controller_generation: Option<u64>,
}

/// A task's lifecycle, as a filter.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStateArg {
    /// Created, no attempt running.
    Open,
    /// An attempt is running.
    Running,
    /// Finished with a result.
    Succeeded,
    /// Finished as failed.
    Failed,
    /// Cancelled by its creator, its goal's controller or the owner.
    Cancelled,
}

impl From<TaskStateArg> for TaskState {
    fn from(s: TaskStateArg) -> Self {
        match s {
            TaskStateArg::Open => Self::Open,
            TaskStateArg::Running => Self::Running,
            TaskStateArg::Succeeded => Self::Succeeded,
            TaskStateArg::Failed => Self::Failed,
            TaskStateArg::Cancelled => Self::Cancelled,
        }
    }
}

/// How an attempt ends.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeArg {
    /// The work is done; `result` is its answer.
    Succeeded,
    /// The work could not be done; `result` says why.
    Failed,
}

impl From<OutcomeArg> for TaskOutcome {
    fn from(o: OutcomeArg) -> Self {
        match o {
            OutcomeArg::Succeeded => Self::Succeeded,
            OutcomeArg::Failed => Self::Failed,
        }
    }
}

/// When a wait fires.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitModeArg {
    /// At the first source's terminal fact.
    Any,
    /// At the last source's terminal fact.
    All,
}

impl From<WaitModeArg> for WaitMode {
    fn from(m: WaitModeArg) -> Self {
        match m {
            WaitModeArg::Any => Self::Any,
            WaitModeArg::All => Self::All,
        }
    }
}

/// Where one plan step is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatusArg {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Done,
    /// Decided against.
    Skipped,
}

impl From<StepStatusArg> for StepStatus {
    fn from(s: StepStatusArg) -> Self {
        match s {
            StepStatusArg::Pending => Self::Pending,
            StepStatusArg::InProgress => Self::InProgress,
            StepStatusArg::Done => Self::Done,
            StepStatusArg::Skipped => Self::Skipped,
        }
    }
}

impl From<StepStatus> for StepStatusArg {
    fn from(s: StepStatus) -> Self {
        match s {
            StepStatus::Pending => Self::Pending,
            StepStatus::InProgress => Self::InProgress,
            StepStatus::Done => Self::Done,
            StepStatus::Skipped => Self::Skipped,
        }
    }
}

/// One step of a goal's plan.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanStepArgs {
    /// What the step is, 1 to 200 bytes.
    pub title: String,
    /// Where it is.
    pub status: StepStatusArg,
}

impl From<PlanStepArgs> for PlanStep {
    fn from(s: PlanStepArgs) -> Self {
        Self {
            title: s.title,
            status: s.status.into(),
        }
    }
}

impl From<&PlanStep> for PlanStepArgs {
    fn from(s: &PlanStep) -> Self {
        Self {
            title: s.title.clone(),
            status: s.status.into(),
        }
    }
}

/// Arguments of `create_agent_task`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateTaskArgs {
    /// The agent that will do the work (`agt_…`), owned by the caller.
    pub assignee_agent_id: String,
    /// 1 to 200 bytes.
    pub title: String,
    /// What to do, 1 to 65,536 bytes: the brief the assignee reads.
    pub instructions: String,
    /// A goal (`goal_…`) the task serves, visible to the acting party and active.
    #[serde(default)]
    pub goal_id: Option<String>,
    /// Start the first attempt at once (default true): the assignee, which needs an attached
    /// endpoint, gets an `agent_task_attempt` wake.
    #[serde(default)]
    pub start: Option<bool>,
    /// Caller-generated, 1 to 128 printable ASCII characters: an exact retry returns the same
    /// task (`replayed: true`); the same key with another request is a `conflict`.
    pub idempotency_key: String,
    /// Who creates it.
    #[serde(flatten)]
    pub acting: MaybeActingArgs,
}

/// Arguments of `list_agent_tasks`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksArgs {
    /// Only tasks assigned to this agent.
    #[serde(default)]
    pub assignee_agent_id: Option<String>,
    /// Only tasks this agent created.
    #[serde(default)]
    pub creator_agent_id: Option<String>,
    /// Only tasks in this state.
    #[serde(default)]
    pub state: Option<TaskStateArg>,
    /// Only tasks of this goal.
    #[serde(default)]
    pub goal_id: Option<String>,
    /// Exclusive cursor: the last id of the previous page (`nextAfter`).
    #[serde(default)]
    pub after: Option<String>,
    /// Page size, 1 to 200 (default 50).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Who reads: the owner sees all its tasks, an agent those it created, is assigned, or whose
    /// goal it controls.
    #[serde(flatten)]
    pub acting: MaybeActingArgs,
}

/// Arguments of `get_agent_task` and `cancel_agent_task`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskArgs {
    /// The task (`tsk_…`).
    pub task_id: String,
    /// Who acts.
    #[serde(flatten)]
    pub acting: MaybeActingArgs,
}

/// Arguments of `complete_agent_task_attempt`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompleteAttemptArgs {
    /// The assignee, through the exact endpoint and generation the attempt is fenced to.
    #[serde(flatten)]
    pub acting: ActingArgs,
    /// The attempt (`tka_…`), as the task's `currentAttempt` names it.
    pub attempt_id: String,
    /// `succeeded` or `failed`.
    pub outcome: OutcomeArg,
    /// The answer (or why it failed), 0 to 65,536 bytes. An exact retry (same outcome and
    /// result) is `replayed`; a different one is `invalid_state`.
    #[serde(default)]
    pub result: String,
}

/// Arguments of `register_agent_wait`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegisterWaitArgs {
    /// The agent the wait will wake, through its exact endpoint.
    #[serde(flatten)]
    pub acting: ActingArgs,
    /// 1 to 8 distinct tasks (`tsk_…`) the agent can see.
    pub sources: Vec<String>,
    /// `all` (when every source is terminal) or `any` (at the first).
    pub mode: WaitModeArg,
    /// Scope the wait to this goal (`goal_…`), which the agent controls: its sources must be
    /// tasks of the goal, none terminal yet; it then takes precedence over the goal's attention.
    #[serde(default)]
    pub goal_id: Option<String>,
    /// Caller-generated, 1 to 128 printable ASCII characters.
    pub idempotency_key: String,
}

/// Arguments of `read_agent_wait` and `cancel_agent_wait`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitArgs {
    /// The wait (`wait_…`).
    pub wait_id: String,
    /// Who acts: the owner, or the agent the wait wakes.
    #[serde(flatten)]
    pub acting: MaybeActingArgs,
}

/// Arguments of `create_goal`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateGoalArgs {
    /// 1 to 200 bytes.
    pub title: String,
    /// What "done" means, 1 to 4,096 bytes, fixed for the goal's life.
    pub completion_intent: String,
    /// The initial plan, at most 32 steps.
    #[serde(default)]
    pub plan: Vec<PlanStepArgs>,
    /// The agent (`agt_…`, owned by the caller) whom its tasks' terminal results wake.
    #[serde(default)]
    pub controller_agent_id: Option<String>,
    /// Caller-generated, 1 to 128 printable ASCII characters.
    pub idempotency_key: String,
    /// Who creates it.
    #[serde(flatten)]
    pub acting: MaybeActingArgs,
}

/// Arguments of `get_goal` and `complete_goal`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoalArgs {
    /// The goal (`goal_…`).
    pub goal_id: String,
    /// Who acts.
    #[serde(flatten)]
    pub acting: MaybeActingArgs,
}

/// Arguments of `checkpoint_goal`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointGoalArgs {
    /// The goal (`goal_…`).
    pub goal_id: String,
    /// The `revision` the checkpoint is based on; another current revision is a `conflict`.
    pub expected_revision: u64,
    /// The whole plan as it now is, at most 32 steps.
    pub plan: Vec<PlanStepArgs>,
    /// What was reached and what comes next, 0 to 4,096 bytes.
    #[serde(default)]
    pub note: String,
    /// Caller-generated, 1 to 128 printable ASCII characters: an exact retry returns the goal as
    /// it now is (`replayed: true`).
    pub idempotency_key: String,
    /// Who acts.
    #[serde(flatten)]
    pub acting: MaybeActingArgs,
}

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

/// What `create_agent_task`, `cancel_agent_task` and `complete_agent_task_attempt` return.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskResult {
    /// `tsk_…`.
    pub task_id: String,
    /// An exact retry returned the original.
    pub replayed: bool,
    /// This call changed durable state.
    pub state_changed: bool,
    /// The task as it now is.
    pub task: TaskView,
}

impl TaskResult {
    /// The result of a mutation that left `task`.
    pub fn new(task: &AgentTask, replayed: bool, state_changed: bool) -> Self {
        Self {
            task_id: task.id.clone(),
            replayed,
            state_changed,
            task: task.into(),
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

/// What `register_agent_wait`, `read_agent_wait` and `cancel_agent_wait` return.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitResult {
    /// `wait_…`.
    pub wait_id: String,
    /// An exact retry returned the original (always false for a read).
    pub replayed: bool,
    /// This call changed durable state (always false for a read).
    pub state_changed: bool,
    /// The wait as it now is.
    pub wait: WaitView,
}

impl WaitResult {
    /// The result of a call that left `wait`.
    pub fn new(wait: &AgentWait, replayed: bool, state_changed: bool) -> Self {
        Self {
            wait_id: wait.id.clone(),
            replayed,
            state_changed,
            wait: wait.into(),
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

/// What `create_goal`, `get_goal`, `checkpoint_goal` and `complete_goal` return.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoalResult {
    /// `goal_…`.
    pub goal_id: String,
    /// An exact retry returned the original (always false for a read).
    pub replayed: bool,
    /// This call changed durable state (always false for a read).
    pub state_changed: bool,
    /// The goal as it now is.
    pub goal: GoalView,
}

impl GoalResult {
    /// The result of a call that left `goal`.
    pub fn new(goal: &Goal, replayed: bool, state_changed: bool) -> Self {
        Self {
            goal_id: goal.id.clone(),
            replayed,
            state_changed,
            goal: goal.into(),
        }
    }
}
