//! Wake intents: "this agent should get another processing opportunity".
//!
//! Deliveries coalesce: an agent has at most one open wake (`pending`, or `claimed` by a carrier
//! that has not yet crossed the dispatch fence), and each further delivery raises its high-water
//! mark and count instead of creating another — a burst of fifty messages is one wake with count
//! fifty. Every message and delivery stays independently durable; the wake only says that there
//! is something to look at. A wake reaches its agent through the attempts of
//! [`attempt`](super::attempt); once one has crossed the dispatch fence the wake is never pending
//! again, and later deliveries make a new wake.
//!
//! ```text
//! pending ──claim──► claimed ──dispatch (fence)──► dispatched ──consume──► consumed
//!    ▲ │                │                              ▲
//!    └─┼───release──────┘                              │
//!      └──────────activate (explicit, the fence)───────┘
//! ```

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::admission;
use super::audit::{self, AuditKind};
use super::bounds;
use super::endpoint::AgentActor;
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::ids::WAKE_ID_PREFIX;
use super::principal::Caller;
use super::scope::Scope;
use super::state::WakeState;
use crate::clock::Timestamp;
use crate::db::Store;
use crate::db::raced_insert;
use crate::id::new_id;

/// What created a wake: its first cause. Later causes coalesce into the same open wake (the
/// store keeps their full list); a turn should still read its whole inbox. Serialized as
/// `{"kind": "message"}` or `{"kind": "wait", "id": "wait_…"}`, the WIT's
/// `conversations.wake-origin`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum WakeOrigin {
    /// Messages were delivered to the agent's inbox.
    Message,
    /// An attempt of a task assigned to the agent started; the task id (`tsk_…`).
    AgentTaskAttempt(String),
    /// An attention event for the agent; the event id (`att_…`).
    AttentionEvent(String),
    /// A wait the agent registered fired; the wait id (`wait_…`).
    Wait(String),
}

impl WakeOrigin {
    /// The stored kind: `message`, `agent_task_attempt`, `attention_event` or `wait`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Message => "message",
            Self::AgentTaskAttempt(_) => "agent_task_attempt",
            Self::AttentionEvent(_) => "attention_event",
            Self::Wait(_) => "wait",
        }
    }

    /// The id it carries (none for `message`).
    pub fn subject(&self) -> Option<&str> {
        match self {
            Self::Message => None,
            Self::AgentTaskAttempt(id) | Self::AttentionEvent(id) | Self::Wait(id) => Some(id),
        }
    }

    /// Parses a stored (kind, id) pair; anything this build does not know fails closed.
    pub(crate) fn from_stored(kind: &str, id: Option<String>) -> std::result::Result<Self, String> {
        match (kind, id) {
            ("message", None) => Ok(Self::Message),
            ("agent_task_attempt", Some(id)) => Ok(Self::AgentTaskAttempt(id)),
            ("attention_event", Some(id)) => Ok(Self::AttentionEvent(id)),
            ("wait", Some(id)) => Ok(Self::Wait(id)),
            (kind, id) => Err(format!("unknown wake origin {kind:?} (id {id:?})")),
        }
    }
}

/// One cause coalesced into a wake (other than a delivery, which the inbox records).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WakeCause {
    /// The wake.
    pub wake_id: String,
    /// The cause.
    pub origin: WakeOrigin,
    /// When it coalesced.
    pub created_at: Timestamp,
}

/// A wake intent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Wake {
    /// `wk_…`.
    pub id: String,
    /// The agent to wake.
    pub agent_id: String,
    /// Its state.
    pub state: WakeState,
    /// What created it (its first cause).
    pub origin: WakeOrigin,
    /// Deliveries coalesced into it (0 for a wake only tasks, attention or waits caused).
    pub delivery_count: u64,
    /// The delivery order of the first of them (0 while there is none).
    pub first_delivery_order: u64,
    /// The delivery order of the newest of them (the high-water mark).
    pub high_water_order: u64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it crossed the dispatch fence.
    pub dispatched_at: Option<Timestamp>,
    /// When it was consumed.
    pub consumed_at: Option<Timestamp>,
}

/// The columns [`wake_from_row`] reads, in order.
pub(crate) const WAKE_COLUMNS: &str = "id, agent_id, state, delivery_count, first_delivery_order, high_water_order, created_at, updated_at, dispatched_at, consumed_at, origin, origin_id";

