//! Attention: `agent_task_terminal` and `goal_workflow_stalled` events, the goal's reason to
//! look again. This file records and reads the first; [`super::stall`] records the second.
//!
//! When an attempt of a task that serves an **active** goal is terminalized (succeeded or
//! failed, through [`Store::complete_task_attempt`]), the same transaction records one immutable
//! attention event and gives its target one `attention_event` wake cause. The target is the
//! goal's controller; for a goal without one, the task's creator (the brief's routing; the seed
//! names the assignee for a controller-less legacy goal) — and when the creator is the owner as
//! a human, the event is recorded with no target and no wake. A task with no goal, or whose
//! goal is closed, makes no attention: its creator learns of it through waits.
//!
//! **Precedence of a Goal-scoped wait.** While a Goal-scoped wait over the task on that goal is
//! `waiting` or `triggered`, the terminal fact routes through the wait instead and no attention
//! event or wake is made for it — so an `all` wait's partial results make no wake of either
//! kind, and the last one makes the single Wait-origin wake. A generic wait changes nothing
//! here. Cancelling the scoped wait restores attention for later terminal facts only.
//!
//! An attention event asks its target to re-read current durable truth (the goal, the task)
//! before deciding the next step; it carries ids, never the task's or goal's text.
//!
//! **Order.** An owner's events are numbered by `seq` (1, 2, …), assigned as the owner's
//! maximum + 1 in the recording transaction (migration 0013): two transactions recording for one
//! owner cannot both commit (SQLite has one writer; on PostgreSQL one serializable transaction
//! fails with `40001` and runs again after the other), so `seq` order is commit order and a
//! party paging with the last id it read never passes an event that committed late. (The
//! events were paged by `(created_at, id)` before; `created_at` is read when the transaction
//! begins, and on PostgreSQL an early one can commit last.)

use std::fmt;
use std::str::FromStr;

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::task::TaskRow;
use super::{Acting, goal, resolve, validate_acting, wait};
use crate::clock::Timestamp;
use crate::conversation::audit::{self, AuditKind};
use crate::conversation::bounds;
use crate::conversation::ids::ATTENTION_EVENT_ID_PREFIX;
use crate::conversation::state::TaskState;
use crate::conversation::wake::{self, WakeOrigin};
use crate::conversation::{Caller, ConversationError as Error, ConversationResult as Result, Scope};
use crate::db::Store;
use crate::id::new_id;

closed_enum!(
    /// What an attention event is about.
    AttentionKind, "attention kind", {
        /// An attempt of a goal's task reached a terminal state.
        AgentTaskTerminal = "agent_task_terminal",
        /// A goal whose controller is carried by an MCP App saw no meaningful work for the
        /// quiet period while its Goal Plan card watched ([`super::stall`]).
        GoalWorkflowStalled = "goal_workflow_stalled",
    }
);

/// An attention event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttentionEvent {
    /// `att_…`.
    pub id: String,
    /// What it is about.
    pub kind: AttentionKind,
    /// The goal.
    pub goal_id: String,
    /// The task (an `agent_task_terminal` event's).
    pub task_id: Option<String>,
    /// The attempt that was terminalized (an `agent_task_terminal` event's).
    pub attempt_id: Option<String>,
    /// The task's state it reports (an `agent_task_terminal` event's).
    pub task_state: Option<TaskState>,
    /// The goal's last meaningful work it is bound to (a `goal_workflow_stalled` event's): one
    /// such event per epoch.
    pub epoch: Option<Timestamp>,
    /// The agent it wakes (`None`: a human creator, no wake).
    pub target_agent_id: Option<String>,
    /// The wake it coalesced into.
    pub wake_id: Option<String>,
    /// When it was recorded.
    pub created_at: Timestamp,
}

pub(super) const COLUMNS: &str =
    "id, kind, goal_id, task_id, attempt_id, task_state, target_agent_id, wake_id, created_at, epoch";

pub(super) fn from_row(r: &Row) -> Result<AttentionEvent> {
    let id: String = r.get(0)?;
    let kind: String = r.get(1)?;
    let state: Option<String> = r.get(5)?;
    let corrupt = |e: String| Error::corrupt("attention_events", format!("{id}: {e}"));
    let kind: AttentionKind = kind.parse().map_err(corrupt)?;
    let event = AttentionEvent {
        kind,
        goal_id: r.get(2)?,
        task_id: r.get(3)?,
        attempt_id: r.get(4)?,
        task_state: state.map(|s| s.parse()).transpose().map_err(corrupt)?,
        target_agent_id: r.get(6)?,
        wake_id: r.get(7)?,
        created_at: Timestamp::from_micros(r.get(8)?),
        epoch: r.get::<_, Option<i64>>(9)?.map(Timestamp::from_micros),
        id: id.clone(),
    };
    // Each kind has exactly its own fields: a row that mixes them fails closed.
    let terminal = event.task_id.is_some() && event.attempt_id.is_some() && event.task_state.is_some();
    let shaped = match kind {
        AttentionKind::AgentTaskTerminal => terminal && event.epoch.is_none(),
        AttentionKind::GoalWorkflowStalled => {
            event.task_id.is_none() && event.attempt_id.is_none() && event.task_state.is_none() && event.epoch.is_some()
        }
    };
    if !shaped {
        return Err(corrupt(format!("fields do not match its kind {kind}")));
    }
    Ok(event)
}

