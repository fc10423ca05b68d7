//! The `delegation` interface's types and the store's, converted by `From`: each WIT enum and
//! its store twin as a pair (both ways, variant for variant, so a variant added on one side
//! alone fails to compile), and each record the store returns into its WIT form.

use ahp_store::delegation::{
    AgentTask, AgentWait, AttentionEvent as StoreEvent, Goal as StoreGoal, GoalState as StoreGoalState,
    PlanStep as StorePlanStep, StepStatus as StoreStepStatus, TaskAttempt, TaskAttemptState, TaskOutcome,
    TaskState as StoreTaskState, WaitMode as StoreWaitMode, WaitState as StoreWaitState,
};

use super::bindings::v0_3::ahp::agent::delegation::{
    Attempt, AttemptState, AttentionEvent, Goal, GoalState, Outcome, PlanStep, StepStatus, Task, TaskState, Wait,
    WaitMode, WaitSource, WaitState,
};

/// `From` both ways between a WIT enum and the store's, variant for variant.
macro_rules! enum_pair {
    ($wit:ident, $store:ident, [$($v:ident),+ $(,)?]) => {
        impl From<$store> for $wit {
            fn from(s: $store) -> Self {
                match s {
                    $($store::$v => Self::$v),+
                }
            }
        }

        impl From<$wit> for $store {
            fn from(s: $wit) -> Self {
                match s {
                    $($wit::$v => Self::$v),+
                }
            }
        }
    };
}

enum_pair!(TaskState, StoreTaskState, [Open, Running, Succeeded, Failed, Cancelled]);
enum_pair!(
    AttemptState,
    TaskAttemptState,
    [Active, Succeeded, Failed, Cancelled, Revoked, DeliveryUnknown]
);
enum_pair!(Outcome, TaskOutcome, [Succeeded, Failed]);
enum_pair!(WaitMode, StoreWaitMode, [Any, All]);
enum_pair!(WaitState, StoreWaitState, [Waiting, Triggered, Cancelled]);
enum_pair!(StepStatus, StoreStepStatus, [Pending, InProgress, Done, Skipped]);
enum_pair!(GoalState, StoreGoalState, [Active, Completed, Abandoned]);

/// A store time as the interface's microseconds (a time before the epoch reads as 0).
fn micros(t: ahp_store::Timestamp) -> u64 {
    u64::try_from(t.as_micros()).unwrap_or(0)
}

impl From<TaskAttempt> for Attempt {
    fn from(a: TaskAttempt) -> Self {
        Self {
            id: a.id,
            task_id: a.task_id,
            number: u32::try_from(a.number).unwrap_or(u32::MAX),
            state: a.state.into(),
            wake_id: a.wake_id,
            started_at_micros: micros(a.started_at),
            finished_at_micros: a.finished_at.map(micros),
        }
    }
}

impl From<AgentTask> for Task {
    fn from(t: AgentTask) -> Self {
        Self {
            id: t.id,
            creator: t.creator_agent_id,
            assignee: t.assignee_agent_id,
            goal_id: t.goal_id,
            title: t.title,
            instructions: t.instructions,
            state: t.state.into(),
            result: t.result,
            attempt_count: u32::try_from(t.attempt_count).unwrap_or(u32::MAX),
            current_attempt: t.current_attempt.map(Into::into),
            created_at_micros: micros(t.created_at),
            terminal_at_micros: t.terminal_at.map(micros),
        }
    }
}

impl From<AgentWait> for Wait {
    fn from(w: AgentWait) -> Self {
        Self {
            id: w.id,
            goal_id: w.goal_id,
            mode: w.mode.into(),
            state: w.state.into(),
            sources: w
                .sources
                .into_iter()
                .map(|s| WaitSource {
                    task_id: s.task_id,
                    task_state: s.task_state.into(),
                    matched_at_micros: s.matched_at.map(micros),
                })
                .collect(),
            wake_id: w.wake_id,
            created_at_micros: micros(w.created_at),
            triggered_at_micros: w.triggered_at.map(micros),
        }
    }
}

impl From<PlanStep> for StorePlanStep {
    fn from(s: PlanStep) -> Self {
        Self {
            title: s.title,
            status: s.status.into(),
        }
    }
}

impl From<StorePlanStep> for PlanStep {
    fn from(s: StorePlanStep) -> Self {
        Self {
            title: s.title,
            status: s.status.into(),
        }
    }
}

impl From<StoreGoal> for Goal {
    fn from(g: StoreGoal) -> Self {
        Self {
            id: g.id,
            creator: g.creator_agent_id,
            controller: g.controller_agent_id,
            title: g.title,
            completion_intent: g.completion_intent,
            plan: g.plan.into_iter().map(Into::into).collect(),
            note: g.note,
            revision: g.revision,
            state: g.state.into(),
            created_at_micros: micros(g.created_at),
        }
    }
}

impl AttentionEvent {
    /// The guest's view of an `agent_task_terminal` event; `None` for a `goal_workflow_stalled`
    /// one, which has no task (it targets only an agent an MCP App carries, never a sandbox's).
    pub(super) fn of(e: StoreEvent) -> Option<Self> {
        Some(Self {
            task_id: e.task_id?,
            attempt_id: e.attempt_id?,
            task_state: e.task_state?.into(),
            id: e.id,
            goal_id: e.goal_id,
            created_at_micros: micros(e.created_at),
        })
    }
}