/// A stored count or order as `u64`; a negative one is a corrupt row.
pub(crate) fn nonneg(table: &'static str, id: &str, v: i64) -> Result<u64> {
    u64::try_from(v).map_err(|_| Error::corrupt(table, format!("{id}: negative count")))
}

/// Reads a row selected with [`WAKE_COLUMNS`]. An unknown state fails closed.
pub(crate) fn wake_from_row(r: &Row) -> Result<Wake> {
    let id: String = r.get(0)?;
    let state: String = r.get(2)?;
    let state = state
        .parse()
        .map_err(|e| Error::corrupt("wakes", format!("{id}: {e}")))?;
    let origin: String = r.get(10)?;
    let origin =
        WakeOrigin::from_stored(&origin, r.get(11)?).map_err(|e| Error::corrupt("wakes", format!("{id}: {e}")))?;
    Ok(Wake {
        agent_id: r.get(1)?,
        state,
        origin,
        delivery_count: nonneg("wakes", &id, r.get(3)?)?,
        first_delivery_order: nonneg("wakes", &id, r.get(4)?)?,
        high_water_order: nonneg("wakes", &id, r.get(5)?)?,
        created_at: Timestamp::from_micros(r.get(6)?),
        updated_at: Timestamp::from_micros(r.get(7)?),
        dispatched_at: r.get::<_, Option<i64>>(8)?.map(Timestamp::from_micros),
        consumed_at: r.get::<_, Option<i64>>(9)?.map(Timestamp::from_micros),
        id,
    })
}

/// Loads `wake` if it targets `agent`; otherwise [`Error::WakeNotFound`].
pub(crate) fn load_for(conn: &Tx<'_>, agent: &str, wake: &str) -> Result<Wake> {
    let sql = format!("SELECT {WAKE_COLUMNS} FROM wakes WHERE id = ?1 AND agent_id = ?2");
    conn.prepare_cached(&sql)?
        .query_row((wake, agent), |r| Ok(wake_from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::WakeNotFound(wake.to_owned())))
}

/// Checks a wake id's shape before any lookup.
pub(crate) fn check_wake_id(wake: &str) -> Result<()> {
    bounds::id("wakeId", wake, WAKE_ID_PREFIX)
}

/// Loads `wake` without scoping: only for a wake already authorized in this transaction.
pub(crate) fn load_wake(conn: &Tx<'_>, wake: &str) -> Result<Wake> {
    let sql = format!("SELECT {WAKE_COLUMNS} FROM wakes WHERE id = ?1");
    conn.prepare_cached(&sql)?
        .query_row([wake], |r| Ok(wake_from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::WakeNotFound(wake.to_owned())))
}

/// The unique index that keeps an agent to one open wake (see [`raced_insert`]).
const ONE_OPEN_WAKE: &str = "wakes_one_open";

/// Coalesces the delivery `order` into `agent`'s open wake, or creates a pending one.
///
/// Every wake of the agent not known to be past the fence is read and parsed, so a wake in a
/// state this build does not know fails the post (closed) instead of being skipped and joined by
/// a second open wake.
pub(crate) fn coalesce(tx: &Tx<'_>, agent: &str, order: u64, now: Timestamp) -> Result<()> {
    let sql =
        format!("SELECT {WAKE_COLUMNS} FROM wakes WHERE agent_id = ?1 AND state NOT IN ('dispatched', 'consumed')");
    let open: Vec<Wake> = tx
        .prepare_cached(&sql)?
        .query_map([agent], |r| Ok(wake_from_row(r)))?
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .collect::<Result<_>>()?;
    if let Some(w) = open.first() {
        tx.prepare_cached(
            "UPDATE wakes SET delivery_count = delivery_count + 1, high_water_order = ?2, updated_at = ?3,
                 first_delivery_order = CASE WHEN delivery_count = 0 THEN ?2 ELSE first_delivery_order END
             WHERE id = ?1 AND state IN ('pending', 'claimed')",
        )?
        .execute((&w.id, order as i64, now.as_micros()))?;
    } else {
        let order = order as i64;
        create_pending(tx, agent, (1, order, order), false, now)?;
    }
    Ok(())
}

