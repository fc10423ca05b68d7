//! The audit log (`usage_events`): one row per thing that happened to a transfer.
//!
//! Every state transition appends its event inside the transition's own transaction, so the
//! log and the state can never disagree. Events the host observes without a state change
//! (a credential resolved or denied, a sandbox ceiling hit) are appended with
//! [`Store::record_event`]. Details are small JSON objects and never hold a secret.
//!
//! **Order.** A transfer's events are ordered by their `seq`, which counts the transfer's
//! events (1, 2, …) and is assigned as the transfer's maximum + 1 inside the appending
//! transaction (migration 0013): two transactions appending to one transfer read the same
//! maximum, so they cannot both commit (SQLite has one writer; on PostgreSQL one serializable
//! transaction fails with `40001` and runs again after the other committed). So a transfer's
//! `seq` order is its commit order, and paging backwards from a cursor never misses an event
//! that committed late. The event `id` stays the public handle and cursor; it is unique across
//! transfers, but on PostgreSQL (an identity: values in the order transactions took them) ids
//! need not follow commit order, so nothing orders by it.

use std::fmt;
use std::str::FromStr;

use ahp_store_sql::{OptionalExtension, Tx};
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
    /// The host's model gateway settled a model call (detail `{callId, model, outcome,
    /// inputTokens, cacheReadTokens, cacheWriteTokens, outputTokens, reservedMicroUsd,
    /// chargedMicroUsd, latencyMs}`), never with its text. Written only by the settlement.
    ModelCalled,
    /// The host called an MCP tool for the guest (detail `{server, tool, chargedMicroUsd,
    /// outcome}`, never its arguments or result).
    ToolCalled,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 17] = [
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
        Self::ModelCalled,
        Self::ToolCalled,
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
            Self::ModelCalled => "model_called",
            Self::ToolCalled => "tool_called",
        }
    }

    /// Whether this kind is written only by a state transition, a binding or a model call's
    /// settlement (and so refused by
    /// [`Store::record_event`]).
    pub const fn is_transition(self) -> bool {
        !matches!(
            self,
            Self::CredentialResolved | Self::CredentialDenied | Self::CeilingExceeded | Self::ToolCalled
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
    /// The event's id, unique across transfers: the cursor [`EventPage::before`] takes. A
    /// transfer's events are listed in the order they were committed (see the module docs),
    /// not by id.
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
/// Checks an event the host observed ([`Store::record_event`]): not a transition's kind, a
/// detail that is an object of at most [`MAX_EVENT_DETAIL_BYTES`].
pub(crate) fn check_observation(kind: EventKind, detail: &Value) -> Result<()> {
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
    Ok(())
}

pub(crate) fn append(tx: &Tx<'_>, transfer: &str, kind: EventKind, at: Timestamp, detail: Value) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO usage_events (transfer_id, type, at, detail, seq)
         VALUES (?1, ?2, ?3, ?4, (SELECT coalesce(max(seq), 0) + 1 FROM usage_events WHERE transfer_id = ?1))",
    )?
    .execute((transfer, kind.as_str(), at.as_micros(), detail.to_string()))?;
    Ok(())
}

/// Every event of `transfer`, oldest first. Unbounded: for the operator's own reads (the CLI's
/// JSON, the console until it pages); a caller-facing read uses [`page`].
pub(crate) fn list(conn: &Tx<'_>, transfer: &str) -> Result<Vec<Event>> {
    let mut stmt =
        conn.prepare_cached("SELECT id, type, at, detail FROM usage_events WHERE transfer_id = ?1 ORDER BY seq")?;
    let rows = stmt.query_map([transfer], raw)?;
    rows.map(|row| from_raw(transfer, row?)).collect()
}

/// Newest events one `get_status` page holds when the caller names no limit: a page a person
/// reads at a glance, and what a transfer's whole life (snapshot to activation, plus a few
/// reports) usually fits in.
pub const DEFAULT_EVENT_PAGE_LIMIT: usize = 50;
/// Most events one page holds: at most [`MAX_EVENT_DETAIL_BYTES`] of detail each, so a page
/// stays near 2 MiB of JSON at worst however long the transfer has lived.
pub const MAX_EVENT_PAGE_LIMIT: usize = 500;

/// Which events of a transfer to read: the newest `limit` of those older than `before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventPage {
    /// How many, 1 to [`MAX_EVENT_PAGE_LIMIT`].
    pub limit: usize,
    /// Only events older than this one (an event id of the same transfer, as a previous page's
    /// `next_before` gave it); `None` for the newest page.
    pub before: Option<i64>,
}

impl Default for EventPage {
    /// The newest [`DEFAULT_EVENT_PAGE_LIMIT`] events.
    fn default() -> Self {
        Self {
            limit: DEFAULT_EVENT_PAGE_LIMIT,
            before: None,
        }
    }
}

