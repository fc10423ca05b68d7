//! Transfers as stored: the row type, its queries, and the checks on ids a caller sends.
//!
//! A transfer belongs to its owner (see [`TransferOwner`]): every read or change a caller
//! makes by id goes through `load_for`, which refuses a transfer of another principal exactly
//! as it refuses a missing one ([`Error::TransferNotFound`], the same text), so a caller cannot
//! tell a foreign id from an unknown one. The operator sees every transfer.
//!
//! The operations that move a transfer between states live in [`lifecycle`](crate::lifecycle);
//! this file only reads.

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::Serialize;

use crate::budget::{self, Budget};
use crate::clock::Timestamp;
use crate::db::Store;
use crate::error::{Error, Result};
use crate::event::{self, Event, EventPage, EventsPage};
use crate::owner::TransferOwner;
use crate::snapshot::{McpServer, Message, SnapshotInput};
use crate::state::{Operation, Phase, Refusal, TransferStatus};
use crate::tier::Tier;

pub use crate::input::{MAX_LIST_LIMIT, TRANSFER_ID_PREFIX};

/// A transfer, without its snapshot content (see [`Store::snapshot`] for that).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Transfer {
    /// `tr_…`.
    pub id: String,
    /// Where it is in its life.
    pub status: TransferStatus,
    /// Whether an activation is in progress (only ever true while `pushed`).
    pub activating: bool,
    /// Where the session came from.
    pub source_host: String,
    /// SHA-256 of the snapshot's canonical JSON.
    pub checksum: String,
    /// Messages in the snapshot's history.
    pub message_count: u64,
    /// The destination's tier, once provisioned.
    pub tier: Option<Tier>,
    /// The guest component (digest or name) to run, once provisioned.
    pub component: Option<String>,
    /// When the snapshot was stored.
    pub created_at: Timestamp,
    /// When anything about the transfer last changed.
    pub updated_at: Timestamp,
    /// When it became `active`.
    pub activated_at: Option<Timestamp>,
    /// When it became `insolvent` (the grace period runs from here).
    pub insolvent_at: Option<Timestamp>,
    /// When it was terminated or expired.
    pub ended_at: Option<Timestamp>,
    /// Why it was terminated or expired.
    pub end_reason: Option<String>,
    /// The subject of the principal that created it (see [`TransferOwner`]):
    /// `operator:local` or `api-key:prn_…`. Not shown to tool callers.
    #[serde(skip)]
    pub owner_subject: String,
    /// The Agent identity it became when it was first bound (see
    /// [`Store::bind_transfer_agent`]); kept after the transfer ends, so the agent's
    /// conversations stay attributable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

impl Transfer {
    /// The phase [`transition`](crate::transition) works on.
    pub fn phase(&self) -> Phase {
        Phase {
            status: self.status,
            activating: self.activating,
        }
    }

    /// The principal that created it.
    ///
    /// # Errors
    ///
    /// [`Error::CorruptRow`] for a stored subject this build does not know (fails closed).
    pub fn owner(&self) -> Result<TransferOwner> {
        TransferOwner::from_subject(&self.owner_subject)
    }

    /// Whether `caller` may read and act on this transfer: its owner may, and the operator may
    /// act on every transfer.
    pub fn belongs_to(&self, caller: &TransferOwner) -> bool {
        *caller == TransferOwner::Operator || self.owner_subject == caller.subject()
    }
}

/// What `get_status` returns to a caller: the transfer, its budget and one page of its audit
/// log ([`Store::get_status_as`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransferStatusPage {
    /// The transfer.
    pub transfer: Transfer,
    /// Its budget, once provisioned.
    pub budget: Option<Budget>,
    /// The page of its events, oldest first, and the cursor to older ones.
    #[serde(flatten)]
    pub page: EventsPage,
}

/// A transfer, its budget and its whole audit log in order: the operator's unbounded read
/// ([`Store::get_status`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransferStatusReport {
    /// The transfer.
    pub transfer: Transfer,
    /// Its budget, once provisioned.
    pub budget: Option<Budget>,
    /// Every event, oldest first.
    pub events: Vec<Event>,
}

pub(crate) const TRANSFER_COLUMNS: &str = "id, status, activation_started_at, source_host, checksum, \
     message_count, tier, component, created_at, updated_at, activated_at, insolvent_at, ended_at, end_reason, \
     owner_subject, agent_id";

