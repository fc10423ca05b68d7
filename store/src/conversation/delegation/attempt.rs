//! Task attempts: the fenced execution of a task, delivered as an `agent_task_attempt` wake.
//!
//! Starting an attempt fences it to the assignee's attached endpoint and its controller
//! generation (as a wake delivery attempt is) and creates, or coalesces into, the assignee's
//! open wake with the cause `agent_task_attempt(task)`. A task has at most one active attempt.
//!
//! ```text
//! active ──complete (exact id + fence)──► succeeded | failed
//!    │ ── task cancelled ──────────────► cancelled
//!    │ ── endpoint gone, wake before the dispatch fence ──► revoked (task open again)
//!    └─ endpoint gone or wake delivery unknown, after the fence ──► delivery_unknown (task failed)
//! ```
//!
//! **Exact and idempotent.** [`Store::complete_task_attempt`] names the attempt id, and the
//! acting endpoint and generation must be the ones it is fenced to. A retry with the same
//! outcome and result returns the recorded task (`replayed`), checked before the endpoint is
//! admitted, so it recovers across a replacement carrier; a different outcome or result is
//! refused. **Never silently re-run.** Once the wake carrying the attempt has crossed its dispatch
//! fence, losing the endpoint or the wake's delivery outcome makes the attempt
//! `delivery_unknown`: it is never restarted and can never be completed, so its task fails with
//! [`DELIVERY_UNKNOWN_RESULT`], visibly unresolved, and the coordinator decides what to do. The
//! terminalization's consequences — the task's terminal fact for waits, and attention for the
//! task's goal — commit in the same transaction, for a completion and for an unknown outcome
//! alike: nobody waits for ever on a worker that crashed mid-attempt.

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::bounds::{MAX_ATTEMPTS_PER_TASK, MAX_TASK_RESULT_BYTES};
use super::task::{self, AgentTask, TaskRow};
use super::{Acting, attention, resolve, validate_acting, wait};
use crate::clock::Timestamp;
use crate::conversation::admission;
use crate::conversation::audit::{self, AuditKind};
use crate::conversation::bounds;
use crate::conversation::endpoint::AgentActor;
use crate::conversation::idempotency::Mutation;
use crate::conversation::ids::TASK_ATTEMPT_ID_PREFIX;
use crate::conversation::state::{TaskAttemptEvent, TaskAttemptState, TaskEvent};
use crate::conversation::wake::{self, WakeOrigin};
use crate::conversation::{Caller, ConversationError as Error, ConversationResult as Result, Scope};
use crate::db::Store;
use crate::id::new_id;

/// How the assignee finished an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskOutcome {
    /// The work is done; the result is its answer.
    Succeeded,
    /// The work could not be done; the result says why.
    Failed,
}

impl TaskOutcome {
    const fn event(self) -> TaskAttemptEvent {
        match self {
            Self::Succeeded => TaskAttemptEvent::Succeed,
            Self::Failed => TaskAttemptEvent::Fail,
        }
    }
}

/// An attempt's completion, as the assignee sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskCompletion {
    /// The attempt (`tka_…`).
    pub attempt: String,
    /// How it ended.
    pub outcome: TaskOutcome,
    /// Its result text (0 to [`MAX_TASK_RESULT_BYTES`]).
    pub result: String,
}

/// A task attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskAttempt {
    /// `tka_…`.
    pub id: String,
    /// Its task.
    pub task_id: String,
    /// 1 for the first attempt of the task, 2 for the next, …
    pub number: u64,
    /// The assignee.
    pub assignee_agent_id: String,
    /// The endpoint it is fenced to.
    pub endpoint_id: String,
    /// That endpoint's controller generation.
    pub generation: u64,
    /// The wake that carries it to the assignee.
    pub wake_id: String,
    /// Its state.
    pub state: TaskAttemptState,
    /// Its result text, once finished.
    pub result: Option<String>,
    /// When it started.
    pub started_at: Timestamp,
    /// When it left `active`.
    pub finished_at: Option<Timestamp>,
}

