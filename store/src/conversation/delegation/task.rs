//! Agent tasks: planned durable work for an agent of the same owner.
//!
//! A task is created by an agent (or the owner, as a human) for an assignee agent owned by the
//! same principal, optionally correlated with a goal. Its title and instructions are bounded,
//! and so is the number of unfinished tasks an agent may be assigned. Creation is idempotent
//! (principal-scoped key). With [`NewTask::start`] its first attempt starts in the same
//! transaction ([`attempt`]).
//!
//! ```text
//! open ──start──► running ──succeed──► succeeded
//!  ▲                 │ └────fail─────► failed
//!  └────revoke───────┤
//! open | running ──cancel──► cancelled
//! ```
//!
//! `revoke` is the assignee's endpoint going away before the attempt's wake crossed the dispatch
//! fence: nothing ran, so the task may be started again. After the fence an unresolved attempt
//! becomes `delivery_unknown`, and the task `fail`s with
//! [`DELIVERY_UNKNOWN_RESULT`](attempt::DELIVERY_UNKNOWN_RESULT) (it is never re-run; its waits
//! and its goal's attention see the failure). Cancelling is desired-state idempotent and counts as
//! the task's terminal fact for waits; it makes no attention event (only an attempt's
//! terminalization does).

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::Serialize;
use serde_json::json;

use super::attempt::{self, TaskAttempt};
use super::bounds::{MAX_OPEN_TASKS_PER_AGENT, MAX_TASK_INSTRUCTIONS_BYTES, MAX_TITLE_BYTES};
use super::{Acting, Actor, goal, resolve, validate_acting, wait};
use crate::clock::Timestamp;
use crate::conversation::audit::{self, AuditKind};
use crate::conversation::bounds;
use crate::conversation::idempotency::{Check, IdempotencyKey, Mutation, Operation, validate_key};
use crate::conversation::ids::TASK_ID_PREFIX;
use crate::conversation::mcp_task::{self, Awaited, McpTask, McpTaskStatus};
use crate::conversation::state::{TaskEvent, TaskState};
use crate::conversation::{Caller, ConversationError as Error, ConversationResult as Result, Scope, agent};
use crate::db::Store;
use crate::id::new_id;

/// A task to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewTask {
    /// The agent to do it (`agt_…`), owned by the caller's principal.
    pub assignee: String,
    /// A short title (1 to [`MAX_TITLE_BYTES`]).
    pub title: String,
    /// What to do (1 to [`MAX_TASK_INSTRUCTIONS_BYTES`]).
    pub instructions: String,
    /// The goal it serves (`goal_…`), which the acting party can see and which is active.
    pub goal: Option<String>,
    /// Start its first attempt in the same transaction (the assignee needs an attached endpoint).
    pub start: bool,
}

impl NewTask {
    fn validate(&self) -> Result<()> {
        agent::check_id(&self.assignee)?;
        bounds::text("title", &self.title, MAX_TITLE_BYTES, false)?;
        bounds::text("instructions", &self.instructions, MAX_TASK_INSTRUCTIONS_BYTES, false)?;
        if let Some(g) = &self.goal {
            goal::check_id(g)?;
        }
        Ok(())
    }
}

/// A task as its owner and its agents see it (never the owner's principal digest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentTask {
    /// `tsk_…`.
    pub id: String,
    /// The agent that created it; `None` when the owner created it as a human.
    pub creator_agent_id: Option<String>,
    /// The agent that does it.
    pub assignee_agent_id: String,
    /// The goal it serves.
    pub goal_id: Option<String>,
    /// Its title.
    pub title: String,
    /// Its instructions.
    pub instructions: String,
    /// Its state.
    pub state: TaskState,
    /// The finishing attempt's result text (set when succeeded or failed).
    pub result: Option<String>,
    /// Attempts started so far.
    pub attempt_count: u64,
    /// Its newest attempt, if any.
    pub current_attempt: Option<TaskAttempt>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it reached a terminal state.
    pub terminal_at: Option<Timestamp>,
}

