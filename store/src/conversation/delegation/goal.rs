//! Goals: durable workflow truth — a completion intent fixed at creation, a bounded plan with
//! revision-fenced checkpoints, a lifecycle, and an optional controller agent.
//!
//! The owner (as a human) or an agent creates a goal; its controller, when named, is the agent
//! that attention for the goal's tasks wakes ([`attention`](super::attention)) — independent of
//! the agents assigned its tasks. [`Store::checkpoint_goal`] replaces the plan and note only if
//! the goal is still at the revision the caller read (compare-and-set), and is idempotent under
//! its key. A goal is closed only explicitly: [`Store::complete_goal`], desired-state
//! idempotent (`abandon_goal`, the other close, no surface serves yet: it is compiled with the
//! `testing` feature only). Nothing completes a goal by itself.
//!
//! ```text
//! active ──complete──► completed
//!    └────abandon───► abandoned
//! ```

use std::fmt;
use std::str::FromStr;

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::bounds::{
    MAX_ACTIVE_GOALS_PER_PRINCIPAL, MAX_CHECKPOINT_NOTE_BYTES, MAX_COMPLETION_INTENT_BYTES, MAX_PLAN_STEP_BYTES,
    MAX_PLAN_STEPS, MAX_TITLE_BYTES,
};
use super::{Acting, Actor, resolve, validate_acting};
use crate::clock::Timestamp;
use crate::conversation::audit::{self, AuditKind};
use crate::conversation::bounds;
use crate::conversation::idempotency::{Check, IdempotencyKey, Mutation, Operation, validate_key};
use crate::conversation::ids::GOAL_ID_PREFIX;
use crate::conversation::state::GoalState;
use crate::conversation::{Caller, ConversationError as Error, ConversationResult as Result, Scope, agent};
use crate::db::Store;
use crate::id::new_id;

closed_enum!(
    /// Where one plan step is.
    StepStatus, "plan step status", {
        /// Not started.
        Pending = "pending",
        /// Being worked on.
        InProgress = "in_progress",
        /// Done.
        Done = "done",
        /// Decided against.
        Skipped = "skipped",
    }
);

/// One step of a goal's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanStep {
    /// What the step is (1 to [`MAX_PLAN_STEP_BYTES`]).
    pub title: String,
    /// Where it is.
    pub status: StepStatus,
}

fn validate_plan(plan: &[PlanStep]) -> Result<()> {
    if plan.len() > MAX_PLAN_STEPS {
        return Err(Error::invalid(
            "plan",
            format!("must have at most {MAX_PLAN_STEPS} steps"),
        ));
    }
    for step in plan {
        bounds::text("plan.title", &step.title, MAX_PLAN_STEP_BYTES, false)?;
    }
    Ok(())
}

/// A goal to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewGoal {
    /// A short title (1 to [`MAX_TITLE_BYTES`]).
    pub title: String,
    /// What "done" means, fixed for the goal's life (1 to [`MAX_COMPLETION_INTENT_BYTES`]).
    pub completion_intent: String,
    /// The initial plan (0 to [`MAX_PLAN_STEPS`] steps).
    pub plan: Vec<PlanStep>,
    /// The agent attention for its tasks wakes (`agt_…`, owned by the caller's principal).
    pub controller: Option<String>,
}

impl NewGoal {
    fn validate(&self) -> Result<()> {
        bounds::text("title", &self.title, MAX_TITLE_BYTES, false)?;
        bounds::text(
            "completionIntent",
            &self.completion_intent,
            MAX_COMPLETION_INTENT_BYTES,
            false,
        )?;
        validate_plan(&self.plan)?;
        if let Some(c) = &self.controller {
            agent::check_id(c)?;
        }
        Ok(())
    }
}

/// A checkpoint: the plan and note as they now are, based on `expected_revision`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GoalCheckpoint {
    /// The goal (`goal_…`).
    pub goal: String,
    /// The revision the caller read; the checkpoint applies only if it is still current.
    pub expected_revision: u64,
    /// The plan (0 to [`MAX_PLAN_STEPS`] steps).
    pub plan: Vec<PlanStep>,
    /// What was reached and what comes next (0 to [`MAX_CHECKPOINT_NOTE_BYTES`]).
    pub note: String,
}

