//! Delegation: hand work to other agents of the same owner and sleep until it is done.
//!
//! A coordinating turn creates a [`Task`] for another agent with [`create_task`] (its first
//! attempt starts at once and wakes the assignee), registers a one-shot [`Wait`] over the tasks
//! with [`register_wait`] (`any` or `all`, 1..[`MAX_SOURCES`] of them), and ends. When the
//! wait's condition holds the host runs one turn whose wake origin is
//! [`WakeOrigin::Wait`](crate::conversations::WakeOrigin); [`fired_wait`] reads it, and
//! [`get_task`] each task's result.
//!
//! The assignee's turn runs with origin
//! [`WakeOrigin::AgentTaskAttempt`](crate::conversations::WakeOrigin): [`assigned_task`] reads
//! the task and its active attempt, and [`complete_attempt`] finishes it with a result, which
//! becomes the task's.
//!
//! [`create_goal`], [`checkpoint_goal`] and [`complete_goal`] keep durable workflow truth (a
//! fixed completion intent, a plan changed only by revision-fenced checkpoints); the goal's
//! controller gets an `attention-event` wake when a task of the goal ends
//! ([`get_attention_event`]).
//!
//! Every call needs a conversation turn ([`Error::NoWake`] outside one). The writes that create
//! something take their identity from the turn's wake, so a turn the host ever runs again
//! resolves to what it already created instead of creating it twice. One turn makes at most
//! [`MAX_CALLS`] calls, [`MAX_WRITES`] of them writes ([`Error::TooManyCalls`]).
//!
//! A coordinator's two turns:
//!
//! ```no_run
//! use ahp_guest::conversations::{self, WakeOrigin};
//! use ahp_guest::delegation::{self, NewTask, WaitMode};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let wake = conversations::wake().ok_or("not a turn")?;
//! match wake.origin {
//!     WakeOrigin::Message => {
//!         let task = delegation::create_task(&NewTask::new("agt_worker", "count words", "one two three"))?;
//!         let wait = delegation::register_wait(&[task.id], WaitMode::All)?;
//!         // Keep `wait.id` in the checkpoint: the next turn is woken with it.
//!         println!("waiting on {}", wait.id);
//!     }
//!     WakeOrigin::Wait(id) => {
//!         for source in delegation::read_wait(&id)?.sources {
//!             let task = delegation::get_task(&source.task_id)?;
//!             println!("{}: {}", task.title, task.result.unwrap_or_default());
//!         }
//!     }
//!     _ => {}
//! }
//! # Ok(()) }
//! ```
//!
//! And the worker's:
//!
//! ```no_run
//! use ahp_guest::delegation::{self, Error, Outcome};
//!
//! if let Some((task, attempt)) = delegation::assigned_task()? {
//!     let words = task.instructions.split_whitespace().count();
//!     match delegation::complete_attempt(&attempt, Outcome::Succeeded, &format!("{words} words")) {
//!         Ok(_) => {}
//!         // The task was cancelled meanwhile: nothing to hand in.
//!         Err(Error::Refused(why)) => eprintln!("not accepted: {why}"),
//!         Err(e) => return Err(e),
//!     }
//! }
//! # Ok::<(), Error>(())
//! ```

use crate::conversations::{self, WakeOrigin};
use crate::pages::{Pages, RepeatedPage, after_last_key};
use crate::wit::ahp::agent::delegation as raw;

pub use raw::{
    Attempt, AttemptState, AttentionEvent, Goal, GoalState, NewGoal, NewTask, Outcome, PlanStep, StepStatus, Task,
    TaskRole, TaskState, Wait, WaitMode, WaitSource, WaitState,
};

/// The most tasks one wait may be over (the host's bound).
pub const MAX_SOURCES: usize = 8;

/// The largest page [`list_tasks_page`] accepts (the host's bound).
pub const MAX_PAGE: u32 = 64;

/// The most delegation calls one turn may make (the host's bound).
pub const MAX_CALLS: u32 = 1024;

