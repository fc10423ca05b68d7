//! Agent waits: a caller-owned, one-shot, durable rendezvous over 1..8 exact task-terminal
//! sources, mode `any` or `all`.
//!
//! The agent that will be woken registers the wait through its exact endpoint. Each source is a
//! task it can see; a task's terminal fact (succeeded, failed, cancelled) *matches* every wait
//! over it in the transaction that records the fact. When a waiting wait's condition holds — one
//! match for `any`, every source for `all` — it fires: it becomes `triggered` and its agent gets
//! exactly one Wait-origin wake cause (a new wake, or coalesced into its open one), in that same
//! transaction. That includes registration itself, when the condition already holds. A partial
//! `all` makes no wake. Cancelling is desired-state idempotent and affects only future facts.
//!
//! **Goal-scoped waits** ([`NewWait::goal`]) are registered by the goal's controller over tasks
//! of that goal, before any of them is terminal. While such a wait is `waiting` or `triggered`,
//! the terminal facts of its sources route through it, and the per-task goal attention is
//! suppressed ([`attention`](super::attention)); cancelling it restores attention for later
//! facts only, never backfilling what it suppressed.
//!
//! ```text
//! waiting ──condition holds──► triggered
//!    └─────────┬──cancel──────────┘
//!              ▼
//!          cancelled
//! ```

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::bounds::{MAX_WAIT_SOURCES, MAX_WAITING_WAITS_PER_AGENT};
use super::task::{self};
use super::{Acting, Actor, goal, resolve, validate_acting};
use crate::clock::Timestamp;
use crate::conversation::admission;
use crate::conversation::audit::{self, AuditKind};
use crate::conversation::bounds;
use crate::conversation::endpoint::AgentActor;
use crate::conversation::idempotency::{Check, IdempotencyKey, Mutation, Operation, validate_key};
use crate::conversation::ids::WAIT_ID_PREFIX;
use crate::conversation::state::TaskState;
use crate::conversation::wake::{self, WakeOrigin};
use crate::conversation::{Caller, ConversationError as Error, ConversationResult as Result, Scope};
use crate::db::Store;
use crate::id::new_id;

closed_enum!(
    /// When a wait fires.
    WaitMode, "wait mode", {
        /// At the first source's terminal fact.
        Any = "any",
        /// At the last source's terminal fact.
        All = "all",
    }
);

closed_enum!(
    /// Where a wait is.
    WaitState, "wait state", {
        /// Its condition has not held yet.
        Waiting = "waiting",
        /// Its condition held; it made its one wake.
        Triggered = "triggered",
        /// Cancelled by its agent or the owner.
        Cancelled = "cancelled",
    }
);

/// A wait to register.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewWait {
    /// 1 to [`MAX_WAIT_SOURCES`] distinct task ids (`tsk_…`) the agent can see.
    pub sources: Vec<String>,
    /// `any` or `all`.
    pub mode: WaitMode,
    /// Scope it to this goal (`goal_…`), which the registering agent controls: its sources must
    /// be tasks of the goal, none yet terminal.
    pub goal: Option<String>,
}

impl NewWait {
    fn validate(&self) -> Result<()> {
        if self.sources.is_empty() || self.sources.len() > MAX_WAIT_SOURCES {
            return Err(Error::invalid(
                "sources",
                format!("must name 1 to {MAX_WAIT_SOURCES} tasks"),
            ));
        }
        let mut seen = HashSet::new();
        for s in &self.sources {
            task::check_id(s)?;
            if !seen.insert(s) {
                return Err(Error::invalid("sources", "must not name a task twice"));
            }
        }
        if let Some(g) = &self.goal {
            goal::check_id(g)?;
        }
        Ok(())
    }
}

/// One source of a wait.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitSource {
    /// The task.
    pub task_id: String,
    /// Its state now.
    pub task_state: TaskState,
    /// When its terminal fact reached the wait (`None`: not yet, or the wait was cancelled
    /// before it).
    pub matched_at: Option<Timestamp>,
}