pub(crate) const ATTEMPT_COLUMNS: &str =
    "id, task_id, number, assignee_agent_id, endpoint_id, generation, wake_id, state, result, started_at, finished_at";

pub(crate) fn from_row(r: &Row) -> Result<TaskAttempt> {
    let id: String = r.get(0)?;
    let state: String = r.get(7)?;
    let state = state
        .parse()
        .map_err(|e| Error::corrupt("agent_task_attempts", format!("{id}: {e}")))?;
    Ok(TaskAttempt {
        task_id: r.get(1)?,
        number: super::count("agent_task_attempts", &id, r.get(2)?)?,
        assignee_agent_id: r.get(3)?,
        endpoint_id: r.get(4)?,
        generation: super::count("agent_task_attempts", &id, r.get(5)?)?,
        wake_id: r.get(6)?,
        state,
        result: r.get(8)?,
        started_at: Timestamp::from_micros(r.get(9)?),
        finished_at: r.get::<_, Option<i64>>(10)?.map(Timestamp::from_micros),
        id,
    })
}

/// Checks an attempt id's shape before any lookup.
pub(crate) fn check_id(attempt: &str) -> Result<()> {
    bounds::id("attemptId", attempt, TASK_ATTEMPT_ID_PREFIX)
}

/// The newest attempt of `task`.
pub(crate) fn newest(conn: &Tx<'_>, task: &str) -> Result<Option<TaskAttempt>> {
    let sql =
        format!("SELECT {ATTEMPT_COLUMNS} FROM agent_task_attempts WHERE task_id = ?1 ORDER BY number DESC LIMIT 1");
    conn.prepare_cached(&sql)?
        .query_row([task], |r| Ok(from_row(r)))
        .optional()?
        .transpose()
}

fn load(conn: &Tx<'_>, attempt: &str) -> Result<TaskAttempt> {
    let sql = format!("SELECT {ATTEMPT_COLUMNS} FROM agent_task_attempts WHERE id = ?1");
    conn.prepare_cached(&sql)?
        .query_row([attempt], |r| Ok(from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::TaskAttemptNotFound(attempt.to_owned())))
}

/// Every attempt not known to be finished that matches `filter` (`endpoint_id = ?1` or
/// `wake_id = ?1` or `task_id = ?1`), parsed: an unknown state fails closed instead of being
/// skipped by a filter on `active`.
fn unfinished(conn: &Tx<'_>, column: &str, value: &str) -> Result<Vec<TaskAttempt>> {
    let sql = format!(
        "SELECT {ATTEMPT_COLUMNS} FROM agent_task_attempts
         WHERE {column} = ?1 AND state NOT IN ('succeeded', 'failed', 'cancelled', 'revoked', 'delivery_unknown')"
    );
    conn.prepare_cached(&sql)?
        .query_map([value], |r| Ok(from_row(r)))?
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .collect()
}

/// Moves attempt `a` along `event` (compare-and-set from `active`) and audits it.
fn end(tx: &Tx<'_>, a: &TaskAttempt, event: TaskAttemptEvent, result: Option<&str>, now: Timestamp) -> Result<()> {
    let Some(to) = a.state.after(event) else {
        return Err(Error::InvalidTaskAttemptState {
            attempt: a.id.clone(),
            operation: "end",
            state: a.state,
        });
    };
    let changed = tx
        .prepare_cached(
            "UPDATE agent_task_attempts SET state = ?2, result = ?3, finished_at = ?4 WHERE id = ?1 AND state = 'active'",
        )?
        .execute((&a.id, to.as_str(), result, now.as_micros()))?;
    if changed != 1 {
        return Err(Error::corrupt(
            "agent_task_attempts",
            format!("{} moved under its own write transaction", a.id),
        ));
    }
    audit::record(
        tx,
        AuditKind::TaskAttemptEnded,
        Some(&a.assignee_agent_id),
        None,
        json!({ "taskId": a.task_id, "attemptId": a.id, "state": to.as_str() }),
        now,
    )
}

