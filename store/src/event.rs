//! The audit log (`usage_events`): one row per thing that happened to a transfer.
//!
//! Every state transition appends its event inside the transition's own transaction, so the
//! log and the state can never disagree. Events the host observes without a state change
//! (a credential resolved or denied, a sandbox ceiling hit) are appended with
//! [`Store::record_event`]. Details are small JSON objects and never hold a secret.

use std::fmt;
use std::str::FromStr;

use rusqlite::{OptionalExtension, Transaction};
use serde::Serialize;
use serde_json::Value;

use crate::clock::Timestamp;
use crate::db::Store;
use crate::error::{Error, Result};

/// Largest event detail, in bytes of JSON: an audit entry is a record, not a payload.
pub const MAX_EVENT_DETAIL_BYTES: usize = 4096;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// `snapshot_state` stored a snapshot (status `staged`).
    SnapshotCreated,
    /// `provision_runtime` sized and budgeted the destination (`provisioned`).
    RuntimeProvisioned,
    /// `push_state` staged the snapshot for the destination (`pushed`).
    StatePushed,
    /// `activate` consumed its token and the sandbox started resuming the guest.
    ActivationStarted,
    /// The guest's `resume` returned Ok (`active`).
    Activated,
    /// The guest's `resume` failed, trapped or broke a ceiling; the transfer stays `pushed`.
    ActivationFailed,
    /// `report_usage` added spend.
    UsageReported,
    /// Spend reached the allocation (`insolvent`); the grace period starts at this event's time.
    Insolvent,
    /// The transfer was torn down (`terminated`).
    Terminated,
    /// The transfer was never activated within the TTL (`expired`).
    Expired,
    /// The guest resolved a credential reference it was allowed (the value is never logged).
    CredentialResolved,
    /// The guest asked for a credential reference it was not allowed.
    CredentialDenied,
    /// The guest broke one of its tier's ceilings; the detail names which.
    CeilingExceeded,
    /// The host bound the transfer to its Agent identity and attached the agent's endpoint
    /// (detail `{agentId, endpointId, generation}`); a re-bind after a restart appends another.
    AgentBound,
    /// The transfer left `active` and its agent lost its turns (detail `{agentId, endpointId,
    /// generation, endpoint}`, where `endpoint` is `wake_revoked` when it became `insolvent` and
    /// `detached` when it ended). Written in the transition's transaction with its timestamp,
    /// just before the transition's own events. The agent and its conversations stay readable.
    AgentUnbound,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 15] = [
        Self::SnapshotCreated,
        Self::RuntimeProvisioned,
        Self::StatePushed,
        Self::ActivationStarted,
        Self::Activated,
        Self::ActivationFailed,
        Self::UsageReported,
        Self::Insolvent,
        Self::Terminated,
        Self::Expired,
        Self::CredentialResolved,
        Self::CredentialDenied,
        Self::CeilingExceeded,
        Self::AgentBound,
        Self::AgentUnbound,
    ];

    /// The name stored in `usage_events.type`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SnapshotCreated => "snapshot_created",
            Self::RuntimeProvisioned => "runtime_provisioned",
            Self::StatePushed => "state_pushed",
            Self::ActivationStarted => "activation_started",
            Self::Activated => "activated",
            Self::ActivationFailed => "activation_failed",
            Self::UsageReported => "usage_reported",
            Self::Insolvent => "insolvent",
            Self::Terminated => "terminated",
            Self::Expired => "expired",
            Self::CredentialResolved => "credential_resolved",
            Self::CredentialDenied => "credential_denied",
            Self::CeilingExceeded => "ceiling_exceeded",
            Self::AgentBound => "agent_bound",
            Self::AgentUnbound => "agent_unbound",
        }
    }

    /// Whether this kind is written only by a state transition or a binding (and so refused by
    /// [`Store::record_event`]).
    pub const fn is_transition(self) -> bool {
        !matches!(
            self,
            Self::CredentialResolved | Self::CredentialDenied | Self::CeilingExceeded
        )
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EventKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown event type {s:?}"))
    }
}

/// One audit-log row.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Position in the log; later events have larger ids.
    pub id: i64,
    /// The transfer it belongs to.
    pub transfer_id: String,
    /// What happened.
    pub kind: EventKind,
    /// When.
    pub at: Timestamp,
    /// Particulars (a JSON object).
    pub detail: Value,
}

/// Appends an event inside `tx`.
pub(crate) fn append(
    tx: &Transaction<'_>,
    transfer: &str,
    kind: EventKind,
    at: Timestamp,
    detail: Value,
) -> Result<()> {
    tx.prepare_cached("INSERT INTO usage_events (transfer_id, type, at, detail) VALUES (?1, ?2, ?3, ?4)")?
        .execute((transfer, kind.as_str(), at.as_micros(), detail.to_string()))?;
    Ok(())
}

/// Every event of `transfer`, oldest first.
pub(crate) fn list(conn: &rusqlite::Connection, transfer: &str) -> Result<Vec<Event>> {
    let mut stmt =
        conn.prepare_cached("SELECT id, type, at, detail FROM usage_events WHERE transfer_id = ?1 ORDER BY id")?;
    let rows = stmt.query_map([transfer], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, String>(3)?,
        ))
    })?;
    rows.map(|row| {
        let (id, kind, at, detail) = row?;
        let corrupt = |reason: String| Error::CorruptRow {
            table: "usage_events",
            reason,
        };
        Ok(Event {
            id,
            transfer_id: transfer.to_owned(),
            kind: kind.parse().map_err(corrupt)?,
            at: Timestamp::from_micros(at),
            detail: serde_json::from_str(&detail).map_err(|e| corrupt(format!("event {id} detail: {e}")))?,
        })
    })
    .collect()
}

impl Store {
    /// Appends an event the host observed without a state change (credential use, a ceiling).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a transition kind (those are written only by their
    /// transition), a detail that is not an object or is over [`MAX_EVENT_DETAIL_BYTES`];
    /// [`Error::TransferNotFound`] for an unknown transfer.
    pub fn record_event(&mut self, transfer: &str, kind: EventKind, detail: Value) -> Result<()> {
        if kind.is_transition() {
            return Err(Error::invalid(
                "kind",
                format!("{kind} is written only by its transition"),
            ));
        }
        if !detail.is_object() {
            return Err(Error::invalid("detail", "must be a JSON object"));
        }
        let len = detail.to_string().len();
        if len > MAX_EVENT_DETAIL_BYTES {
            return Err(Error::invalid(
                "detail",
                format!("is {len} bytes; the limit is {MAX_EVENT_DETAIL_BYTES}"),
            ));
        }
        let now = self.now();
        self.write(|tx, _| {
            let exists = tx
                .query_row("SELECT 1 FROM transfers WHERE id = ?1", [transfer], |_| Ok(()))
                .optional()?
                .is_some();
            if !exists {
                return Err(Error::TransferNotFound(transfer.to_owned()));
            }
            append(tx, transfer, kind, now, detail.clone())
        })
    }
}
