//! Delegation: how one agent hands work to another and sleeps until it is done.
//!
//! The seed's coordination facts beside the conversation domain, with its discipline (every
//! operation a method on [`Store`] taking the [`Caller`]: scope, then input
//! validation, then one `BEGIN IMMEDIATE` transaction; existence-hiding lookups scoped by the
//! owner principal first; principal-scoped idempotency; closed lifecycle enums that fail closed):
//!
//! - [`task`]: an **Agent Task** (`tsk_…`), planned work created by an agent (or the owner as a
//!   human) for an agent of the same owner: `open → running → succeeded | failed | cancelled`;
//! - [`attempt`]: its **Task Attempts** (`tka_…`), one active at a time, fenced to the assignee's
//!   endpoint and controller generation and delivered as an `agent_task_attempt` wake; a crash
//!   after the wake's dispatch fence leaves the attempt `delivery_unknown`, never re-run;
//! - [`wait`]: an **Agent Wait** (`wait_…`), a one-shot rendezvous over 1..8 task-terminal
//!   sources, `any` or `all`, firing exactly one Wait-origin wake;
//! - [`goal`]: a **Goal** (`goal_…`): fixed completion intent, a bounded plan with
//!   revision-fenced checkpoints, a lifecycle and an optional controller agent;
//! - [`attention`]: `agent_task_terminal` **attention events** (`att_…`), created with one
//!   `attention_event` wake in the transaction that terminalizes a goal-correlated attempt,
//!   unless a Goal-scoped wait takes precedence;
//! - [`stall`]: `goal_workflow_stalled` attention events, recorded (once per epoch of
//!   meaningful work) by the Goal Plan card's observation of a quiet goal whose controller an
//!   MCP App carries;
//! - [`operator`]: the operator's reads across principals (the CLI's);
//! - [`check`]: an independent SQL check of the one-shot invariants (for crash tests);
//! - [`bounds`]: every limit of the domain, documented.
//!
//! Errors are the communication domain's [`ConversationError`](crate::conversation::ConversationError):
//! delegation is part of it (same principals, agents, endpoints and wakes).
//!
//! **Who sees what.** Everything belongs to one owner principal (the caller's). The owner acting
//! as a human ([`Acting::Human`]) sees all of its tasks, waits, goals and attention events. An
//! agent acting through its exact endpoint ([`Acting::Agent`]) sees the tasks it created, is
//! assigned, or whose goal it controls; the goals it created or controls; its own waits; and the
//! attention events that target it. Anything else is not found, exactly like a missing id.
//!
//! ```
//! use std::time::Duration;
//! use ahp_store::Store;
//! use ahp_store::conversation::*;
//! use ahp_store::delegation::*;
//! # fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
//! let mut store = Store::open_in_memory()?;
//! let alice = Caller::full("account:alice")?;
//! let card = |h: &str| AgentCard { handle: h.into(), display_name: h.into(), description: String::new(), specialties: vec![] };
//! let boss = store.create_agent(&alice, &card("boss"), "a-1")?.value;
//! let worker = store.create_agent(&alice, &card("worker"), "a-2")?.value;
//! let boss_ep = AgentActor::of(&store.attach_endpoint(&alice, &boss.id, Duration::from_secs(60), "e-1")?.value);
//! let worker_ep = AgentActor::of(&store.attach_endpoint(&alice, &worker.id, Duration::from_secs(60), "e-2")?.value);
//! // The boss hands the worker a task and starts its attempt: the worker gets a wake.
//! let new = NewTask { assignee: worker.id.clone(), title: "sum".into(), instructions: "1+2".into(), goal: None, start: true };
//! let task = store.create_agent_task(&alice, &Acting::Agent(boss_ep.clone()), &new, "t-1")?.value;
//! assert_eq!(task.state, TaskState::Running);
//! // It waits for it, then ends its turn.
//! let wait = NewWait { sources: vec![task.id.clone()], mode: WaitMode::All, goal: None };
//! let wait = store.register_agent_wait(&alice, &boss_ep, &wait, "w-1")?.value;
//! // The worker finishes the attempt: the wait fires one wake for the boss.
//! let attempt = task.current_attempt.unwrap();
//! let done = TaskCompletion { attempt: attempt.id, outcome: TaskOutcome::Succeeded, result: "3".into() };
//! store.complete_task_attempt(&alice, &worker_ep, &done)?;
//! let wait = store.read_agent_wait(&alice, &Acting::Agent(boss_ep.clone()), &wait.id)?;
//! assert_eq!(wait.state, WaitState::Triggered);
//! # Ok(()) }
//! ```

