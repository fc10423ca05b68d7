//! Goal workflow continuity (the conversation seed's G4): the `goal_workflow_stalled` attention.
//!
//! A goal's Goal Plan card observes it ([`Store::observe_goal_plan`]): a read, never meaningful
//! work. Each observation is also the evidence the server needs to notice that the goal's
//! workflow has stalled — no timer, scanner or scheduler runs. On every observation the server,
//! from what it holds and on its own clock (never the browser's), recomputes:
//!
//! - the goal is active, with a controller agent carried by an MCP App (its current, live
//!   endpoint holds a View binding, [`crate::conversation::app_carrier`]);
//! - its **last meaningful work** — the epoch: the latest of the goal's own writes (creation,
//!   checkpoint) and the writes of its tasks (created, started, ended, cancelled);
//! - no meaningful request is active: none of its tasks is `running`;
//! - complete observation coverage: the card has observed it without a gap longer than
//!   [`MAX_OBSERVATION_GAP`] for at least the quiet period;
//! - the quiet period ([`STALL_QUIET_PERIOD`] unless the host sets another) has passed since
//!   the epoch.
//!
//! Then, in the observation's transaction, it records one immutable `goal_workflow_stalled`
//! attention event bound to that epoch, and one `attention_event` wake cause for the controller.
//! A unique index holds one per goal and epoch: repeated observations and card refreshes mint
//! nothing more, and only new meaningful work opens a later epoch. The event records history; it
//! does not say the goal is still stalled.

use std::time::Duration;

use ahp_store_sql::{OptionalExtension, Tx};
use serde::Serialize;
use serde_json::json;

use super::attention::{self, AttentionEvent};
use super::goal::{self, Goal};
use super::{Acting, resolve, validate_acting};
use crate::clock::Timestamp;
use crate::conversation::audit::{self, AuditKind};
use crate::conversation::idempotency::Mutation;
use crate::conversation::ids::ATTENTION_EVENT_ID_PREFIX;
use crate::conversation::state::GoalState;
use crate::conversation::wake::{self, WakeOrigin};
use crate::conversation::{Caller, ConversationResult as Result, Scope};
use crate::db::Store;
use crate::id::new_id;

/// How long a goal must see no meaningful work, under observation, before it is stalled: the
/// seed's five minutes, the default of a host's policy ([`Store::observe_goal_plan`] takes it).
pub const STALL_QUIET_PERIOD: Duration = Duration::from_secs(5 * 60);

/// The shortest quiet period a host may set.
pub const MIN_STALL_QUIET_PERIOD: Duration = Duration::from_secs(1);

/// The longest quiet period a host may set.
pub const MAX_STALL_QUIET_PERIOD: Duration = Duration::from_secs(24 * 3600);

/// The longest gap between two observations of one uninterrupted run: a card that looked away
/// longer starts a new run (its heartbeat is a minute at most, hidden).
pub const MAX_OBSERVATION_GAP: Duration = Duration::from_secs(2 * 60);

/// What [`Store::observe_goal_plan`] returns: the Goal Plan card's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GoalPlanObservation {
    /// The goal: its plan, steps, revision and last checkpoint note.
    pub goal: Goal,
    /// Its last meaningful work (the quiet period counts from here).
    pub last_meaningful_work_at: Timestamp,
    /// When the current uninterrupted run of observations began.
    pub observed_since: Timestamp,
    /// The stalled attention recorded for the current epoch, if any (by this observation or an
    /// earlier one).
    pub stalled: Option<AttentionEvent>,
}

/// The goal's last meaningful work: the latest of its own writes and its tasks'.
fn epoch(tx: &Tx<'_>, g: &Goal) -> Result<Timestamp> {
    let tasks: Option<i64> = tx
        .prepare_cached("SELECT max(updated_at) FROM agent_tasks WHERE goal_id = ?1")?
        .query_row([&g.id], |r| r.get(0))?;
    Ok(tasks.map_or(g.updated_at, |t| g.updated_at.max(Timestamp::from_micros(t))))
}

/// Whether `agent`'s current endpoint, its lease live at `now`, is held by an MCP App View.
fn app_carried(tx: &Tx<'_>, agent: &str, now: Timestamp) -> Result<bool> {
    Ok(tx
        .prepare_cached(
            "SELECT 1 FROM agent_endpoints
             WHERE agent_id = ?1 AND state = 'attached' AND lease_expires_at > ?2 AND app_binding_hash IS NOT NULL",
        )?
        .exists((agent, now.as_micros()))?)
}

fn stall_of(tx: &Tx<'_>, goal: &str, epoch: Timestamp) -> Result<Option<AttentionEvent>> {
    let sql = format!(
        "SELECT {} FROM attention_events WHERE goal_id = ?1 AND kind = 'goal_workflow_stalled' AND epoch = ?2",
        attention::COLUMNS
    );
    tx.prepare_cached(&sql)?
        .query_row((goal, epoch.as_micros()), |r| Ok(attention::from_row(r)))
        .optional()?
        .transpose()
}