impl EventPage {
    /// Checks the limit, which needs no database.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (field `limit`) outside 1..=[`MAX_EVENT_PAGE_LIMIT`].
    pub fn validate(&self) -> Result<()> {
        if self.limit == 0 || self.limit > MAX_EVENT_PAGE_LIMIT {
            return Err(Error::invalid("limit", format!("must be 1 to {MAX_EVENT_PAGE_LIMIT}")));
        }
        Ok(())
    }
}

/// One page of a transfer's events, oldest first, and the cursor to the page before it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventsPage {
    /// At most the page's limit, oldest first; the newest of them is the newest event older
    /// than the page's cursor.
    pub events: Vec<Event>,
    /// Pass as `before` to read the older events; `None` when this page reaches the first.
    pub next_before: Option<i64>,
}

/// The page `page` of `transfer`'s events. The caller has already shown that the transfer
/// exists and that it may read it; this checks the cursor.
///
/// One range scan of `usage_events_by_transfer_seq (transfer_id, seq)` backwards from the
/// cursor's `seq`, reading one row past the limit to know whether older events exist. Every
/// event below the cursor had committed before the cursor's own event was appended (see the
/// module docs), so the older pages hold every event older than the first page's.
///
/// # Errors
///
/// [`Error::InvalidInput`] (field `before`) for a cursor that is not an event of `transfer`.
pub(crate) fn page(conn: &Tx<'_>, transfer: &str, page: EventPage) -> Result<EventsPage> {
    page.validate()?;
    let before_seq = match page.before {
        None => i64::MAX,
        Some(before) => conn
            .prepare_cached("SELECT seq FROM usage_events WHERE id = ?1 AND transfer_id = ?2")?
            .query_row((before, transfer), |r| r.get(0))
            .optional()?
            .ok_or_else(|| {
                Error::invalid(
                    "before",
                    "is not an event of this transfer (pass the nextBefore of the previous page)",
                )
            })?,
    };
    let mut stmt = conn.prepare_cached(
        "SELECT id, type, at, detail FROM usage_events WHERE transfer_id = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
    )?;
    let past_limit = i64::try_from(page.limit + 1).expect("the limit is small");
    let rows = stmt.query_map((transfer, before_seq, past_limit), raw)?;
    let mut events = rows.map(|row| from_raw(transfer, row?)).collect::<Result<Vec<_>>>()?;
    let more = events.len() > page.limit;
    events.truncate(page.limit);
    events.reverse();
    Ok(EventsPage {
        next_before: if more { events.first().map(|e| e.id) } else { None },
        events,
    })
}

type RawEvent = (i64, String, i64, String);

fn raw(r: &ahp_store_sql::Row) -> ahp_store_sql::SqlResult<RawEvent> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
}

fn from_raw(transfer: &str, (id, kind, at, detail): RawEvent) -> Result<Event> {
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
}

impl Store {
    /// One page of `transfer`'s events, for the operator's surfaces (the console, which has
    /// already decided who may see the transfer): as `get_status` pages them, without the
    /// transfer and budget beside them.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed transfer id, a limit outside
    /// 1..=[`MAX_EVENT_PAGE_LIMIT`] or a cursor that is not an event of the transfer;
    /// [`Error::TransferNotFound`]; [`Error::CorruptRow`] for an event this build cannot read.
    pub fn event_page(&mut self, transfer: &str, events: EventPage) -> Result<EventsPage> {
        crate::transfer::exists(&self.autocommit(), transfer)?;
        page(&self.autocommit(), transfer, events)
    }

