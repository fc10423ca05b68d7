//! The arguments of the tools, as clients send them.

use ahp_store::delegation::{PlanStep, StepStatus, TaskOutcome, TaskState, WaitMode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::mcp::conversation_schema::ActingArgs;

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