/// A goal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Goal {
    /// `goal_…`.
    pub id: String,
    /// The agent that created it; `None` when the owner created it as a human.
    pub creator_agent_id: Option<String>,
    /// The agent attention for its tasks wakes, if any.
    pub controller_agent_id: Option<String>,
    /// Its title.
    pub title: String,
    /// Its completion intent, fixed at creation.
    pub completion_intent: String,
    /// Its plan as of the latest checkpoint.
    pub plan: Vec<PlanStep>,
    /// The latest checkpoint's note (empty before the first).
    pub note: String,
    /// 1 at creation, one more with each checkpoint.
    pub revision: u64,
    /// Its state.
    pub state: GoalState,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it was completed or abandoned.
    pub closed_at: Option<Timestamp>,
}

pub(crate) const GOAL_COLUMNS: &str = "id, creator_agent_id, controller_agent_id, title, completion_intent, plan, note, revision, state, created_at, updated_at, closed_at";

pub(crate) fn from_row(r: &Row) -> Result<Goal> {
    let id: String = r.get(0)?;
    let plan: String = r.get(5)?;
    let plan: Vec<PlanStep> =
        serde_json::from_str(&plan).map_err(|e| Error::corrupt("goals", format!("{id}: plan: {e}")))?;
    let state: String = r.get(8)?;
    let state = state
        .parse()
        .map_err(|e| Error::corrupt("goals", format!("{id}: {e}")))?;
    Ok(Goal {
        creator_agent_id: r.get(1)?,
        controller_agent_id: r.get(2)?,
        title: r.get(3)?,
        completion_intent: r.get(4)?,
        plan,
        note: r.get(6)?,
        revision: super::count("goals", &id, r.get(7)?)?,
        state,
        created_at: Timestamp::from_micros(r.get(9)?),
        updated_at: Timestamp::from_micros(r.get(10)?),
        closed_at: r.get::<_, Option<i64>>(11)?.map(Timestamp::from_micros),
        id,
    })
}

/// Checks a goal id's shape before any lookup.
pub(crate) fn check_id(goal: &str) -> Result<()> {
    bounds::id("goalId", goal, GOAL_ID_PREFIX)
}

/// Loads `goal` if `actor` can see it (the owner: all of its own; an agent: those it created or
/// controls); otherwise [`Error::GoalNotFound`].
pub(crate) fn load_visible(conn: &Tx<'_>, actor: &Actor, goal: &str) -> Result<Goal> {
    let sql = format!(
        "SELECT {GOAL_COLUMNS} FROM goals WHERE id = ?3 AND owner_principal = ?1
           AND (?2 IS NULL OR creator_agent_id = ?2 OR controller_agent_id = ?2)"
    );
    conn.prepare_cached(&sql)?
        .query_row((&actor.owner, &actor.agent, goal), |r| Ok(from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::GoalNotFound(goal.to_owned())))
}

/// Loads `goal` without scoping: only for a goal already authorized in this transaction.
pub(crate) fn load(conn: &Tx<'_>, goal: &str) -> Result<Goal> {
    let sql = format!("SELECT {GOAL_COLUMNS} FROM goals WHERE id = ?1");
    conn.prepare_cached(&sql)?
        .query_row([goal], |r| Ok(from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::GoalNotFound(goal.to_owned())))
}

/// Refuses `operation` on a goal that is not active.
pub(crate) fn require_active(goal: &Goal, operation: &'static str) -> Result<()> {
    if goal.state != GoalState::Active {
        return Err(Error::InvalidGoalState {
            goal: goal.id.clone(),
            operation,
            state: goal.state,
        });
    }
    Ok(())
}

fn plan_json(plan: &[PlanStep]) -> String {
    serde_json::to_string(plan).expect("plan steps serialize")
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ActingRequest<'a, T> {
    acting_agent: Option<&'a str>,
    request: &'a T,
}

fn acting_agent(acting: &Acting) -> Option<&str> {
    match acting {
        Acting::Human => None,
        Acting::Agent(a) => Some(&a.agent),
    }
}