/// Records the stalled attention of `g` (owned by `owner`) for `epoch` and its controller's wake.
fn record(tx: &Tx<'_>, owner: &str, g: &Goal, controller: &str, epoch: Timestamp, now: Timestamp) -> Result<()> {
    let id = new_id(ATTENTION_EVENT_ID_PREFIX);
    let wake = wake::coalesce_cause(tx, controller, &WakeOrigin::AttentionEvent(id.clone()), now)?;
    tx.prepare_cached(
        "INSERT INTO attention_events (id, owner_principal, kind, goal_id, epoch, target_agent_id, wake_id, created_at, seq)
         VALUES (?1, ?2, 'goal_workflow_stalled', ?3, ?4, ?5, ?6, ?7,
                 (SELECT coalesce(max(seq), 0) + 1 FROM attention_events WHERE owner_principal = ?2))",
    )?
    .execute((
        &id,
        owner,
        &g.id,
        epoch.as_micros(),
        controller,
        &wake,
        now.as_micros(),
    ))?;
    audit::record(
        tx,
        AuditKind::AttentionRecorded,
        Some(controller),
        None,
        json!({ "attentionEventId": id, "kind": "goal_workflow_stalled", "goalId": g.id, "wakeId": wake }),
        now,
    )
}

impl Store {
    /// The Goal Plan card's observation of `goal` (see the [module docs](self)): the goal as it
    /// stands, and — when the server finds its workflow stalled under this observation — one
    /// `goal_workflow_stalled` attention and its controller's wake, recorded in the same
    /// transaction, once per epoch ([`Mutation::woken`] names the controller then). Not
    /// meaningful work: it moves no epoch.
    ///
    /// `quiet` is the host's quiet period ([`STALL_QUIET_PERIOD`] by default).
    ///
    /// # Errors
    ///
    /// [`Error::GoalNotFound`](crate::conversation::ConversationError::GoalNotFound) unless the
    /// acting party sees the goal; the endpoint admission errors; `InvalidInput` for a malformed
    /// id or a quiet period outside [`MIN_STALL_QUIET_PERIOD`]..=[`MAX_STALL_QUIET_PERIOD`];
    /// `MissingScope` without either communication scope.
    pub fn observe_goal_plan(
        &mut self,
        caller: &Caller,
        acting: &Acting,
        goal: &str,
        quiet: Duration,
    ) -> Result<Mutation<GoalPlanObservation>> {
        if !caller.has(Scope::Manage) {
            caller.require(Scope::Read)?;
        }
        validate_acting(acting)?;
        goal::check_id(goal)?;
        crate::conversation::bounds::lease("quietPeriod", quiet, MIN_STALL_QUIET_PERIOD, MAX_STALL_QUIET_PERIOD)?;
        self.waking(|s| {
            let (tx, now) = s.begin_immediate()?;
            let actor = resolve(&tx, caller, acting, now)?;
            let g = goal::load_visible(&tx, &actor, goal)?;
            let (since, last): (Option<i64>, Option<i64>) = tx
                .prepare_cached("SELECT observed_since, observed_at FROM goals WHERE id = ?1")?
                .query_row([&g.id], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let continued = last.is_some_and(|l| now.as_micros().saturating_sub(l) <= micros(MAX_OBSERVATION_GAP));
            let observed_since = match since {
                Some(s) if continued => Timestamp::from_micros(s),
                _ => now,
            };
            tx.prepare_cached("UPDATE goals SET observed_since = ?2, observed_at = ?3 WHERE id = ?1")?
                .execute((&g.id, observed_since.as_micros(), now.as_micros()))?;
            let epoch = epoch(&tx, &g)?;
            let mut stalled = stall_of(&tx, &g.id, epoch)?;
            let mut changed = false;
            if stalled.is_none()
                && let Some(controller) = g.controller_agent_id.as_deref()
            {
                let was_quiet = now.as_micros().saturating_sub(epoch.as_micros()) >= micros(quiet);
                let watched = now.as_micros().saturating_sub(observed_since.as_micros()) >= micros(quiet);
                let running = tx
                    .prepare_cached("SELECT 1 FROM agent_tasks WHERE goal_id = ?1 AND state = 'running'")?
                    .exists([&g.id])?;
                if g.state == GoalState::Active
                    && was_quiet
                    && watched
                    && !running
                    && app_carried(&tx, controller, now)?
                {
                    record(&tx, &actor.owner, &g, controller, epoch, now)?;
                    stalled = stall_of(&tx, &g.id, epoch)?;
                    changed = true;
                }
            }
            tx.commit()?;
            // An agent sees the attention that targets it; the owner sees all of its own.
            let stalled = stalled.filter(|e| actor.agent.is_none() || actor.agent == e.target_agent_id);
            let observation = GoalPlanObservation {
                goal: g,
                last_meaningful_work_at: epoch,
                observed_since,
                stalled,
            };
            Ok(if changed {
                Mutation::changed(observation)
            } else {
                Mutation::unchanged(observation)
            })
        })
    }
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}