/// A wait.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentWait {
    /// `wait_…`.
    pub id: String,
    /// The agent it wakes.
    pub agent_id: String,
    /// The goal it is scoped to.
    pub goal_id: Option<String>,
    /// `any` or `all`.
    pub mode: WaitMode,
    /// Its state.
    pub state: WaitState,
    /// Its sources, in registration order.
    pub sources: Vec<WaitSource>,
    /// The wake its firing coalesced into.
    pub wake_id: Option<String>,
    /// When it was registered.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it fired.
    pub triggered_at: Option<Timestamp>,
    /// When it was cancelled.
    pub cancelled_at: Option<Timestamp>,
}

const WAIT_COLUMNS: &str =
    "id, agent_id, goal_id, mode, state, wake_id, created_at, updated_at, triggered_at, cancelled_at, source_count";

struct WaitRow {
    wait: AgentWait,
    source_count: u64,
}

fn from_row(r: &Row) -> Result<WaitRow> {
    let id: String = r.get(0)?;
    let mode: String = r.get(3)?;
    let state: String = r.get(4)?;
    let corrupt = |e: String| Error::corrupt("agent_waits", format!("{id}: {e}"));
    let mode = mode.parse().map_err(corrupt)?;
    let state = state.parse().map_err(corrupt)?;
    Ok(WaitRow {
        source_count: super::count("agent_waits", &id, r.get(10)?)?,
        wait: AgentWait {
            agent_id: r.get(1)?,
            goal_id: r.get(2)?,
            mode,
            state,
            sources: Vec::new(),
            wake_id: r.get(5)?,
            created_at: Timestamp::from_micros(r.get(6)?),
            updated_at: Timestamp::from_micros(r.get(7)?),
            triggered_at: r.get::<_, Option<i64>>(8)?.map(Timestamp::from_micros),
            cancelled_at: r.get::<_, Option<i64>>(9)?.map(Timestamp::from_micros),
            id,
        },
    })
}

/// Checks a wait id's shape before any lookup.
pub(crate) fn check_id(wait: &str) -> Result<()> {
    bounds::id("waitId", wait, WAIT_ID_PREFIX)
}

fn load_row(conn: &Tx<'_>, wait: &str) -> Result<WaitRow> {
    let sql = format!("SELECT {WAIT_COLUMNS} FROM agent_waits WHERE id = ?1");
    conn.prepare_cached(&sql)?
        .query_row([wait], |r| Ok(from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::WaitNotFound(wait.to_owned())))
}

/// Loads `wait` with its sources if `actor` can see it (the owner: all of its own; an agent: its
/// own); otherwise [`Error::WaitNotFound`].
fn load_visible(conn: &Tx<'_>, actor: &Actor, wait: &str) -> Result<AgentWait> {
    let sql = format!(
        "SELECT {WAIT_COLUMNS} FROM agent_waits WHERE id = ?3 AND owner_principal = ?1 AND (?2 IS NULL OR agent_id = ?2)"
    );
    let row = conn
        .prepare_cached(&sql)?
        .query_row((&actor.owner, &actor.agent, wait), |r| Ok(from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::WaitNotFound(wait.to_owned())))?;
    with_sources(conn, row.wait)
}

fn with_sources(conn: &Tx<'_>, mut w: AgentWait) -> Result<AgentWait> {
    let mut stmt = conn.prepare_cached(
        "SELECT s.task_id, t.state, s.matched_at FROM agent_wait_sources s JOIN agent_tasks t ON t.id = s.task_id
         WHERE s.wait_id = ?1 ORDER BY s.position",
    )?;
    let rows = stmt.query_map([&w.id], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, Option<i64>>(2)?,
        ))
    })?;
    for row in rows {
        let (task_id, state, matched) = row?;
        let task_state = state
            .parse()
            .map_err(|e| Error::corrupt("agent_tasks", format!("{task_id}: {e}")))?;
        w.sources.push(WaitSource {
            task_id,
            task_state,
            matched_at: matched.map(Timestamp::from_micros),
        });
    }
    Ok(w)
}