/// Creates `agent`'s pending wake over `count` queued deliveries from order `first` to `high`,
/// audited `wake_created` (with `"leftover": true` for one [`rewake_for_leftovers`] makes).
/// The unique index refuses a second open wake ([`ONE_OPEN_WAKE`]).
fn create_pending(
    tx: &Tx<'_>,
    agent: &str,
    (count, first, high): (i64, i64, i64),
    leftover: bool,
    now: Timestamp,
) -> Result<()> {
    let id = new_id(WAKE_ID_PREFIX);
    tx.prepare_cached(
        "INSERT INTO wakes (id, agent_id, state, delivery_count, first_delivery_order, high_water_order, created_at, updated_at, seq)
         VALUES (?1, ?2, 'pending', ?3, ?4, ?5, ?6, ?6, (SELECT coalesce(max(seq), 0) + 1 FROM wakes WHERE agent_id = ?2))",
    )?
    .execute((&id, agent, count, first, high, now.as_micros()))
    .map_err(raced_insert(ONE_OPEN_WAKE))?;
    let mut detail = json!({ "wakeId": id, "firstDeliveryOrder": first });
    if leftover {
        detail["leftover"] = json!(true);
    }
    audit::record(tx, AuditKind::WakeCreated, Some(agent), None, detail, now)
}

/// After a turn of `agent` dispatched at `since` ended: if it consumed at least one delivery
/// and others are still queued, and the agent has no open wake, creates a pending wake for the
/// queued ones (audited `wake_created`, with `"leftover": true`) — the deliveries a turn could
/// not get to (past its reply bound, its wall clock spent on a message it failed on) are not
/// left waiting for the next post. Progress is the bound: each such wake follows a turn that
/// consumed something, so an agent that answers nothing is never woken again by its own
/// leftovers. Returns whether it created a wake.
pub(crate) fn rewake_for_leftovers(tx: &Tx<'_>, agent: &str, since: Timestamp, now: Timestamp) -> Result<bool> {
    let progressed: bool = tx
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM deliveries
                            WHERE recipient_agent_id = ?1 AND state = 'consumed' AND consumed_at >= ?2)",
        )?
        .query_row((agent, since.as_micros()), |r| r.get(0))?;
    if !progressed {
        return Ok(false);
    }
    let open: bool = tx
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM wakes WHERE agent_id = ?1 AND state IN ('pending', 'claimed'))")?
        .query_row([agent], |r| r.get(0))?;
    if open {
        return Ok(false);
    }
    let (count, first, high): (i64, Option<i64>, Option<i64>) = tx
        .prepare_cached(
            "SELECT count(*), min(delivery_order), max(delivery_order) FROM deliveries
             WHERE recipient_agent_id = ?1 AND state = 'queued'",
        )?
        .query_row([agent], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    let (Some(first), Some(high)) = (first, high) else {
        return Ok(false);
    };
    create_pending(tx, agent, (count, first, high), true, now)?;
    Ok(true)
}

/// Coalesces a non-message cause into `agent`'s open wake, or creates a pending wake with that
/// origin (and no deliveries); records the cause either way and returns the wake's id. A wait
/// or an attention event can be the cause of one wake only: the `wake_causes_once` index
/// refuses a second (a store bug, never a caller's mistake).
pub(crate) fn coalesce_cause(tx: &Tx<'_>, agent: &str, origin: &WakeOrigin, now: Timestamp) -> Result<String> {
    let Some(subject) = origin.subject() else {
        return Err(Error::corrupt("wakes", "a message cause is coalesced by its delivery"));
    };
    let sql =
        format!("SELECT {WAKE_COLUMNS} FROM wakes WHERE agent_id = ?1 AND state NOT IN ('dispatched', 'consumed')");
    let open: Vec<Wake> = tx
        .prepare_cached(&sql)?
        .query_map([agent], |r| Ok(wake_from_row(r)))?
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .collect::<Result<_>>()?;
    let id = if let Some(w) = open.first() {
        tx.prepare_cached("UPDATE wakes SET updated_at = ?2 WHERE id = ?1 AND state IN ('pending', 'claimed')")?
            .execute((&w.id, now.as_micros()))?;
        w.id.clone()
    } else {
        let id = new_id(WAKE_ID_PREFIX);
        tx.prepare_cached(
            "INSERT INTO wakes (id, agent_id, state, origin, origin_id, delivery_count, first_delivery_order, high_water_order, created_at, updated_at, seq)
             VALUES (?1, ?2, 'pending', ?3, ?4, 0, 0, 0, ?5, ?5, (SELECT coalesce(max(seq), 0) + 1 FROM wakes WHERE agent_id = ?2))",
        )?
        .execute((&id, agent, origin.kind(), subject, now.as_micros()))
        .map_err(raced_insert(ONE_OPEN_WAKE))?;
        audit::record(
            tx,
            AuditKind::WakeCreated,
            Some(agent),
            None,
            json!({ "wakeId": id, "origin": origin.kind(), "originId": subject }),
            now,
        )?;
        id
    };
    tx.prepare_cached("INSERT INTO wake_causes (wake_id, origin, subject_id, created_at) VALUES (?1, ?2, ?3, ?4)")?
        .execute((&id, origin.kind(), subject, now.as_micros()))?;
    super::woken::record(agent);
    Ok(id)
}