/// The most delegation writes (creating, finishing, cancelling, checkpointing) one turn may
/// make (the host's bound): a coordinator fanning out to `n` workers per question, plus one
/// wait, handles at most `MAX_WRITES / (n + 1)` questions in one turn.
pub const MAX_WRITES: u32 = 64;

/// The largest instructions and result texts (64 KiB, the host's bound).
pub const MAX_TEXT_BYTES: usize = 64 * 1024;

/// Why a delegation call was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not inside a conversation turn (e.g. during `resume`): there is no wake to act under.
    NoWake,
    /// No such task, attempt, wait, goal or event that this agent may see (exactly like a
    /// missing id).
    NotFound,
    /// An argument is malformed (an id, an empty or too large text, 0 or more than
    /// [`MAX_SOURCES`] sources); the payload says which rule it broke.
    Invalid(String),
    /// The page asked for is larger than the host serves; the payload is the largest allowed.
    LimitTooLarge(u32),
    /// A checkpoint named a revision that is no longer the goal's; the payload is the goal's
    /// current revision (read it, merge, try again).
    RevisionConflict(u64),
    /// The operation does not apply now (the task is not running, the attempt is not this
    /// agent's active one, the assignee has no endpoint, the goal is closed, a bound is
    /// reached); the payload says why.
    Refused(String),
    /// This turn made as many delegation calls (or writes) as one turn may; the payload is that
    /// bound.
    TooManyCalls(u32),
    /// The host could not read or write its database.
    Unavailable(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoWake => f.write_str("not in a conversation turn: there is no wake to act under"),
            Self::NotFound => f.write_str("no such task, attempt, wait, goal or event that this agent may see"),
            Self::Invalid(why) => write!(f, "invalid argument: {why}"),
            Self::LimitTooLarge(max) => write!(f, "a task page may hold at most {max} entries"),
            Self::RevisionConflict(current) => {
                write!(f, "the goal moved on: its revision is now {current}")
            }
            Self::Refused(why) => write!(f, "delegation refused: {why}"),
            Self::TooManyCalls(max) => write!(
                f,
                "this turn already made {max} delegation calls, the most one turn allows"
            ),
            Self::Unavailable(why) => write!(f, "delegation is unavailable: {why}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<raw::Error> for Error {
    fn from(e: raw::Error) -> Self {
        match e {
            raw::Error::NoWake => Self::NoWake,
            raw::Error::NotFound => Self::NotFound,
            raw::Error::Invalid(why) => Self::Invalid(why),
            raw::Error::LimitTooLarge(max) => Self::LimitTooLarge(max),
            raw::Error::RevisionConflict(current) => Self::RevisionConflict(current),
            raw::Error::Refused(why) => Self::Refused(why),
            raw::Error::TooManyCalls(max) => Self::TooManyCalls(max),
            raw::Error::Unavailable(why) => Self::Unavailable(why),
        }
    }
}

impl NewTask {
    /// A task for `assignee` (`agt_…`) titled `title` asking `instructions`, outside any goal.
    pub fn new(assignee: &str, title: &str, instructions: &str) -> Self {
        Self {
            assignee: assignee.to_owned(),
            title: title.to_owned(),
            instructions: instructions.to_owned(),
            goal_id: None,
        }
    }

    /// The same task, serving goal `goal_id` (`goal_…`).
    pub fn in_goal(mut self, goal_id: &str) -> Self {
        self.goal_id = Some(goal_id.to_owned());
        self
    }
}

impl TaskState {
    /// Whether the task has ended (`succeeded`, `failed` or `cancelled`): no attempt will
    /// change it again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

/// Creates a task for another agent of the same owner and starts its first attempt, which
/// wakes the assignee. Should this turn run again, the same call returns the same task.
///
/// # Errors
///
/// [`Error::Invalid`] for a malformed assignee id, an empty or too long title, instructions over
/// [`MAX_TEXT_BYTES`]; [`Error::NotFound`] for an agent this one may not hand work to;
/// [`Error::Refused`] when the assignee has no endpoint or too many open tasks;
/// [`Error::TooManyCalls`], [`Error::NoWake`], [`Error::Unavailable`].
pub fn create_task(task: &NewTask) -> Result<Task, Error> {
    Ok(raw::create_task(task)?)
}

/// The task `task_id` (`tsk_…`), as this agent may see it.
///
/// # Errors
///
/// [`Error::NotFound`], [`Error::Invalid`] for a malformed id, [`Error::NoWake`],
/// [`Error::TooManyCalls`], [`Error::Unavailable`].
pub fn get_task(task_id: &str) -> Result<Task, Error> {
    Ok(raw::get_task(task_id)?)
}

/// For a turn woken by a task attempt: the task to work on and the id of the attempt to finish
/// (`tka_…`). `None` when this turn runs for anything else, or when the attempt is no longer
/// active (its task was cancelled, or a crash left its delivery unknown): there is nothing to
/// hand in.
///
/// # Errors
///
/// [`Error::NoWake`] outside a turn, and as [`get_task`].
pub fn assigned_task() -> Result<Option<(Task, String)>, Error> {
    let wake = conversations::wake().ok_or(Error::NoWake)?;
    let WakeOrigin::AgentTaskAttempt(task_id) = wake.origin else {
        return Ok(None);
    };
    let task = get_task(&task_id)?;
    let active = task
        .current_attempt
        .as_ref()
        .filter(|a| a.state == AttemptState::Active)
        .map(|a| a.id.clone());
    Ok(active.map(|attempt| (task, attempt)))
}

/// One page of this agent's tasks in `role`, optionally only those in `state`, in id order
/// after the task `after` (exclusive; `None` starts at the beginning), at most `limit`.
///
/// # Errors
///
/// [`Error::LimitTooLarge`] above [`MAX_PAGE`], [`Error::NoWake`], [`Error::TooManyCalls`],
/// [`Error::Unavailable`].
pub fn list_tasks_page(
    role: TaskRole,
    state: Option<TaskState>,
    after: Option<&str>,
    limit: u32,
) -> Result<Vec<Task>, Error> {
    Ok(raw::list_tasks(role, state, after, limit)?)
}

/// All of this agent's tasks in `role` (optionally only those in `state`), in id order, fetched
/// [`MAX_PAGE`] at a time as the iterator advances. Like [`conversations::inbox`], an error is
/// the last item.
///
/// ```no_run
/// use ahp_guest::delegation::{self, TaskRole, TaskState};
///
/// let open = delegation::tasks(TaskRole::Created, Some(TaskState::Running)).count();
/// println!("{open} of my tasks are still running");
/// ```
pub fn tasks(role: TaskRole, state: Option<TaskState>) -> Tasks {
    // Ids only move forward: a page that does not pass the cursor ends the read unserved, so a
    // host that repeats its page cannot hand the guest a task twice.
    Tasks {
        role,
        state,
        pages: Pages::new(None, |after, page| {
            after_last_key(after, page.last().map(|t| Some(t.id.clone())), RepeatedPage::Dropped)
        }),
    }
}

/// The iterator [`tasks`] returns.
#[derive(Debug)]
pub struct Tasks {
    role: TaskRole,
    state: Option<TaskState>,
    pages: Pages<Task, Option<String>>,
}

impl Iterator for Tasks {
    type Item = Result<Task, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let (role, state) = (self.role, self.state);
        self.pages
            .next(|after| list_tasks_page(role, state, after.as_deref(), MAX_PAGE))
    }
}

/// Finishes this agent's active attempt `attempt_id` (`tka_…`) with `outcome` and `result` (at
/// most [`MAX_TEXT_BYTES`]) and returns the task, now `succeeded` or `failed`. Finishing it
/// again with the same outcome and result returns the task unchanged.
///
/// # Errors
///
/// [`Error::Refused`] when the attempt is not this agent's active one (its task was cancelled,
/// or it was finished differently), [`Error::Invalid`] for a result over the bound,
/// [`Error::NotFound`], [`Error::NoWake`], [`Error::TooManyCalls`], [`Error::Unavailable`].
pub fn complete_attempt(attempt_id: &str, outcome: Outcome, result: &str) -> Result<Task, Error> {
    Ok(raw::complete_attempt(attempt_id, outcome, result)?)
}

/// Cancels a task this agent created (or whose goal it controls); its active attempt, if any,
/// is cancelled with it. Cancelling a cancelled task changes nothing.
///
/// # Errors
///
/// [`Error::Refused`] for a finished task, [`Error::NotFound`], [`Error::NoWake`],
/// [`Error::TooManyCalls`], [`Error::Unavailable`].
pub fn cancel_task(task_id: &str) -> Result<Task, Error> {
    Ok(raw::cancel_task(task_id)?)
}

/// Registers a wait of this agent over `sources` (1..[`MAX_SOURCES`] distinct task ids): `any`
/// fires at the first task's end, `all` at the last's. It fires exactly one turn, with wake
/// origin `wait` and the returned wait's id — at once (after this turn) if its condition
/// already holds.
///
/// # Errors
///
/// [`Error::Invalid`] for no source, more than [`MAX_SOURCES`] or a repeated one,
/// [`Error::NotFound`] for a task this agent may not see, [`Error::NoWake`],
/// [`Error::TooManyCalls`], [`Error::Unavailable`].
pub fn register_wait(sources: &[String], mode: WaitMode) -> Result<Wait, Error> {
    Ok(raw::register_wait(sources, mode, None)?)
}

/// As [`register_wait`], scoped to goal `goal_id`: while it waits, the tasks' ends wake this
/// agent through the wait instead of the goal controller's attention events.
///
/// # Errors
///
/// As [`register_wait`], and [`Error::Refused`] for a closed goal.
pub fn register_goal_wait(sources: &[String], mode: WaitMode, goal_id: &str) -> Result<Wait, Error> {
    Ok(raw::register_wait(sources, mode, Some(goal_id))?)
}

/// The wait `wait_id` (`wait_…`): its state and its tasks' states.
///
/// # Errors
///
/// [`Error::NotFound`] (another agent's waits included), [`Error::NoWake`],
/// [`Error::TooManyCalls`], [`Error::Unavailable`].
pub fn read_wait(wait_id: &str) -> Result<Wait, Error> {
    Ok(raw::read_wait(wait_id)?)
}

/// For a turn woken by a wait: the wait that fired. `None` when this turn runs for anything
/// else. (Causes coalesce into one wake and its origin is the first: a turn that also has
/// waits of its own pending should read them with [`read_wait`] whatever the origin.)
///
/// # Errors
///
/// [`Error::NoWake`] outside a turn, and as [`read_wait`].
pub fn fired_wait() -> Result<Option<Wait>, Error> {
    let wake = conversations::wake().ok_or(Error::NoWake)?;
    match wake.origin {
        WakeOrigin::Wait(id) => read_wait(&id).map(Some),
        _ => Ok(None),
    }
}

/// Cancels a waiting wait: it will not fire. Cancelling a cancelled one changes nothing.
///
/// # Errors
///
/// [`Error::Refused`] for a wait that already fired, [`Error::NotFound`], [`Error::NoWake`],
/// [`Error::TooManyCalls`], [`Error::Unavailable`].
pub fn cancel_wait(wait_id: &str) -> Result<Wait, Error> {
    Ok(raw::cancel_wait(wait_id)?)
}

/// Creates a goal, with this agent as its creator.
///
/// # Errors
///
/// [`Error::Invalid`] for an empty or too long title or completion intent, or more than 32 plan
/// steps; [`Error::NotFound`] for a controller this agent may not name; [`Error::NoWake`],
/// [`Error::TooManyCalls`], [`Error::Unavailable`].
pub fn create_goal(goal: &NewGoal) -> Result<Goal, Error> {
    Ok(raw::create_goal(goal)?)
}

/// The goal `goal_id` (`goal_…`).
///
/// # Errors
///
/// [`Error::NotFound`], [`Error::NoWake`], [`Error::TooManyCalls`], [`Error::Unavailable`].
pub fn get_goal(goal_id: &str) -> Result<Goal, Error> {
    Ok(raw::get_goal(goal_id)?)
}

/// Replaces the plan and note of an active goal if its revision is still `expected_revision`,
/// and returns the goal at its next revision.
///
/// ```no_run
/// use ahp_guest::delegation::{self, Error};
///
/// let goal = delegation::get_goal("goal_0123")?;
/// let mut plan = goal.plan.clone();
/// plan.truncate(1);
/// match delegation::checkpoint_goal(&goal.id, goal.revision, &plan, "first step only") {
///     Ok(next) => println!("revision {}", next.revision),
///     Err(Error::RevisionConflict(now)) => println!("someone checkpointed first: revision {now}"),
///     Err(e) => return Err(e),
/// }
/// # Ok::<(), Error>(())
/// ```
///
/// # Errors
///
/// [`Error::RevisionConflict`] with the current revision, [`Error::Refused`] for a closed goal,
/// [`Error::Invalid`] for a plan or note over the bounds, [`Error::NotFound`],
/// [`Error::NoWake`], [`Error::TooManyCalls`], [`Error::Unavailable`].
pub fn checkpoint_goal(goal_id: &str, expected_revision: u64, plan: &[PlanStep], note: &str) -> Result<Goal, Error> {
    Ok(raw::checkpoint_goal(goal_id, expected_revision, plan, note)?)
}

/// Completes an active goal this agent created or controls. Completing a completed goal
/// changes nothing.
///
/// # Errors
///
/// [`Error::Refused`] for an abandoned goal, [`Error::NotFound`], [`Error::NoWake`],
/// [`Error::TooManyCalls`], [`Error::Unavailable`].
pub fn complete_goal(goal_id: &str) -> Result<Goal, Error> {
    Ok(raw::complete_goal(goal_id)?)
}

/// The attention event `event_id`: for a turn woken by one, which task of which goal ended and
/// how.
///
/// # Errors
///
/// [`Error::NotFound`], [`Error::NoWake`], [`Error::TooManyCalls`], [`Error::Unavailable`].
pub fn get_attention_event(event_id: &str) -> Result<AttentionEvent, Error> {
    Ok(raw::get_attention_event(event_id)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_says_what_went_wrong() {
        let cases = [
            (
                raw::Error::NoWake,
                "not in a conversation turn: there is no wake to act under",
            ),
            (
                raw::Error::NotFound,
                "no such task, attempt, wait, goal or event that this agent may see",
            ),
            (raw::Error::Invalid("9 sources".into()), "invalid argument: 9 sources"),
            (raw::Error::LimitTooLarge(64), "a task page may hold at most 64 entries"),
            (
                raw::Error::RevisionConflict(7),
                "the goal moved on: its revision is now 7",
            ),
            (
                raw::Error::Refused("task is cancelled".into()),
                "delegation refused: task is cancelled",
            ),
            (
                raw::Error::TooManyCalls(64),
                "this turn already made 64 delegation calls, the most one turn allows",
            ),
            (
                raw::Error::Unavailable("disk full".into()),
                "delegation is unavailable: disk full",
            ),
        ];
        for (raw, message) in cases {
            assert_eq!(Error::from(raw).to_string(), message);
        }
    }

    #[test]
    fn terminal_states_are_the_three_ends() {
        let terminal: Vec<TaskState> = [
            TaskState::Open,
            TaskState::Running,
            TaskState::Succeeded,
            TaskState::Failed,
            TaskState::Cancelled,
        ]
        .into_iter()
        .filter(|s| s.is_terminal())
        .collect();
        assert_eq!(
            terminal,
            [TaskState::Succeeded, TaskState::Failed, TaskState::Cancelled]
        );
    }

    #[test]
    fn a_new_task_is_outside_any_goal_until_given_one() {
        let task = NewTask::new("agt_w", "count", "one two");
        assert_eq!(task.goal_id, None);
        assert_eq!(task.in_goal("goal_g").goal_id.as_deref(), Some("goal_g"));
    }
}