/// Filters of [`Store::list_agent_tasks`], applied inside what the acting party can see.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskQuery {
    /// Only tasks assigned to this agent.
    pub assignee: Option<String>,
    /// Only tasks this agent created.
    pub creator: Option<String>,
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// Only tasks of this goal.
    pub goal: Option<String>,
    /// Exclusive cursor: tasks with a larger id.
    pub after: Option<String>,
}

/// The raw row: the task without its attempt, plus its owner.
#[derive(Debug, Clone)]
pub(crate) struct TaskRow {
    pub(crate) owner: String,
    pub(crate) task: AgentTask,
}

pub(crate) const TASK_COLUMNS: &str = "id, owner_principal, creator_agent_id, assignee_agent_id, goal_id, title, instructions, state, result, attempt_count, created_at, updated_at, terminal_at";

/// Which tasks an actor sees: the owner all of its own; an agent those it created, is assigned,
/// or whose goal it controls. Binds `?1` owner and `?2` agent (NULL for the owner).
pub(crate) const VISIBLE: &str =
    "owner_principal = ?1 AND (?2 IS NULL OR creator_agent_id = ?2 OR assignee_agent_id = ?2
     OR goal_id IN (SELECT id FROM goals WHERE controller_agent_id = ?2))";

pub(crate) fn from_row(r: &Row) -> Result<TaskRow> {
    let id: String = r.get(0)?;
    let state: String = r.get(7)?;
    let state = state
        .parse()
        .map_err(|e| Error::corrupt("agent_tasks", format!("{id}: {e}")))?;
    Ok(TaskRow {
        owner: r.get(1)?,
        task: AgentTask {
            creator_agent_id: r.get(2)?,
            assignee_agent_id: r.get(3)?,
            goal_id: r.get(4)?,
            title: r.get(5)?,
            instructions: r.get(6)?,
            state,
            result: r.get(8)?,
            attempt_count: super::count("agent_tasks", &id, r.get(9)?)?,
            current_attempt: None,
            created_at: Timestamp::from_micros(r.get(10)?),
            updated_at: Timestamp::from_micros(r.get(11)?),
            terminal_at: r.get::<_, Option<i64>>(12)?.map(Timestamp::from_micros),
            id,
        },
    })
}

/// Checks a task id's shape before any lookup.
pub(crate) fn check_id(task: &str) -> Result<()> {
    bounds::id("taskId", task, TASK_ID_PREFIX)
}

/// Loads `task` if `actor` can see it; otherwise [`Error::TaskNotFound`].
pub(crate) fn load_visible(conn: &Tx<'_>, actor: &Actor, task: &str) -> Result<TaskRow> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM agent_tasks WHERE id = ?3 AND {VISIBLE}");
    conn.prepare_cached(&sql)?
        .query_row((&actor.owner, &actor.agent, task), |r| Ok(from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::TaskNotFound(task.to_owned())))
}

/// Loads `task` without scoping: only for a task already authorized in this transaction.
pub(crate) fn load(conn: &Tx<'_>, task: &str) -> Result<TaskRow> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM agent_tasks WHERE id = ?1");
    conn.prepare_cached(&sql)?
        .query_row([task], |r| Ok(from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::TaskNotFound(task.to_owned())))
}

/// The task with its newest attempt.
pub(crate) fn full(conn: &Tx<'_>, row: TaskRow) -> Result<AgentTask> {
    let mut task = row.task;
    task.current_attempt = attempt::newest(conn, &task.id)?;
    Ok(task)
}