/// Fires `w` if it is waiting and its condition holds: it becomes `triggered` and its agent gets
/// one Wait-origin wake cause. Returns whether it fired.
fn fire_if_due(tx: &Tx<'_>, w: &WaitRow, now: Timestamp) -> Result<bool> {
    if w.wait.state != WaitState::Waiting {
        return Ok(false);
    }
    let matched: i64 = tx
        .prepare_cached("SELECT count(*) FROM agent_wait_sources WHERE wait_id = ?1 AND matched_at IS NOT NULL")?
        .query_row([&w.wait.id], |r| r.get(0))?;
    let due = match w.wait.mode {
        WaitMode::Any => matched >= 1,
        WaitMode::All => matched as u64 >= w.source_count,
    };
    if !due {
        return Ok(false);
    }
    let wake = wake::coalesce_cause(tx, &w.wait.agent_id, &WakeOrigin::Wait(w.wait.id.clone()), now)?;
    let changed = tx
        .prepare_cached(
            "UPDATE agent_waits SET state = 'triggered', wake_id = ?2, triggered_at = ?3, updated_at = ?3
             WHERE id = ?1 AND state = 'waiting'",
        )?
        .execute((&w.wait.id, &wake, now.as_micros()))?;
    if changed != 1 {
        return Err(Error::corrupt(
            "agent_waits",
            format!("{} moved under its own write transaction", w.wait.id),
        ));
    }
    audit::record(
        tx,
        AuditKind::WaitTriggered,
        Some(&w.wait.agent_id),
        None,
        json!({ "waitId": w.wait.id, "wakeId": wake, "matched": matched }),
        now,
    )?;
    Ok(true)
}