/// Starts an attempt of the open task `row`: fenced to the assignee's attached endpoint (a
/// wake-capable one, if host-held) and generation, carried by the assignee's open wake (created if there is none).
pub(crate) fn start(tx: &Tx<'_>, row: &TaskRow, now: Timestamp) -> Result<TaskAttempt> {
    let t = &row.task;
    if t.state.after(TaskEvent::Start).is_none() {
        return Err(Error::InvalidTaskState {
            task: t.id.clone(),
            operation: "start an attempt of",
            state: t.state,
        });
    }
    if t.attempt_count >= MAX_ATTEMPTS_PER_TASK {
        return Err(Error::LimitReached {
            what: "attempts per task",
            limit: MAX_ATTEMPTS_PER_TASK,
        });
    }
    let ep: Option<(String, i64)> = tx
        .prepare_cached(
            // A host-held endpoint (a transfer's agent) acts only in the turns its wakes start,
            // so it must be wake-capable too: without a carrier (a component that takes no
            // turns) or once its transfer is insolvent, the attempt's wake would never be
            // claimed. A client's endpoint completes attempts it reads, wakes or not.
            "SELECT id, generation FROM agent_endpoints
             WHERE agent_id = ?1 AND state = 'attached' AND (host_held = 0 OR wake_capable = 1)
               AND lease_expires_at > ?2",
        )?
        .query_row((&t.assignee_agent_id, now.as_micros()), |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((endpoint, generation)) = ep else {
        return Err(Error::AssigneeUnavailable(t.assignee_agent_id.clone()));
    };
    let wake = wake::coalesce_cause(
        tx,
        &t.assignee_agent_id,
        &WakeOrigin::AgentTaskAttempt(t.id.clone()),
        now,
    )?;
    let id = new_id(TASK_ATTEMPT_ID_PREFIX);
    tx.prepare_cached(
        "INSERT INTO agent_task_attempts (id, task_id, number, assignee_agent_id, endpoint_id, generation, wake_id, state, started_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'active', ?8)",
    )?
    .execute((
        &id,
        &t.id,
        (t.attempt_count + 1) as i64,
        &t.assignee_agent_id,
        &endpoint,
        generation,
        &wake,
        now.as_micros(),
    ))?;
    task::transition(tx, &t.id, t.state, TaskEvent::Start, None, now)?;
    audit::record(
        tx,
        AuditKind::TaskAttemptStarted,
        Some(&t.assignee_agent_id),
        None,
        json!({ "taskId": t.id, "attemptId": id, "endpointId": endpoint, "controllerGeneration": generation, "wakeId": wake }),
        now,
    )?;
    load(tx, &id)
}

/// Cancels `task`'s active attempt, if any (the task is being cancelled).
pub(crate) fn cancel_active(tx: &Tx<'_>, task: &str, now: Timestamp) -> Result<()> {
    for a in unfinished(tx, "task_id", task)? {
        end(tx, &a, TaskAttemptEvent::Cancel, None, now)?;
    }
    Ok(())
}

/// The endpoint `endpoint` stopped being current (replaced, detached, expired): each active
/// attempt fenced to it is revoked if its wake has not crossed the dispatch fence (nothing ran;
/// the task is open again), and otherwise becomes `delivery_unknown` (the task fails:
/// [`end_unknown`]).
pub(crate) fn endpoint_retired(tx: &Tx<'_>, endpoint: &str, now: Timestamp) -> Result<()> {
    for a in unfinished(tx, "endpoint_id", endpoint)? {
        let w = wake::load_wake(tx, &a.wake_id)?;
        if matches!(
            w.state,
            crate::conversation::WakeState::Pending | crate::conversation::WakeState::Claimed
        ) {
            end(tx, &a, TaskAttemptEvent::Revoke, None, now)?;
            let row = task::load(tx, &a.task_id)?;
            task::transition(tx, &a.task_id, row.task.state, TaskEvent::Revoke, None, now)?;
        } else {
            end_unknown(tx, &a, now)?;
        }
    }
    Ok(())
}

/// The wake `wake` became delivery-unknown after its fence: each active attempt it carries
/// becomes `delivery_unknown`, never re-run, and its task fails ([`end_unknown`]).
pub(crate) fn wake_delivery_unknown(tx: &Tx<'_>, wake: &str, now: Timestamp) -> Result<()> {
    for a in unfinished(tx, "wake_id", wake)? {
        end_unknown(tx, &a, now)?;
    }
    Ok(())
}

/// The result a task records when its attempt's outcome became unknown after the dispatch
/// fence ([`TaskAttemptState::DeliveryUnknown`]): the task `failed`, and whoever delegated it
/// decides what to do, knowing the work may have been done.
pub const DELIVERY_UNKNOWN_RESULT: &str = "delivery unknown: the assignee's turn for this attempt began, but its \
     outcome could not be confirmed (its host stopped or lost the agent mid-turn); the work may or may not have \
     been done, and it is never run again by itself";

/// Ends the active attempt `a` as `delivery_unknown`. Such an attempt is never re-run and can
/// never be completed, so its task could not end by itself any more: the task fails with
/// [`DELIVERY_UNKNOWN_RESULT`], a terminal fact that reaches the waits over it and its goal's
/// attention in this same transaction, as a completion does, so the coordinator that
/// delegated it is woken instead of waiting for ever.
fn end_unknown(tx: &Tx<'_>, a: &TaskAttempt, now: Timestamp) -> Result<()> {
    end(tx, a, TaskAttemptEvent::Unknown, None, now)?;
    let row = task::load(tx, &a.task_id)?;
    let to = task::transition(
        tx,
        &a.task_id,
        row.task.state,
        TaskEvent::Fail,
        Some(DELIVERY_UNKNOWN_RESULT),
        now,
    )?;
    attention::on_attempt_terminal(tx, &row, &a.id, to, now)?;
    wait::on_task_terminal(tx, &a.task_id, now)
}

/// Loads `attempt` if it is `agent`'s, which the caller's principal owns; otherwise
/// [`Error::TaskAttemptNotFound`].
fn load_for_assignee(conn: &Tx<'_>, caller: &Caller, agent: &str, attempt: &str) -> Result<TaskAttempt> {
    let sql = format!(
        "SELECT {ATTEMPT_COLUMNS} FROM agent_task_attempts
         WHERE id = ?1 AND assignee_agent_id = ?2
           AND EXISTS (SELECT 1 FROM agents WHERE agents.id = ?2 AND agents.owner_principal = ?3)"
    );
    conn.prepare_cached(&sql)?
        .query_row((attempt, agent, caller.principal().as_str()), |r| Ok(from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::TaskAttemptNotFound(attempt.to_owned())))
}

impl Store {
    /// Starts an attempt of the open task `task`, fenced to its assignee's attached endpoint and
    /// generation; the assignee gets (or its open wake coalesces) a wake with the cause
    /// `agent_task_attempt(task)`.
    ///
    /// # Errors
    ///
    /// [`Error::TaskNotFound`]; [`Error::InvalidTaskState`] unless the task is open (a task whose
    /// attempt's delivery is unknown has failed, and is never restarted: create another);
    /// [`Error::AssigneeUnavailable`];
    /// [`Error::LimitReached`] at [`MAX_ATTEMPTS_PER_TASK`]; [`Error::MissingScope`]; the endpoint
    /// admission errors.
    #[cfg(any(test, feature = "testing"))]
    pub fn start_task_attempt(&mut self, caller: &Caller, acting: &Acting, task: &str) -> Result<Mutation<AgentTask>> {
        caller.require(Scope::Manage)?;
        validate_acting(acting)?;
        task::check_id(task)?;
        self.waking(|s| {
            let (tx, now) = s.begin_immediate()?;
            let actor = resolve(&tx, caller, acting, now)?;
            let row = task::load_visible(&tx, &actor, task)?;
            start(&tx, &row, now)?;
            let task = task::full(&tx, task::load(&tx, task)?)?;
            tx.commit()?;
            Ok(Mutation::changed(task))
        })
    }

    /// Finishes the attempt `done.attempt` as its assignee, through the exact endpoint and
    /// generation it is fenced to: the attempt and its task become `succeeded` or `failed` with
    /// the result text, and in the same transaction the task's terminal fact reaches every wait
    /// over it (a wait whose condition now holds fires its one wake) and, when the task serves an
    /// active goal, attention is recorded ([`attention`]). An exact retry (same
    /// outcome and result) returns the task unchanged with `replayed`.
    ///
    /// # Errors
    ///
    /// [`Error::TaskAttemptNotFound`] for an attempt not the acting agent's;
    /// [`Error::InvalidTaskAttemptState`] for one that is no longer active, or a retry with a
    /// different outcome or result; [`Error::TaskAttemptFenced`] when acting through another
    /// endpoint or generation; [`Error::InvalidInput`] for a result past
    /// [`MAX_TASK_RESULT_BYTES`]; [`Error::MissingScope`]; the endpoint admission errors.
    pub fn complete_task_attempt(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        done: &TaskCompletion,
    ) -> Result<Mutation<AgentTask>> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        check_id(&done.attempt)?;
        bounds::text("result", &done.result, MAX_TASK_RESULT_BYTES, true)?;
        self.waking(|s| {
            let (tx, now) = s.begin_immediate()?;
            admission::refuse_host_held(&tx, caller, actor)?;
            let a = load_for_assignee(&tx, caller, &actor.agent, &done.attempt)?;
            let wanted = TaskAttemptState::Active.after(done.outcome.event());
            if a.state != TaskAttemptState::Active {
                if Some(a.state) == wanted && a.result.as_deref() == Some(done.result.as_str()) {
                    let task = task::full(&tx, task::load(&tx, &a.task_id)?)?;
                    return Ok(Mutation::replayed(task));
                }
                return Err(Error::InvalidTaskAttemptState {
                    attempt: a.id,
                    operation: "complete",
                    state: a.state,
                });
            }
            admission::admit(&tx, caller, actor, now)?;
            if a.endpoint_id != actor.endpoint || a.generation != actor.generation {
                return Err(Error::TaskAttemptFenced {
                    attempt: a.id,
                    endpoint: a.endpoint_id,
                    generation: a.generation,
                });
            }
            end(&tx, &a, done.outcome.event(), Some(&done.result), now)?;
            let row = task::load(&tx, &a.task_id)?;
            let event = match done.outcome {
                TaskOutcome::Succeeded => TaskEvent::Succeed,
                TaskOutcome::Failed => TaskEvent::Fail,
            };
            let to = task::transition(&tx, &a.task_id, row.task.state, event, Some(&done.result), now)?;
            attention::on_attempt_terminal(&tx, &row, &a.id, to, now)?;
            wait::on_task_terminal(&tx, &a.task_id, now)?;
            let task = task::full(&tx, task::load(&tx, &a.task_id)?)?;
            tx.commit()?;
            Ok(Mutation::changed(task))
        })
    }

    /// Every attempt of `task`, oldest first (at most [`MAX_ATTEMPTS_PER_TASK`]).
    ///
    /// # Errors
    ///
    /// [`Error::TaskNotFound`]; [`Error::MissingScope`]; the endpoint admission errors.
    pub fn task_attempts(&mut self, caller: &Caller, acting: &Acting, task: &str) -> Result<Vec<TaskAttempt>> {
        caller.require(Scope::Read)?;
        validate_acting(acting)?;
        task::check_id(task)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            let actor = resolve(&tx, caller, acting, now)?;
            task::load_visible(&tx, &actor, task)?;
            let sql = format!("SELECT {ATTEMPT_COLUMNS} FROM agent_task_attempts WHERE task_id = ?1 ORDER BY number");
            tx.prepare_cached(&sql)?
                .query_map([task], |r| Ok(from_row(r)))?
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .collect()
        })
    }
}