impl Store {
    /// Creates a goal. Retrying with the same `idempotency_key` and request returns the original
    /// goal (`replayed`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (title, intent, plan bounds); [`Error::AgentNotFound`] for a
    /// controller the caller does not own; [`Error::LimitReached`] at
    /// [`MAX_ACTIVE_GOALS_PER_PRINCIPAL`]; [`Error::IdempotencyConflict`]; [`Error::MissingScope`];
    /// the endpoint admission errors.
    pub fn create_goal(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        new: &NewGoal,
        idempotency_key: &str,
    ) -> Result<Mutation<Goal>> {
        caller.require(Scope::Manage)?;
        validate_acting(acting)?;
        new.validate()?;
        validate_key(idempotency_key)?;
        let request = ActingRequest {
            acting_agent: acting_agent(acting),
            request: new,
        };
        let check = Check::new(Operation::CreateGoal, &IdempotencyKey::from(idempotency_key), &request);
        self.waking(|s| {
            let (tx, now) = s.begin_immediate()?;
            if let Acting::Agent(a) = acting {
                crate::conversation::admission::refuse_host_held(&tx, caller, a)?;
            }
            if let Some(id) = check.replay(&tx, caller.principal(), now)? {
                return Ok(Mutation::replayed(load(&tx, &id)?));
            }
            let actor = resolve(&tx, caller, acting, now)?;
            if let Some(c) = &new.controller {
                agent::load_owned(&tx, caller.principal(), c)?;
            }
            let active: i64 = tx
                .prepare_cached("SELECT count(*) FROM goals WHERE owner_principal = ?1 AND state = 'active'")?
                .query_row([&actor.owner], |r| r.get(0))?;
            if active as u64 >= MAX_ACTIVE_GOALS_PER_PRINCIPAL {
                return Err(Error::LimitReached {
                    what: "active goals per principal",
                    limit: MAX_ACTIVE_GOALS_PER_PRINCIPAL,
                });
            }
            let id = new_id(GOAL_ID_PREFIX);
            tx.prepare_cached(
                "INSERT INTO goals (id, owner_principal, creator_agent_id, controller_agent_id, title, completion_intent, plan, note, revision, state, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, '', 1, 'active', ?8, ?8)",
            )?
            .execute((
                &id,
                &actor.owner,
                &actor.agent,
                &new.controller,
                &new.title,
                &new.completion_intent,
                plan_json(&new.plan),
                now.as_micros(),
            ))?;
            audit::record(
                &tx,
                AuditKind::GoalChanged,
                new.controller.as_deref(),
                None,
                json!({ "goalId": id, "change": "created", "revision": 1 }),
                now,
            )?;
            check.record(&tx, caller.principal(), &id, now)?;
            let goal = load(&tx, &id)?;
            tx.commit()?;
            Ok(Mutation::changed(goal))
        })
    }