/// Moves `task` along `event` from `from` (compare-and-set); zero rows is a corrupt race, since
/// every caller holds the write lock and read the state in this transaction.
pub(crate) fn transition(
    tx: &Tx<'_>,
    task: &str,
    from: TaskState,
    event: TaskEvent,
    result: Option<&str>,
    now: Timestamp,
) -> Result<TaskState> {
    let Some(to) = from.after(event) else {
        return Err(Error::InvalidTaskState {
            task: task.to_owned(),
            operation: match event {
                TaskEvent::Start => "start an attempt of",
                TaskEvent::Revoke => "revoke the attempt of",
                TaskEvent::Succeed | TaskEvent::Fail => "finish",
                TaskEvent::Cancel => "cancel",
            },
            state: from,
        });
    };
    let terminal_at = to.is_terminal().then_some(now.as_micros());
    let changed = tx
        .prepare_cached(
            "UPDATE agent_tasks SET state = ?3, result = COALESCE(?4, result), terminal_at = ?5, updated_at = ?6,
                 attempt_count = attempt_count + ?7
             WHERE id = ?1 AND state = ?2",
        )?
        .execute((
            task,
            from.as_str(),
            to.as_str(),
            result,
            terminal_at,
            now.as_micros(),
            i64::from(event == TaskEvent::Start),
        ))?;
    if changed != 1 {
        return Err(Error::corrupt(
            "agent_tasks",
            format!("{task} moved under its own write transaction"),
        ));
    }
    if to.is_terminal() {
        // The MCP tasks waiting for this agent task end in the commit that ends it.
        let status = if to == TaskState::Cancelled {
            McpTaskStatus::Cancelled
        } else {
            McpTaskStatus::Completed
        };
        let awaited = Awaited::AgentTask { task: task.to_owned() };
        mcp_task::end_awaiting(
            tx,
            &awaited,
            status,
            Some(&format!("the agent task {}", to.as_str())),
            now,
        )?;
    }
    Ok(to)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CreateRequest<'a> {
    acting_agent: Option<&'a str>,
    task: &'a NewTask,
}

fn acting_agent(acting: &Acting) -> Option<&str> {
    match acting {
        Acting::Human => None,
        Acting::Agent(a) => Some(&a.agent),
    }
}

impl Store {
    /// Creates a task for `new.assignee`, created by the acting agent (or the owner as a human),
    /// and with [`NewTask::start`] starts its first attempt in the same transaction. Retrying with
    /// the same `idempotency_key` and request returns the original task (`replayed`), checked
    /// before the acting endpoint is admitted, so a creator whose endpoint was replaced can
    /// still recover it.
    ///
    /// # Errors
    ///
    /// [`Error::MissingScope`] without `communication:manage`; [`Error::InvalidInput`];
    /// [`Error::AgentNotFound`] for an assignee the caller does not own; [`Error::GoalNotFound`]
    /// for a goal the acting party cannot see, [`Error::InvalidGoalState`] for a closed one;
    /// [`Error::LimitReached`] at [`MAX_OPEN_TASKS_PER_AGENT`] unfinished tasks of the assignee;
    /// [`Error::AssigneeUnavailable`] when starting and the assignee has no attached endpoint;
    /// [`Error::IdempotencyConflict`]; the endpoint admission errors for an acting agent.
    pub fn create_agent_task(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        new: &NewTask,
        idempotency_key: &str,
    ) -> Result<Mutation<AgentTask>> {
        let m = self.create_agent_task_tracked(caller, acting, new, idempotency_key, false)?;
        Ok(Mutation {
            value: m.value.0,
            replayed: m.replayed,
            state_changed: m.state_changed,
            woken: m.woken,
        })
    }