/// The attempt `attempt` of the task `row` was terminalized into `state`: records the goal's
/// attention unless a Goal-scoped wait routes the fact (see the [module docs](self)).
pub(crate) fn on_attempt_terminal(
    tx: &Tx<'_>,
    row: &TaskRow,
    attempt: &str,
    state: TaskState,
    now: Timestamp,
) -> Result<()> {
    let t = &row.task;
    let Some(goal_id) = &t.goal_id else {
        return Ok(());
    };
    let g = goal::load(tx, goal_id)?;
    if g.state != crate::conversation::state::GoalState::Active || wait::scoped_wait_routes(tx, goal_id, &t.id)? {
        return Ok(());
    }
    let target = g.controller_agent_id.clone().or_else(|| t.creator_agent_id.clone());
    let id = new_id(ATTENTION_EVENT_ID_PREFIX);
    let wake = match &target {
        Some(agent) => Some(wake::coalesce_cause(
            tx,
            agent,
            &WakeOrigin::AttentionEvent(id.clone()),
            now,
        )?),
        None => None,
    };
    tx.prepare_cached(
        "INSERT INTO attention_events (id, owner_principal, kind, goal_id, task_id, attempt_id, task_state, target_agent_id, wake_id, created_at, seq)
         VALUES (?1, ?2, 'agent_task_terminal', ?3, ?4, ?5, ?6, ?7, ?8, ?9,
                 (SELECT coalesce(max(seq), 0) + 1 FROM attention_events WHERE owner_principal = ?2))",
    )?
    .execute((
        &id,
        &row.owner,
        goal_id,
        &t.id,
        attempt,
        state.as_str(),
        &target,
        &wake,
        now.as_micros(),
    ))?;
    audit::record(
        tx,
        AuditKind::AttentionRecorded,
        target.as_deref(),
        None,
        json!({ "attentionEventId": id, "goalId": goal_id, "taskId": t.id, "attemptId": attempt, "wakeId": wake }),
        now,
    )
}

/// Checks an attention event id's shape before any lookup.
pub(crate) fn check_id(event: &str) -> Result<()> {
    bounds::id("attentionEventId", event, ATTENTION_EVENT_ID_PREFIX)
}

pub(super) fn load_visible(conn: &Tx<'_>, owner: &str, agent: Option<&str>, event: &str) -> Result<AttentionEvent> {
    let sql = format!(
        "SELECT {COLUMNS} FROM attention_events WHERE id = ?3 AND owner_principal = ?1 AND (?2 IS NULL OR target_agent_id = ?2)"
    );
    conn.prepare_cached(&sql)?
        .query_row((owner, agent, event), |r| Ok(from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::AttentionEventNotFound(event.to_owned())))
}

impl Store {
    /// The attention event `event`, if the acting party can see it (the owner: all of its own;
    /// an agent: those that target it).
    ///
    /// # Errors
    ///
    /// [`Error::AttentionEventNotFound`]; [`Error::MissingScope`]; the endpoint admission errors.
    pub fn get_attention_event(&mut self, caller: &Caller, acting: &Acting, event: &str) -> Result<AttentionEvent> {
        caller.require(Scope::Read)?;
        validate_acting(acting)?;
        check_id(event)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            let actor = resolve(&tx, caller, acting, now)?;
            load_visible(&tx, &actor.owner, actor.agent.as_deref(), event)
        })
    }

    /// The attention events the acting party can see, in the order they were committed (see
    /// the module docs), after the exclusive cursor `after` (an event id), at most `limit`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad limit or cursor; [`Error::AttentionEventNotFound`] for a
    /// cursor the party cannot see; [`Error::MissingScope`]; the endpoint admission errors.
    #[cfg(any(test, feature = "testing"))]
    pub fn list_attention_events(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AttentionEvent>> {
        caller.require(Scope::Read)?;
        validate_acting(acting)?;
        bounds::page_limit(limit)?;
        if let Some(e) = after {
            check_id(e)?;
        }
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            let actor = resolve(&tx, caller, acting, now)?;
            // The cursor is the last event's place among the owner's events.
            let cursor = match after {
                Some(e) => {
                    load_visible(&tx, &actor.owner, actor.agent.as_deref(), e)?;
                    tx.prepare_cached("SELECT seq FROM attention_events WHERE id = ?1")?
                        .query_row([e], |r| r.get::<_, i64>(0))?
                }
                None => 0,
            };
            let sql = format!(
                "SELECT {COLUMNS} FROM attention_events WHERE owner_principal = ?1 AND (?2 IS NULL OR target_agent_id = ?2)
                   AND seq > ?3 ORDER BY seq LIMIT ?4"
            );
            tx.prepare_cached(&sql)?
                .query_map((&actor.owner, &actor.agent, cursor, limit as i64), |r| {
                    Ok(from_row(r))
                })?
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .collect()
        })
    }
}