pub mod attempt;
pub mod attention;
pub mod bounds;
pub mod check;
pub mod goal;
pub mod operator;
pub mod stall;
pub mod task;
pub mod wait;

#[cfg(test)]
mod tests;

use ahp_store_sql::Tx;

use crate::clock::Timestamp;
use crate::conversation::admission;
use crate::conversation::{Caller, ConversationResult as Result, Mutation};
use crate::db::Store;

pub use super::ids::{
    ATTENTION_EVENT_ID_PREFIX, GOAL_ID_PREFIX, TASK_ATTEMPT_ID_PREFIX, TASK_ID_PREFIX, WAIT_ID_PREFIX,
};
pub use super::state::{GoalState, TaskAttemptEvent, TaskAttemptState, TaskEvent, TaskState};
pub use crate::conversation::Acting;
pub use attempt::{DELIVERY_UNKNOWN_RESULT, TaskAttempt, TaskCompletion, TaskOutcome};
pub use attention::{AttentionEvent, AttentionKind};
pub use check::{Violation, check_delegation_invariants};
pub use goal::{Goal, GoalCheckpoint, NewGoal, PlanStep, StepStatus};
pub use stall::{
    GoalPlanObservation, MAX_OBSERVATION_GAP, MAX_STALL_QUIET_PERIOD, MIN_STALL_QUIET_PERIOD, STALL_QUIET_PERIOD,
};
pub use task::{AgentTask, NewTask, TaskQuery};
pub use wait::{AgentWait, NewWait, WaitMode, WaitSource, WaitState};

/// The acting party, resolved inside the transaction: its owner principal (digest) and, for an
/// agent, the agent's id.
#[derive(Debug, Clone)]
pub(crate) struct Actor {
    pub(crate) owner: String,
    pub(crate) agent: Option<String>,
}

/// Checks an [`Acting`]'s shape before any transaction.
pub(crate) fn validate_acting(acting: &Acting) -> Result<()> {
    match acting {
        Acting::Human => Ok(()),
        Acting::Agent(a) => a.validate(),
    }
}

/// Resolves `acting` for `caller`: the owner as a human, or an agent admitted through its exact
/// current endpoint and generation (every admission error as in the conversation domain).
pub(crate) fn resolve(conn: &Tx<'_>, caller: &Caller, acting: &Acting, now: Timestamp) -> Result<Actor> {
    let owner = caller.principal().as_str().to_owned();
    match acting {
        Acting::Human => Ok(Actor { owner, agent: None }),
        Acting::Agent(a) => {
            admission::admit(conn, caller, a, now)?;
            Ok(Actor {
                owner,
                agent: Some(a.agent.clone()),
            })
        }
    }
}

impl Store {
    /// Runs the delegation write `op` on the admitted write path ([`Store::admitted`]), each
    /// attempt collecting whom its transaction woke, and reports them with its result
    /// ([`Mutation::woken`]: see [`woken`](crate::conversation::woken)).
    pub(crate) fn waking<T>(&mut self, mut op: impl FnMut(&mut Self) -> Result<Mutation<T>>) -> Result<Mutation<T>> {
        self.admitted(|s| {
            let (m, woken) = crate::conversation::woken::collecting(|| op(s));
            let mut m = m?;
            m.woken = woken;
            Ok(m)
        })
    }
}

/// A stored count as `u64`; negative is a corrupt row.
pub(crate) fn count(table: &'static str, id: &str, v: i64) -> Result<u64> {
    u64::try_from(v)
        .map_err(|_| crate::conversation::ConversationError::corrupt(table, format!("{id}: negative count")))
}