fn corrupt(reason: impl Into<String>) -> Error {
    Error::CorruptRow {
        table: "transfers",
        reason: reason.into(),
    }
}

fn ts(v: Option<i64>) -> Option<Timestamp> {
    v.map(Timestamp::from_micros)
}

/// Reads a row selected with [`TRANSFER_COLUMNS`]. Unknown statuses or tiers fail closed.
pub(crate) fn from_row(r: &Row) -> Result<Transfer> {
    let id: String = r.get(0)?;
    let status: String = r.get(1)?;
    let status = status.parse().map_err(|e| corrupt(format!("{id}: {e}")))?;
    let tier: Option<String> = r.get(6)?;
    let tier = tier
        .map(|t| t.parse::<Tier>())
        .transpose()
        .map_err(|e| corrupt(format!("{id}: {e}")))?;
    let message_count: i64 = r.get(5)?;
    Ok(Transfer {
        status,
        activating: r.get::<_, Option<i64>>(2)?.is_some(),
        source_host: r.get(3)?,
        checksum: r.get(4)?,
        message_count: u64::try_from(message_count).map_err(|_| corrupt(format!("{id}: negative message_count")))?,
        tier,
        component: r.get(7)?,
        created_at: Timestamp::from_micros(r.get(8)?),
        updated_at: Timestamp::from_micros(r.get(9)?),
        activated_at: ts(r.get(10)?),
        insolvent_at: ts(r.get(11)?),
        ended_at: ts(r.get(12)?),
        end_reason: r.get(13)?,
        owner_subject: r.get(14)?,
        agent_id: r.get(15)?,
        id,
    })
}

/// The phase `op` moves `t` to, or the error that names why not.
pub(crate) fn check(t: &Transfer, op: Operation) -> Result<Phase> {
    crate::state::transition(t.phase(), op).map_err(|refusal| match refusal {
        Refusal::ActivationInProgress => Error::ActivationInProgress { transfer: t.id.clone() },
        Refusal::NotAllowed => Error::InvalidTransition {
            transfer: t.id.clone(),
            operation: op,
            phase: t.phase(),
        },
    })
}

/// Checks that `transfer` has the shape of a transfer id.
pub(crate) use crate::input::check_transfer_id as check_id;

/// Loads `transfer`, or [`Error::TransferNotFound`].
pub(crate) fn load(conn: &Tx<'_>, transfer: &str) -> Result<Transfer> {
    check_id(transfer)?;
    let sql = format!("SELECT {TRANSFER_COLUMNS} FROM transfers WHERE id = ?1");
    conn.prepare_cached(&sql)?
        .query_row([transfer], |r| Ok(from_row(r)))
        .optional()?
        .unwrap_or_else(|| Err(Error::TransferNotFound(transfer.to_owned())))
}

/// Ok if `transfer` is a well-formed id of a transfer that exists (without reading its row).
pub(crate) fn exists(conn: &Tx<'_>, transfer: &str) -> Result<()> {
    check_id(transfer)?;
    conn.prepare_cached("SELECT 1 FROM transfers WHERE id = ?1")?
        .query_row([transfer], |_| Ok(()))
        .optional()?
        .ok_or_else(|| Error::TransferNotFound(transfer.to_owned()))
}

/// Loads `transfer` for `caller`: as [`load`], and a transfer that does not
/// [belong to](Transfer::belongs_to) `caller` is [`Error::TransferNotFound`] too — the one
/// place the ownership rule is applied.
pub(crate) fn load_for(conn: &Tx<'_>, transfer: &str, caller: &TransferOwner) -> Result<Transfer> {
    let t = load(conn, transfer)?;
    if t.belongs_to(caller) {
        Ok(t)
    } else {
        Err(Error::TransferNotFound(transfer.to_owned()))
    }
}

impl Store {
    /// One transfer.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed id, [`Error::TransferNotFound`],
    /// [`Error::CorruptRow`] for a row this build cannot read.
    pub fn transfer(&mut self, transfer: &str) -> Result<Transfer> {
        load(&self.autocommit(), transfer)
    }