    /// [`create_agent_task`](Self::create_agent_task), and with `track` the MCP task that waits
    /// for the agent task's terminal state ([`mcp_task`]), created in the same commit and owned
    /// by the caller; a replay returns the MCP task the original call created (none if it
    /// tracked nothing).
    ///
    /// # Errors
    ///
    /// As `create_agent_task`; [`Error::LimitReached`] at the caller's MCP task bound.
    pub fn create_agent_task_tracked(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        new: &NewTask,
        idempotency_key: &str,
        track: bool,
    ) -> Result<Mutation<(AgentTask, Option<McpTask>)>> {
        caller.require(Scope::Manage)?;
        validate_acting(acting)?;
        new.validate()?;
        validate_key(idempotency_key)?;
        let request = CreateRequest {
            acting_agent: acting_agent(acting),
            task: new,
        };
        let check = Check::new(Operation::CreateTask, &IdempotencyKey::from(idempotency_key), &request);
        self.waking(|s| {
            let (tx, now) = s.begin_immediate()?;
            if let Acting::Agent(a) = acting {
                crate::conversation::admission::refuse_host_held(&tx, caller, a)?;
            }
            if let Some(id) = check.replay(&tx, caller.principal(), now)? {
                let row = load(&tx, &id)?;
                let tracked = mcp_task::created_for(&tx, caller.principal(), &Awaited::AgentTask { task: id })?;
                return Ok(Mutation::replayed((full(&tx, row)?, tracked)));
            }
            let actor = resolve(&tx, caller, acting, now)?;
            agent::load_owned(&tx, caller.principal(), &new.assignee)?;
            if let Some(g) = &new.goal {
                let goal = goal::load_visible(&tx, &actor, g)?;
                goal::require_active(&goal, "add a task to")?;
            }
            let unfinished: i64 = tx
                .prepare_cached(
                    "SELECT count(*) FROM agent_tasks WHERE assignee_agent_id = ?1 AND state NOT IN ('succeeded', 'failed', 'cancelled')",
                )?
                .query_row([&new.assignee], |r| r.get(0))?;
            if unfinished as u64 >= MAX_OPEN_TASKS_PER_AGENT {
                return Err(Error::LimitReached {
                    what: "open tasks per agent",
                    limit: MAX_OPEN_TASKS_PER_AGENT,
                });
            }
            let id = new_id(TASK_ID_PREFIX);
            tx.prepare_cached(
                "INSERT INTO agent_tasks (id, owner_principal, creator_agent_id, assignee_agent_id, goal_id, title, instructions, state, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'open', ?8, ?8)",
            )?
            .execute((
                &id,
                &actor.owner,
                &actor.agent,
                &new.assignee,
                &new.goal,
                &new.title,
                &new.instructions,
                now.as_micros(),
            ))?;
            audit::record(
                &tx,
                AuditKind::TaskCreated,
                Some(&new.assignee),
                None,
                json!({ "taskId": id, "creatorAgentId": actor.agent, "goalId": new.goal }),
                now,
            )?;
            if new.start {
                attempt::start(&tx, &load(&tx, &id)?, now)?;
            }
            check.record(&tx, caller.principal(), &id, now)?;
            let tracked = if track {
                let awaited = Awaited::AgentTask { task: id.clone() };
                Some(mcp_task::create_in(&tx, caller.principal(), "create_agent_task", &awaited, now)?)
            } else {
                None
            };
            let task = full(&tx, load(&tx, &id)?)?;
            tx.commit()?;
            Ok(Mutation::changed((task, tracked)))
        })
    }

