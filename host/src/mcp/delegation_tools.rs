//! The delegation tools — agent tasks, their attempts, waits and goals — served beside the
//! conversation tools on `/mcp/conversations` (and `serve --stdio --surface conversations`) by
//! the same [`ConversationTools`] server.
//!
//! Everything about the caller is the conversation tools': its principal
//! ([`identity`](super::identity)), the `communication:read` scope for [`READ_TOOLS`] and
//! `communication:manage` for the rest ([`required_scope`](super::conversation_tools::required_scope)),
//! refusals as a [`ToolError`] with a stable `kind` (a not-found never echoes the id, so another
//! owner's task and a random id read the same), and every store call on a blocking thread.
//!
//! **Acting.** The human owner or one of its agents through its exact endpoint
//! ([`MaybeActingArgs`]); finishing an attempt and registering a wait are the agent's own
//! ([`ActingArgs`]).
//!
//! Each tool adapts one operation of [`Delegation`](crate::ops::Delegation): arguments in, its
//! view out. The operation renews the acting agent's endpoint, makes the store call and
//! schedules exactly the agents the call woke (see [`crate::ops`]).

use ahp_store::conversation::Acting;
use ahp_store::delegation::{GoalCheckpoint, NewGoal, NewTask, NewWait, TaskCompletion, TaskQuery};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResponse, Extensions};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{Json, tool, tool_router};

use super::arguments::{acting, actor, page};
use super::changed::Changed;
use super::conversation_tools::ConversationTools;
use super::delegation_schema::*;
pub use super::scopes::DELEGATION_READ_TOOLS as READ_TOOLS;
use super::tasks;
use super::tool_error::ToolError;

/// The [`Acting`] of optional agent arguments (all three or none).
fn who(a: MaybeActingArgs) -> Result<Acting, ToolError> {
    acting(a.agent_id, a.endpoint_id, a.controller_generation)
}