/// Checks that `wake` may give a reply its identity: it targets `agent` and crossed the fence.
pub(crate) fn check_reply_identity(tx: &Tx<'_>, agent: &str, wake: &str) -> Result<()> {
    let w = load_for(tx, agent, wake)?;
    match w.state {
        WakeState::Dispatched | WakeState::Consumed => Ok(()),
        state => Err(Error::InvalidWakeState {
            wake: wake.to_owned(),
            operation: "reply under",
            state,
        }),
    }
}

impl Store {
    /// The acting agent's wakes, newest first, at most `limit`.
    ///
    /// # Errors
    ///
    /// The endpoint admission errors; [`Error::InvalidInput`] for a bad limit;
    /// [`Error::MissingScope`] without `communication:read`.
    pub fn list_wakes(&mut self, caller: &Caller, actor: &AgentActor, limit: usize) -> Result<Vec<Wake>> {
        caller.require(Scope::Read)?;
        actor.validate()?;
        bounds::page_limit(limit)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            admission::admit(&tx, caller, actor, now)?;
            let sql = format!("SELECT {WAKE_COLUMNS} FROM wakes WHERE agent_id = ?1 ORDER BY seq DESC LIMIT ?2");
            let mut stmt = tx.prepare_cached(&sql)?;
            let rows = stmt.query_map((&actor.agent, limit as i64), |r| Ok(wake_from_row(r)))?;
            rows.map(|r| r?).collect()
        })
    }

    /// The causes other than deliveries coalesced into the acting agent's wake `wake`, in order
    /// (at most [`bounds::MAX_PAGE_LIMIT`]; the first is the wake's origin unless a delivery
    /// created it).
    ///
    /// # Errors
    ///
    /// The endpoint admission errors; [`Error::WakeNotFound`] for a wake not the agent's;
    /// [`Error::MissingScope`] without `communication:read`.
    #[cfg(any(test, feature = "testing"))]
    pub fn wake_causes(&mut self, caller: &Caller, actor: &AgentActor, wake: &str) -> Result<Vec<WakeCause>> {
        caller.require(Scope::Read)?;
        actor.validate()?;
        check_wake_id(wake)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_read()?;
            admission::admit(&tx, caller, actor, now)?;
            load_for(&tx, &actor.agent, wake)?;
            let mut stmt = tx.prepare_cached(
                "SELECT origin, subject_id, created_at FROM wake_causes WHERE wake_id = ?1 ORDER BY id LIMIT ?2",
            )?;
            let rows = stmt.query_map((wake, bounds::MAX_PAGE_LIMIT as i64), |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (kind, subject, at) = row?;
                let origin = WakeOrigin::from_stored(&kind, Some(subject))
                    .map_err(|e| Error::corrupt("wake_causes", format!("{wake}: {e}")))?;
                out.push(WakeCause {
                    wake_id: wake.to_owned(),
                    origin,
                    created_at: Timestamp::from_micros(at),
                });
            }
            Ok(out)
        })
    }

    /// Fault injection for tests: while on, every write to the `wakes` table on this connection
    /// fails, so a post dies inside its transaction exactly at the wake write. Compiled only
    /// into this crate's own tests: no release build carries it.
    ///
    /// # Errors
    ///
    /// Only if SQLite fails.
    #[cfg(test)]
    pub(crate) fn inject_wake_write_failure(&mut self, on: bool) -> Result<()> {
        if on {
            self.conn.execute_batch(
                "CREATE TEMP TRIGGER IF NOT EXISTS fault_wake_insert BEFORE INSERT ON main.wakes
                   BEGIN SELECT RAISE(ABORT, 'injected wake write failure'); END;
                 CREATE TEMP TRIGGER IF NOT EXISTS fault_wake_update BEFORE UPDATE ON main.wakes
                   BEGIN SELECT RAISE(ABORT, 'injected wake write failure'); END;",
            )?;
        } else {
            self.conn.execute_batch(
                "DROP TRIGGER IF EXISTS temp.fault_wake_insert; DROP TRIGGER IF EXISTS temp.fault_wake_update;",
            )?;
        }
        Ok(())
    }
}