    /// One transfer of `caller` (any transfer for the operator): another principal's transfer is
    /// refused exactly like a missing one.
    ///
    /// # Errors
    ///
    /// As [`transfer`](Self::transfer); [`Error::TransferNotFound`] for another principal's.
    pub fn transfer_as(&mut self, transfer: &str, caller: &TransferOwner) -> Result<Transfer> {
        load_for(&self.autocommit(), transfer, caller)
    }

    /// `get_status` for `caller`: the transfer, its budget and the page `page` of its event log
    /// (oldest first within the page). A transfer that is not `caller`'s is refused as if it did
    /// not exist, before the cursor is looked at.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed id, a limit outside
    /// 1..=[`MAX_EVENT_PAGE_LIMIT`](crate::event::MAX_EVENT_PAGE_LIMIT) (field `limit`) or a
    /// cursor that is not an event of this transfer (field `before`);
    /// [`Error::TransferNotFound`] for a missing or foreign transfer; [`Error::CorruptRow`].
    pub fn get_status_as(
        &mut self,
        transfer: &str,
        caller: &TransferOwner,
        page: EventPage,
    ) -> Result<TransferStatusPage> {
        check_id(transfer)?;
        page.validate()?;
        let t = load_for(&self.autocommit(), transfer, caller)?;
        Ok(TransferStatusPage {
            budget: budget::load(&self.autocommit(), transfer)?,
            page: event::page(&self.autocommit(), transfer, page)?,
            transfer: t,
        })
    }

    /// The operator's `get_status`: the transfer, its budget and its whole event log, oldest
    /// event first, however long. For the operator's own tools (the CLI, the console); a
    /// caller-facing read is [`get_status_as`](Self::get_status_as), which pages.
    ///
    /// # Errors
    ///
    /// As [`transfer`](Self::transfer).
    pub fn get_status(&mut self, transfer: &str) -> Result<TransferStatusReport> {
        Ok(TransferStatusReport {
            transfer: load(&self.autocommit(), transfer)?,
            budget: budget::load(&self.autocommit(), transfer)?,
            events: event::list(&self.autocommit(), transfer)?,
        })
    }

    /// The snapshot a transfer carries, as `snapshot_state` received it.
    ///
    /// # Errors
    ///
    /// As [`transfer`](Self::transfer); [`Error::CorruptRow`] if stored JSON does not parse.
    pub fn snapshot(&mut self, transfer: &str) -> Result<SnapshotInput> {
        check_id(transfer)?;
        let row = self
            .autocommit()
            .prepare_cached(
                "SELECT source_host, system_prompt, message_history, tool_state, mcp_config
                 FROM transfers WHERE id = ?1",
            )?
            .query_row([transfer], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })
            .optional()?
            .ok_or_else(|| Error::TransferNotFound(transfer.to_owned()))?;
        let (source_host, system_prompt, history, tool_state, mcp) = row;
        let bad = |what: &str, e: serde_json::Error| corrupt(format!("{transfer}: {what}: {e}"));
        Ok(SnapshotInput {
            source_host,
            system_prompt,
            message_history: serde_json::from_str::<Vec<Message>>(&history).map_err(|e| bad("message_history", e))?,
            tool_state: serde_json::from_str(&tool_state).map_err(|e| bad("tool_state", e))?,
            mcp_config: serde_json::from_str::<Vec<McpServer>>(&mcp).map_err(|e| bad("mcp_config", e))?,
        })
    }

    /// The newest transfers first, optionally only those with `status`; at most `limit`
    /// (capped at [`MAX_LIST_LIMIT`]).
    ///
    /// # Errors
    ///
    /// [`Error::CorruptRow`] for a row this build cannot read.
    pub fn list_transfers(&mut self, status: Option<TransferStatus>, limit: usize) -> Result<Vec<Transfer>> {
        let sql = format!(
            "SELECT {TRANSFER_COLUMNS} FROM transfers WHERE ?1 IS NULL OR status = ?1
             ORDER BY created_at DESC, id LIMIT ?2"
        );
        let limit = i64::try_from(limit.min(MAX_LIST_LIMIT)).unwrap_or(0);
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(&sql)?;
        let rows = stmt.query_map((status.map(TransferStatus::as_str), limit), |r| Ok(from_row(r)))?;
        rows.map(|r| r?).collect()
    }
}