    /// The goal `goal`, if the acting party can see it.
    ///
    /// # Errors
    ///
    /// [`Error::GoalNotFound`]; [`Error::MissingScope`]; the endpoint admission errors.
    pub fn get_goal(&mut self, caller: &Caller, acting: &Acting, goal: &str) -> Result<Goal> {
        caller.require(Scope::Read)?;
        validate_acting(acting)?;
        check_id(goal)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            let actor = resolve(&tx, caller, acting, now)?;
            load_visible(&tx, &actor, goal)
        })
    }

    /// The goals the acting party can see, ordered by id after the cursor, at most `limit`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad limit or cursor; [`Error::MissingScope`]; the endpoint
    /// admission errors.
    pub fn list_goals(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Goal>> {
        caller.require(Scope::Read)?;
        validate_acting(acting)?;
        bounds::page_limit(limit)?;
        if let Some(g) = after {
            check_id(g)?;
        }
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            let actor = resolve(&tx, caller, acting, now)?;
            let sql = format!(
                "SELECT {GOAL_COLUMNS} FROM goals WHERE owner_principal = ?1
                   AND (?2 IS NULL OR creator_agent_id = ?2 OR controller_agent_id = ?2) AND id > ?3
                 ORDER BY id LIMIT ?4"
            );
            tx.prepare_cached(&sql)?
                .query_map((&actor.owner, &actor.agent, after.unwrap_or(""), limit as i64), |r| {
                    Ok(from_row(r))
                })?
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .collect()
        })
    }

    /// Records a checkpoint: the plan and note replace the goal's if it is still at
    /// `expected_revision` (the revision then goes up by one). Retrying with the same
    /// `idempotency_key` and checkpoint returns the goal as it now is (`replayed`), even after
    /// later checkpoints moved the revision on.
    ///
    /// # Errors
    ///
    /// [`Error::GoalRevisionConflict`] if the revision moved on; [`Error::InvalidGoalState`] for a
    /// closed goal; [`Error::GoalNotFound`]; [`Error::InvalidInput`] (plan and note bounds);
    /// [`Error::IdempotencyConflict`]; [`Error::MissingScope`]; the endpoint admission errors.
    pub fn checkpoint_goal(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        checkpoint: &GoalCheckpoint,
        idempotency_key: &str,
    ) -> Result<Mutation<Goal>> {
        caller.require(Scope::Manage)?;
        validate_acting(acting)?;
        check_id(&checkpoint.goal)?;
        validate_plan(&checkpoint.plan)?;
        bounds::text("note", &checkpoint.note, MAX_CHECKPOINT_NOTE_BYTES, true)?;
        validate_key(idempotency_key)?;
        let request = ActingRequest {
            acting_agent: acting_agent(acting),
            request: checkpoint,
        };
        let check = Check::new(
            Operation::CheckpointGoal,
            &IdempotencyKey::from(idempotency_key),
            &request,
        );
        self.waking(|s| {
            let (tx, now) = s.begin_immediate()?;
            if let Acting::Agent(a) = acting {
                crate::conversation::admission::refuse_host_held(&tx, caller, a)?;
            }
            if let Some(id) = check.replay(&tx, caller.principal(), now)? {
                return Ok(Mutation::replayed(load(&tx, &id)?));
            }
            let actor = resolve(&tx, caller, acting, now)?;
            let goal = load_visible(&tx, &actor, &checkpoint.goal)?;
            require_active(&goal, "checkpoint")?;
            if goal.revision != checkpoint.expected_revision {
                return Err(Error::GoalRevisionConflict {
                    goal: goal.id,
                    expected: checkpoint.expected_revision,
                    current: goal.revision,
                });
            }
            let changed = tx
                .prepare_cached(
                    "UPDATE goals SET plan = ?3, note = ?4, revision = revision + 1, updated_at = ?5
                     WHERE id = ?1 AND revision = ?2 AND state = 'active'",
                )?
                .execute((
                    &goal.id,
                    goal.revision as i64,
                    plan_json(&checkpoint.plan),
                    &checkpoint.note,
                    now.as_micros(),
                ))?;
            if changed != 1 {
                return Err(Error::corrupt(
                    "goals",
                    format!("{} moved under its own write transaction", goal.id),
                ));
            }
            audit::record(
                &tx,
                AuditKind::GoalChanged,
                goal.controller_agent_id.as_deref(),
                None,
                json!({ "goalId": goal.id, "change": "checkpointed", "revision": goal.revision + 1 }),
                now,
            )?;
            check.record(&tx, caller.principal(), &goal.id, now)?;
            let goal = load(&tx, &goal.id)?;
            tx.commit()?;
            Ok(Mutation::changed(goal))
        })
    }

    /// Completes the goal (desired-state: an already completed goal is returned unchanged).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidGoalState`] for an abandoned goal; [`Error::GoalNotFound`];
    /// [`Error::MissingScope`]; the endpoint admission errors.
    pub fn complete_goal(&mut self, caller: &Caller, acting: &Acting, goal: &str) -> Result<Mutation<Goal>> {
        self.close_goal(caller, acting, goal, GoalState::Completed)
    }

    /// Abandons the goal (desired-state: an already abandoned goal is returned unchanged).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidGoalState`] for a completed goal; [`Error::GoalNotFound`];
    /// [`Error::MissingScope`]; the endpoint admission errors.
    #[cfg(any(test, feature = "testing"))]
    pub fn abandon_goal(&mut self, caller: &Caller, acting: &Acting, goal: &str) -> Result<Mutation<Goal>> {
        self.close_goal(caller, acting, goal, GoalState::Abandoned)
    }

    fn close_goal(&mut self, caller: &Caller, acting: &Acting, goal: &str, to: GoalState) -> Result<Mutation<Goal>> {
        caller.require(Scope::Manage)?;
        validate_acting(acting)?;
        check_id(goal)?;
        self.waking(|s| {
            let (tx, now) = s.begin_immediate()?;
            let actor = resolve(&tx, caller, acting, now)?;
            let g = load_visible(&tx, &actor, goal)?;
            if g.state == to {
                return Ok(Mutation::unchanged(g));
            }
            let operation = if to == GoalState::Completed {
                "complete"
            } else {
                "abandon"
            };
            require_active(&g, operation)?;
            tx.prepare_cached(
                "UPDATE goals SET state = ?2, closed_at = ?3, updated_at = ?3 WHERE id = ?1 AND state = 'active'",
            )?
            .execute((goal, to.as_str(), now.as_micros()))?;
            audit::record(
                &tx,
                AuditKind::GoalChanged,
                g.controller_agent_id.as_deref(),
                None,
                json!({ "goalId": goal, "change": to.as_str() }),
                now,
            )?;
            let g = load(&tx, goal)?;
            tx.commit()?;
            Ok(Mutation::changed(g))
        })
    }
}