    /// Appends an event the host observed without a state change (credential use, a ceiling).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a transition kind (those are written only by their
    /// transition), a detail that is not an object or is over [`MAX_EVENT_DETAIL_BYTES`];
    /// [`Error::TransferNotFound`] for an unknown transfer.
    pub fn record_event(&mut self, transfer: &str, kind: EventKind, detail: Value) -> Result<()> {
        check_observation(kind, &detail)?;
        let now = self.now();
        self.write(|tx| {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::owner::TransferOwner;
    use crate::snapshot::SnapshotInput;

    /// A transfer with `n` events in all (its `snapshot_created` and `n - 1` observations).
    fn transfer_with_events(store: &mut Store, n: usize) -> String {
        let input = SnapshotInput {
            source_host: "laptop".into(),
            system_prompt: "p".into(),
            message_history: vec![],
            tool_state: json!({}),
            mcp_config: vec![],
        };
        let t = store.snapshot_state(&input).unwrap().id;
        for i in 1..n {
            store
                .record_event(&t, EventKind::CredentialResolved, json!({ "n": i }))
                .unwrap();
        }
        t
    }

    fn page_of(store: &mut Store, t: &str, limit: usize, before: Option<i64>) -> Result<EventsPage> {
        store
            .get_status_as(t, &TransferOwner::Operator, EventPage { limit, before })
            .map(|s| s.page)
    }

    fn ids(events: &[Event]) -> Vec<i64> {
        events.iter().map(|e| e.id).collect()
    }

    #[test]
    fn a_page_holds_the_newest_events_in_order_at_the_limit_and_one_past_it() {
        let mut store = crate::testing::store().unwrap();
        let _other = transfer_with_events(&mut store, 3);
        let t = transfer_with_events(&mut store, MAX_EVENT_PAGE_LIMIT + 1);
        let all = list(&store.autocommit(), &t).unwrap();
        assert_eq!(all.len(), MAX_EVENT_PAGE_LIMIT + 1);

        // The default: the newest DEFAULT_EVENT_PAGE_LIMIT, oldest first, and a cursor.
        let newest = store
            .get_status_as(&t, &TransferOwner::Operator, EventPage::default())
            .unwrap();
        let tail = &all[all.len() - DEFAULT_EVENT_PAGE_LIMIT..];
        assert_eq!(newest.page.events, tail);
        assert_eq!(newest.page.next_before, Some(tail[0].id));

        // At the limit: the newest MAX events, and a cursor to the one left.
        let page = page_of(&mut store, &t, MAX_EVENT_PAGE_LIMIT, None).unwrap();
        assert_eq!(page.events, &all[1..]);
        assert_eq!(page.next_before, Some(all[1].id));
        let rest = page_of(&mut store, &t, MAX_EVENT_PAGE_LIMIT, page.next_before).unwrap();
        assert_eq!(rest.events, &all[..1]);
        assert_eq!(rest.events[0].kind, EventKind::SnapshotCreated);
        assert_eq!(rest.next_before, None, "the first event ends the log");

        // One past the limit is refused, as is an empty page.
        for limit in [0, MAX_EVENT_PAGE_LIMIT + 1, usize::MAX] {
            let refused = page_of(&mut store, &t, limit, None);
            assert!(
                matches!(&refused, Err(Error::InvalidInput { field, .. }) if *field == "limit"),
                "{limit}: {refused:?}"
            );
        }
    }

    #[test]
    fn the_operator_s_page_is_get_status_s_page_and_names_a_missing_transfer() {
        let mut store = crate::testing::store().unwrap();
        let t = transfer_with_events(&mut store, 12);
        for (limit, before) in [
            (5, None),
            (5, Some(list(&store.autocommit(), &t).unwrap()[7].id)),
            (50, None),
        ] {
            let page = EventPage { limit, before };
            assert_eq!(
                store.event_page(&t, page).unwrap(),
                page_of(&mut store, &t, limit, before).unwrap()
            );
        }
        assert!(matches!(
            store.event_page("tr_ffffffffffffffffffffffff", EventPage::default()),
            Err(Error::TransferNotFound(_))
        ));
        let other = transfer_with_events(&mut store, 2);
        let foreign = list(&store.autocommit(), &other).unwrap()[1].id;
        let refused = store.event_page(
            &t,
            EventPage {
                limit: 5,
                before: Some(foreign),
            },
        );
        assert!(
            matches!(&refused, Err(Error::InvalidInput { field, .. }) if field == "before"),
            "{refused:?}"
        );
    }

    #[test]
    fn paging_back_visits_every_event_once() {
        let mut store = crate::testing::store().unwrap();
        let t = transfer_with_events(&mut store, 23);
        let _later = transfer_with_events(&mut store, 2);
        let all = list(&store.autocommit(), &t).unwrap();
        let mut seen = Vec::new();
        let mut before = None;
        loop {
            let page = page_of(&mut store, &t, 5, before).unwrap();
            assert!(page.events.len() <= 5);
            seen.splice(0..0, page.events);
            match page.next_before {
                Some(cursor) => before = Some(cursor),
                None => break,
            }
        }
        assert_eq!(ids(&seen), ids(&all));
        // A log that fits one page has no cursor.
        let whole = page_of(&mut store, &t, all.len(), None).unwrap();
        assert_eq!((whole.events.len(), whole.next_before), (all.len(), None));
    }

    #[test]
    fn a_cursor_that_is_not_an_event_of_the_transfer_is_refused() {
        let mut store = crate::testing::store().unwrap();
        let other = transfer_with_events(&mut store, 2);
        let t = transfer_with_events(&mut store, 3);
        let foreign = list(&store.autocommit(), &other).unwrap()[0].id;
        let newest = list(&store.autocommit(), &t).unwrap().last().unwrap().id;
        for before in [foreign, newest + 1, 0, -1, i64::MAX, i64::MIN] {
            let refused = page_of(&mut store, &t, 10, Some(before));
            match &refused {
                Err(e @ Error::InvalidInput { field, .. }) if *field == "before" => {
                    assert!(e.to_string().contains("nextBefore"), "{e}");
                }
                other => panic!("{before}: {other:?}"),
            }
        }
        // The newest event is a cursor: everything older than it.
        let page = page_of(&mut store, &t, 10, Some(newest)).unwrap();
        assert_eq!(page.events.len(), 2);
    }
}