    /// The task `task` with its newest attempt, if the acting party can see it.
    ///
    /// # Errors
    ///
    /// [`Error::TaskNotFound`] for a task it cannot see (or none); [`Error::MissingScope`]
    /// without `communication:read`; the endpoint admission errors.
    pub fn get_agent_task(&mut self, caller: &Caller, acting: &Acting, task: &str) -> Result<AgentTask> {
        caller.require(Scope::Read)?;
        validate_acting(acting)?;
        check_id(task)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            let actor = resolve(&tx, caller, acting, now)?;
            let row = load_visible(&tx, &actor, task)?;
            full(&tx, row)
        })
    }

    /// The tasks the acting party can see that match `query`, ordered by id after the cursor,
    /// at most `limit` (1 to [`MAX_PAGE_LIMIT`](super::bounds::MAX_PAGE_LIMIT)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad limit, cursor or filter id; [`Error::MissingScope`];
    /// the endpoint admission errors.
    pub fn list_agent_tasks(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        query: &TaskQuery,
        limit: usize,
    ) -> Result<Vec<AgentTask>> {
        caller.require(Scope::Read)?;
        validate_acting(acting)?;
        bounds::page_limit(limit)?;
        for a in [&query.assignee, &query.creator].into_iter().flatten() {
            agent::check_id(a)?;
        }
        if let Some(g) = &query.goal {
            goal::check_id(g)?;
        }
        if let Some(t) = &query.after {
            check_id(t)?;
        }
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            let actor = resolve(&tx, caller, acting, now)?;
            let sql = format!(
                "SELECT {TASK_COLUMNS} FROM agent_tasks WHERE {VISIBLE}
                   AND (?3 IS NULL OR assignee_agent_id = ?3) AND (?4 IS NULL OR creator_agent_id = ?4)
                   AND (?5 IS NULL OR state = ?5) AND (?6 IS NULL OR goal_id = ?6) AND id > ?7
                 ORDER BY id LIMIT ?8"
            );
            let rows: Vec<TaskRow> = tx
                .prepare_cached(&sql)?
                .query_map(
                    ahp_store_sql::params![
                        &actor.owner,
                        &actor.agent,
                        &query.assignee,
                        &query.creator,
                        query.state.map(TaskState::as_str),
                        &query.goal,
                        query.after.as_deref().unwrap_or(""),
                        limit as i64
                    ],
                    |r| Ok(from_row(r)),
                )?
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .collect::<Result<_>>()?;
            rows.into_iter().map(|row| full(&tx, row)).collect()
        })
    }

    /// Cancels `task` (desired-state: an already cancelled task is returned unchanged). Its
    /// active attempt, if any, is cancelled with it (an attempt whose delivery is unknown stays
    /// so: whether it ran is still unknown), and the cancellation is the task's terminal fact
    /// for every wait over it, in the same transaction.
    ///
    /// # Errors
    ///
    /// [`Error::TaskNotFound`]; [`Error::NotPermitted`] for an agent that is only its assignee
    /// (it finishes the attempt as failed instead); [`Error::InvalidTaskState`] for a task that
    /// succeeded or failed; [`Error::MissingScope`]; the endpoint admission errors.
    pub fn cancel_agent_task(&mut self, caller: &Caller, acting: &Acting, task: &str) -> Result<Mutation<AgentTask>> {
        caller.require(Scope::Manage)?;
        validate_acting(acting)?;
        check_id(task)?;
        self.waking(|s| {
            let (tx, now) = s.begin_immediate()?;
            let actor = resolve(&tx, caller, acting, now)?;
            let row = load_visible(&tx, &actor, task)?;
            if let Some(agent) = &actor.agent {
                let controls = match &row.task.goal_id {
                    Some(g) => tx
                        .prepare_cached("SELECT 1 FROM goals WHERE id = ?1 AND controller_agent_id = ?2")?
                        .exists((g, agent))?,
                    None => false,
                };
                if row.task.creator_agent_id.as_ref() != Some(agent) && !controls {
                    return Err(Error::NotPermitted {
                        resource: task.to_owned(),
                        operation: "cancel",
                        role: "its assignee",
                    });
                }
            }
            if row.task.state == TaskState::Cancelled {
                return Ok(Mutation::unchanged(full(&tx, row)?));
            }
            transition(&tx, task, row.task.state, TaskEvent::Cancel, None, now)?;
            attempt::cancel_active(&tx, task, now)?;
            audit::record(
                &tx,
                AuditKind::TaskCancelled,
                Some(&row.task.assignee_agent_id),
                None,
                json!({ "taskId": task, "byAgentId": actor.agent }),
                now,
            )?;
            wait::on_task_terminal(&tx, task, now)?;
            let task = full(&tx, load(&tx, task)?)?;
            tx.commit()?;
            Ok(Mutation::changed(task))
        })
    }
}