#[tool_router(router = delegation_router, vis = "pub(super)")]
impl ConversationTools {
    /// Create an Agent Task (`tsk_…`) for an agent of the caller, as the owner or as one of its
    /// agents (the creator). With `start` (default) its first attempt starts at once and the
    /// assignee gets an `agent_task_attempt` wake. At most 64 unfinished tasks per assignee.
    ///
    /// A client that declares the tasks extension (2026-07-28) gets an MCP task that the agent
    /// task's terminal state completes (with the agent task as it then is); `tasks/cancel`
    /// cancels an agent task no attempt has started.
    #[tool(
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        output_schema = rmcp::handler::server::common::schema_for_output::<Changed<TaskResult>>()
    )]
    async fn create_agent_task(
        &self,
        ctx: RequestContext<RoleServer>,
        Parameters(a): Parameters<CreateTaskArgs>,
    ) -> Result<CallToolResponse, ToolError> {
        let track = tasks::answers_with_task(&ctx);
        self.ops(&ctx.extensions, move |ops, c| {
            let who = who(a.acting)?;
            let new = NewTask {
                assignee: a.assignee_agent_id,
                title: a.title,
                instructions: a.instructions,
                goal: a.goal_id,
                start: a.start.unwrap_or(true),
            };
            let m = ops
                .delegation()
                .create_task_tracked(c, &who, &new, &a.idempotency_key, track)?;
            if let (true, Some(task)) = (track, &m.value.1) {
                return Ok(tasks::created(task));
            }
            let changed = Changed::<TaskResult> {
                resource: (&m.value.0).into(),
                replayed: m.replayed,
                state_changed: m.state_changed,
            };
            Ok(super::conversation_tools::complete(changed))
        })
        .await
    }

    /// The tasks the acting party can see, filtered and paged by id: the owner sees all of its
    /// tasks; an agent those it created, is assigned, or whose goal it controls.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn list_agent_tasks(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<ListTasksArgs>,
    ) -> Result<Json<TaskListResult>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let who = who(a.acting)?;
            let limit = page(a.limit);
            let query = TaskQuery {
                assignee: a.assignee_agent_id,
                creator: a.creator_agent_id,
                state: a.state.map(Into::into),
                goal: a.goal_id,
                after: a.after,
            };
            let page = ops.delegation().tasks(c, &who, &query, limit)?;
            Ok(Json(TaskListResult {
                tasks: page.items.iter().map(Into::into).collect(),
                next_after: page.next_after,
            }))
        })
        .await
    }

    /// One task with every attempt (provenance: each attempt's endpoint, generation and wake).
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn get_agent_task(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<TaskArgs>,
    ) -> Result<Json<GetTaskResult>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let (task, attempts) = ops.delegation().task_with_attempts(c, &who(a.acting)?, &a.task_id)?;
            Ok(Json(GetTaskResult {
                task_id: task.id.clone(),
                task: (&task).into(),
                attempts: attempts.iter().map(Into::into).collect(),
            }))
        })
        .await
    }

    /// Cancel a task, as the owner, its creator or its goal's controller (its assignee finishes
    /// the attempt as failed instead). Desired-state idempotent; the cancellation is the task's
    /// terminal fact for every wait over it.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn cancel_agent_task(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<TaskArgs>,
    ) -> Result<Json<Changed<TaskResult>>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let m = ops.delegation().cancel_task(c, &who(a.acting)?, &a.task_id)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// Finish a task attempt as its assignee, through the exact endpoint and generation it is
    /// fenced to (`fenced` otherwise): the task becomes `succeeded` or `failed` with the result,
    /// every wait over it sees the terminal fact, and its goal's controller gets attention. An
    /// exact retry is `replayed`.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn complete_agent_task_attempt(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<CompleteAttemptArgs>,
    ) -> Result<Json<Changed<TaskResult>>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let done = TaskCompletion {
                attempt: a.attempt_id,
                outcome: a.outcome.into(),
                result: a.result,
            };
            let m = ops.delegation().complete_attempt(c, &actor(&a.acting), &done)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// Register a one-shot wait for the acting agent over 1 to 8 tasks, `all` or `any`: exactly
    /// one wake when the condition holds (at once, if it already does). At most 32 waiting per
    /// agent.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn register_agent_wait(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<RegisterWaitArgs>,
    ) -> Result<Json<Changed<WaitResult>>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let new = NewWait {
                sources: a.sources,
                mode: a.mode.into(),
                goal: a.goal_id,
            };
            let m = ops
                .delegation()
                .register_wait(c, &actor(&a.acting), &new, &a.idempotency_key)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// A wait with each source's current task state, as the owner or the agent it wakes.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn read_agent_wait(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<WaitArgs>,
    ) -> Result<Json<Changed<WaitResult>>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let w = ops.delegation().wait(c, &who(a.acting)?, &a.wait_id)?;
            Ok(Json(Changed::unchanged(&w)))
        })
        .await
    }

    /// Cancel a wait that has not fired (desired-state idempotent); a triggered wait is returned
    /// unchanged. Only future terminal facts are affected.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn cancel_agent_wait(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<WaitArgs>,
    ) -> Result<Json<Changed<WaitResult>>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let m = ops.delegation().cancel_wait(c, &who(a.acting)?, &a.wait_id)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// Create a Goal (`goal_…`): a completion intent fixed for its life, a plan of at most 32
    /// steps, and optionally a controller agent whom its tasks' terminal results wake.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn create_goal(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<CreateGoalArgs>,
    ) -> Result<Json<Changed<GoalResult>>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let who = who(a.acting)?;
            let new = NewGoal {
                title: a.title,
                completion_intent: a.completion_intent,
                plan: a.plan.into_iter().map(Into::into).collect(),
                controller: a.controller_agent_id,
            };
            let m = ops.delegation().create_goal(c, &who, &new, &a.idempotency_key)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// A goal: intent, plan, note, revision and state.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn get_goal(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<GoalArgs>,
    ) -> Result<Json<Changed<GoalResult>>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let g = ops.delegation().goal(c, &who(a.acting)?, &a.goal_id)?;
            Ok(Json(Changed::unchanged(&g)))
        })
        .await
    }

    /// Checkpoint a goal: the plan and note replace its own if `expectedRevision` is still
    /// current (`conflict` otherwise: re-read and retry); the revision goes up by one.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn checkpoint_goal(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<CheckpointGoalArgs>,
    ) -> Result<Json<Changed<GoalResult>>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let who = who(a.acting)?;
            let checkpoint = GoalCheckpoint {
                goal: a.goal_id,
                expected_revision: a.expected_revision,
                plan: a.plan.into_iter().map(Into::into).collect(),
                note: a.note,
            };
            let m = ops
                .delegation()
                .checkpoint_goal(c, &who, &checkpoint, &a.idempotency_key)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }

    /// Complete a goal (desired-state idempotent; an abandoned goal is `invalid_state`).
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn complete_goal(
        &self,
        ext: Extensions,
        Parameters(a): Parameters<GoalArgs>,
    ) -> Result<Json<Changed<GoalResult>>, ToolError> {
        self.ops(&ext, move |ops, c| {
            let m = ops.delegation().complete_goal(c, &who(a.acting)?, &a.goal_id)?;
            Ok(Json(Changed::of(&m)))
        })
        .await
    }
}