/// `task` reached a terminal state: match it in every live (waiting or triggered) wait over it,
/// and fire those whose condition now holds.
pub(crate) fn on_task_terminal(tx: &Tx<'_>, task: &str, now: Timestamp) -> Result<()> {
    // Every wait over the task not known to be cancelled is read and parsed (fail closed).
    let ids: Vec<String> = tx
        .prepare_cached(
            "SELECT w.id FROM agent_wait_sources s JOIN agent_waits w ON w.id = s.wait_id
             WHERE s.task_id = ?1 AND s.matched_at IS NULL AND w.state <> 'cancelled'",
        )?
        .query_map([task], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for id in ids {
        let w = load_row(tx, &id)?;
        tx.prepare_cached("UPDATE agent_wait_sources SET matched_at = ?3 WHERE wait_id = ?1 AND task_id = ?2")?
            .execute((&id, task, now.as_micros()))?;
        fire_if_due(tx, &w, now)?;
    }
    Ok(())
}

/// Whether a live Goal-scoped wait over `task` on `goal` routes its terminal facts (and so
/// suppresses the per-task goal attention).
pub(crate) fn scoped_wait_routes(tx: &Tx<'_>, goal: &str, task: &str) -> Result<bool> {
    Ok(tx
        .prepare_cached(
            "SELECT 1 FROM agent_waits w JOIN agent_wait_sources s ON s.wait_id = w.id
             WHERE w.goal_id = ?1 AND s.task_id = ?2 AND w.state IN ('waiting', 'triggered')",
        )?
        .exists((goal, task))?)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RegisterRequest<'a> {
    agent: &'a str,
    wait: &'a NewWait,
}

impl Store {
    /// Registers a wait for the acting agent (the one it will wake). Sources already terminal
    /// match at once; if the condition already holds, the wait fires in this transaction.
    /// Retrying with the same `idempotency_key` and request returns the original wait
    /// (`replayed`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (1 to [`MAX_WAIT_SOURCES`] distinct task ids);
    /// [`Error::TaskNotFound`] for a source the agent cannot see; for a Goal-scoped wait,
    /// [`Error::GoalNotFound`], [`Error::NotPermitted`] unless the agent is the goal's
    /// controller, [`Error::InvalidGoalState`] for a closed goal, [`Error::WaitSourceRefused`]
    /// for a source not of the goal or already terminal; [`Error::LimitReached`] at
    /// [`MAX_WAITING_WAITS_PER_AGENT`]; [`Error::IdempotencyConflict`]; [`Error::MissingScope`];
    /// the endpoint admission errors.
    pub fn register_agent_wait(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        new: &NewWait,
        idempotency_key: &str,
    ) -> Result<Mutation<AgentWait>> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        new.validate()?;
        validate_key(idempotency_key)?;
        let request = RegisterRequest {
            agent: &actor.agent,
            wait: new,
        };
        let check = Check::new(
            Operation::RegisterWait,
            &IdempotencyKey::from(idempotency_key),
            &request,
        );
        self.waking(|s| {
            let (tx, now) = s.begin_immediate()?;
            admission::refuse_host_held(&tx, caller, actor)?;
            if let Some(id) = check.replay(&tx, caller.principal(), now)? {
                let w = load_row(&tx, &id)?;
                return Ok(Mutation::replayed(with_sources(&tx, w.wait)?));
            }
            let who = resolve(&tx, caller, &Acting::Agent(actor.clone()), now)?;
            let mut states = Vec::with_capacity(new.sources.len());
            for source in &new.sources {
                states.push(task::load_visible(&tx, &who, source)?.task);
            }
            if let Some(g) = &new.goal {
                let goal = goal::load_visible(&tx, &who, g)?;
                if goal.controller_agent_id.as_deref() != Some(actor.agent.as_str()) {
                    return Err(Error::NotPermitted {
                        resource: g.clone(),
                        operation: "register a Goal-scoped wait on",
                        role: "an agent other than its controller",
                    });
                }
                goal::require_active(&goal, "register a wait on")?;
                for t in &states {
                    let reason = if t.goal_id.as_deref() != Some(g.as_str()) {
                        Some("it does not serve the goal")
                    } else if t.state.is_terminal() {
                        Some("it is already terminal")
                    } else {
                        None
                    };
                    if let Some(reason) = reason {
                        return Err(Error::WaitSourceRefused {
                            task: t.id.clone(),
                            goal: g.clone(),
                            reason,
                        });
                    }
                }
            }
            let waiting: i64 = tx
                .prepare_cached("SELECT count(*) FROM agent_waits WHERE agent_id = ?1 AND state = 'waiting'")?
                .query_row([&actor.agent], |r| r.get(0))?;
            if waiting as u64 >= MAX_WAITING_WAITS_PER_AGENT {
                return Err(Error::LimitReached {
                    what: "waiting waits per agent",
                    limit: MAX_WAITING_WAITS_PER_AGENT,
                });
            }
            let id = new_id(WAIT_ID_PREFIX);
            tx.prepare_cached(
                "INSERT INTO agent_waits (id, owner_principal, agent_id, goal_id, mode, state, source_count, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'waiting', ?6, ?7, ?7)",
            )?
            .execute((
                &id,
                &who.owner,
                &actor.agent,
                &new.goal,
                new.mode.as_str(),
                new.sources.len() as i64,
                now.as_micros(),
            ))?;
            for (position, t) in states.iter().enumerate() {
                let matched = t.state.is_terminal().then_some(now.as_micros());
                tx.prepare_cached(
                    "INSERT INTO agent_wait_sources (wait_id, task_id, position, matched_at) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute((&id, &t.id, position as i64, matched))?;
            }
            audit::record(
                &tx,
                AuditKind::WaitRegistered,
                Some(&actor.agent),
                None,
                json!({ "waitId": id, "mode": new.mode.as_str(), "sources": new.sources.len(), "goalId": new.goal }),
                now,
            )?;
            let row = load_row(&tx, &id)?;
            fire_if_due(&tx, &row, now)?;
            check.record(&tx, caller.principal(), &id, now)?;
            let w = with_sources(&tx, load_row(&tx, &id)?.wait)?;
            tx.commit()?;
            Ok(Mutation::changed(w))
        })
    }

    /// The wait `wait` with each source's current task state, if the acting party can see it.
    ///
    /// # Errors
    ///
    /// [`Error::WaitNotFound`]; [`Error::MissingScope`]; the endpoint admission errors.
    pub fn read_agent_wait(&mut self, caller: &Caller, acting: &Acting, wait: &str) -> Result<AgentWait> {
        caller.require(Scope::Read)?;
        validate_acting(acting)?;
        check_id(wait)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            let actor = resolve(&tx, caller, acting, now)?;
            load_visible(&tx, &actor, wait)
        })
    }

    /// The waits the acting party can see (for an agent: its own), ordered by id after the
    /// cursor, at most `limit`; with `agent`, only that agent's.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad limit, cursor or agent id; [`Error::MissingScope`]; the
    /// endpoint admission errors.
    pub fn list_agent_waits(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        agent: Option<&str>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AgentWait>> {
        caller.require(Scope::Read)?;
        validate_acting(acting)?;
        bounds::page_limit(limit)?;
        if let Some(a) = agent {
            crate::conversation::agent::check_id(a)?;
        }
        if let Some(w) = after {
            check_id(w)?;
        }
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            let actor = resolve(&tx, caller, acting, now)?;
            let sql = format!(
                "SELECT {WAIT_COLUMNS} FROM agent_waits WHERE owner_principal = ?1 AND (?2 IS NULL OR agent_id = ?2)
                   AND (?3 IS NULL OR agent_id = ?3) AND id > ?4 ORDER BY id LIMIT ?5"
            );
            let rows: Vec<WaitRow> = tx
                .prepare_cached(&sql)?
                .query_map(
                    (&actor.owner, &actor.agent, agent, after.unwrap_or(""), limit as i64),
                    |r| Ok(from_row(r)),
                )?
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .collect::<Result<_>>()?;
            rows.into_iter().map(|w| with_sources(&tx, w.wait)).collect()
        })
    }

    /// Cancels the wait (desired-state: a cancelled wait is returned unchanged). A triggered wait
    /// may be cancelled too: its wake stays, and a Goal-scoped wait stops suppressing attention
    /// for its sources' later terminal facts.
    ///
    /// # Errors
    ///
    /// [`Error::WaitNotFound`]; [`Error::MissingScope`]; the endpoint admission errors.
    pub fn cancel_agent_wait(&mut self, caller: &Caller, acting: &Acting, wait: &str) -> Result<Mutation<AgentWait>> {
        caller.require(Scope::Manage)?;
        validate_acting(acting)?;
        check_id(wait)?;
        self.waking(|s| {
            let (tx, now) = s.begin_immediate()?;
            let actor = resolve(&tx, caller, acting, now)?;
            let w = load_visible(&tx, &actor, wait)?;
            if w.state == WaitState::Cancelled {
                return Ok(Mutation::unchanged(w));
            }
            tx.prepare_cached(
                "UPDATE agent_waits SET state = 'cancelled', cancelled_at = ?2, updated_at = ?2
                 WHERE id = ?1 AND state IN ('waiting', 'triggered')",
            )?
            .execute((wait, now.as_micros()))?;
            audit::record(
                &tx,
                AuditKind::WaitCancelled,
                Some(&w.agent_id),
                None,
                json!({ "waitId": wait, "from": w.state.as_str() }),
                now,
            )?;
            let w = load_visible(&tx, &actor, wait)?;
            tx.commit()?;
            Ok(Mutation::changed(w))
        })
    }
}
