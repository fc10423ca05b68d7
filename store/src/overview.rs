//! Read models for people watching transfers: one row per transfer with its budget and latest
//! event (the console's transfers list), and a snapshot's summary without its content (the
//! transfer page).
//!
//! Both are single queries sized for a page: the list joins each transfer to its budget and to
//! its newest event through the `(transfer_id, id)` index, so 1,000 rows cost one statement; the
//! summary measures the snapshot's parts in SQL instead of loading up to 10 MiB of history.

use ahp_store_sql::{OptionalExtension, Row};
use serde::Serialize;

use crate::budget::Budget;
use crate::clock::Timestamp;
use crate::db::Store;
use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::owner::TransferOwner;
use crate::snapshot::McpServer;
use crate::state::TransferStatus;
use crate::transfer::{self, MAX_LIST_LIMIT, TRANSFER_COLUMNS, Transfer};

/// A transfer as a list shows it: the transfer, its budget, and what last happened to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransferSummary {
    /// The transfer.
    pub transfer: Transfer,
    /// Its budget, once provisioned.
    pub budget: Option<Budget>,
    /// Its newest event's kind and time (every transfer has at least `snapshot_created`).
    pub last_event: Option<(EventKind, Timestamp)>,
}

/// What a snapshot holds, measured rather than loaded: never a credential value (a snapshot
/// holds none), and no message content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotSummary {
    /// Where the session came from.
    pub source_host: String,
    /// Messages in the history.
    pub message_count: u64,
    /// Bytes of the system prompt.
    pub system_prompt_bytes: u64,
    /// Bytes of the history's JSON.
    pub history_bytes: u64,
    /// Bytes of the tool state's JSON.
    pub tool_state_bytes: u64,
    /// The MCP servers the session used, each with its credential *reference*.
    pub mcp_servers: Vec<McpServer>,
}

fn corrupt(reason: String) -> Error {
    Error::CorruptRow {
        table: "transfers",
        reason,
    }
}

fn summary_from_row(r: &Row) -> Result<TransferSummary> {
    let transfer = transfer::from_row(r)?;
    let n = TRANSFER_COLUMNS.split(',').count();
    let money = |i: usize| -> Result<Option<u64>> {
        r.get::<_, Option<i64>>(n + i)?
            .map(|v| u64::try_from(v).map_err(|_| corrupt(format!("{}: negative budget", transfer.id))))
            .transpose()
    };
    let budget = match (money(0)?, money(1)?, money(2)?) {
        (Some(allocated), Some(rate), Some(spent)) => Some(Budget {
            allocated_micro_usd: allocated,
            rate_micro_usd_per_cpu_second: rate,
            spent_micro_usd: spent,
            reserved_micro_usd: money(5)?.unwrap_or(0),
        }),
        _ => None,
    };
    let kind: Option<String> = r.get(n + 3)?;
    let at: Option<i64> = r.get(n + 4)?;
    let last_event = match (kind, at) {
        (Some(kind), Some(at)) => Some((
            kind.parse::<EventKind>()
                .map_err(|e| corrupt(format!("{}: {e}", transfer.id)))?,
            Timestamp::from_micros(at),
        )),
        _ => None,
    };
    Ok(TransferSummary {
        transfer,
        budget,
        last_event,
    })
}

impl Store {
    /// The newest transfers of `owner` first (every transfer for the operator) with their
    /// budgets and latest events, optionally only those with `status`; at most `limit` (capped
    /// at [`MAX_LIST_LIMIT`]).
    ///
    /// # Errors
    ///
    /// [`Error::CorruptRow`] for a row this build cannot read (an unknown status, tier or event
    /// kind fails closed).
    pub fn list_transfer_summaries(
        &mut self,
        owner: &TransferOwner,
        status: Option<TransferStatus>,
        limit: usize,
    ) -> Result<Vec<TransferSummary>> {
        let columns = TRANSFER_COLUMNS
            .split(',')
            .map(|c| format!("t.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT {columns}, b.allocated_micro_usd, b.rate_micro_usd_per_cpu_second, b.spent_micro_usd,
                    e.type, e.at, b.reserved_micro_usd
             FROM transfers t
             LEFT JOIN budgets b ON b.transfer_id = t.id
             LEFT JOIN usage_events e
               ON e.transfer_id = t.id AND e.seq = (SELECT MAX(seq) FROM usage_events WHERE transfer_id = t.id)
             WHERE (?1 IS NULL OR t.status = ?1) AND (?3 IS NULL OR t.owner_subject = ?3)
             ORDER BY t.created_at DESC, t.id LIMIT ?2"
        );
        let limit = i64::try_from(limit.min(MAX_LIST_LIMIT)).unwrap_or(0);
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(&sql)?;
        let subject = (*owner != TransferOwner::Operator).then(|| owner.subject());
        let rows = stmt.query_map((status.map(TransferStatus::as_str), limit, subject), |r| {
            Ok(summary_from_row(r))
        })?;
        rows.map(|r| r?).collect()
    }

    /// A transfer's snapshot, measured: sizes, the message count and the MCP servers with their
    /// credential references.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed id, [`Error::TransferNotFound`],
    /// [`Error::CorruptRow`] if the stored server list does not parse.
    pub fn snapshot_summary(&mut self, transfer: &str) -> Result<SnapshotSummary> {
        transfer::check_id(transfer)?;
        let row = self
            .autocommit()
            .prepare_cached(
                "SELECT source_host, message_count, octet_length(system_prompt),
                        octet_length(message_history), octet_length(tool_state), mcp_config
                 FROM transfers WHERE id = ?1",
            )?
            .query_row([transfer], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, String>(5)?,
                ))
            })
            .optional()?
            .ok_or_else(|| Error::TransferNotFound(transfer.to_owned()))?;
        let (source_host, messages, prompt, history, tool_state, mcp) = row;
        let size = |v: i64| u64::try_from(v).map_err(|_| corrupt(format!("{transfer}: negative size")));
        Ok(SnapshotSummary {
            source_host,
            message_count: size(messages)?,
            system_prompt_bytes: size(prompt)?,
            history_bytes: size(history)?,
            tool_state_bytes: size(tool_state)?,
            mcp_servers: serde_json::from_str(&mcp).map_err(|e| corrupt(format!("{transfer}: mcp_config: {e}")))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::*;

    fn snapshot(servers: usize) -> SnapshotInput {
        SnapshotInput {
            source_host: "laptop".into(),
            system_prompt: "Forecast é".into(),
            message_history: vec![
                Message {
                    role: "user".into(),
                    content: "hi".into(),
                };
                3
            ],
            tool_state: json!({"sku": 42}),
            mcp_config: (0..servers)
                .map(|i| McpServer {
                    server: format!("https://tools{i}.example/mcp"),
                    cred_ref: format!("tools{i}"),
                })
                .collect(),
        }
    }

    #[test]
    fn summaries_carry_budget_and_latest_event_newest_first() {
        let key = TokenKey::random();
        let clock = std::sync::Arc::new(ManualClock::new(Timestamp::from_micros(1_000_000)));
        let mut s = crate::testing::store()
            .unwrap()
            .with_token_key(key.clone())
            .with_clock(clock.clone());
        let a = s.snapshot_state(&snapshot(0)).unwrap();
        clock.advance(std::time::Duration::from_secs(1));
        let b = s.snapshot_state(&snapshot(1)).unwrap();
        let token =
            issue_transfer_token(&key, &b.id, TokenScope::ProvisionRuntime, s.now(), DEFAULT_TOKEN_TTL).unwrap();
        s.provision_runtime(&b.id, Tier::Nano, 5_000, "forecaster", &token)
            .unwrap();

        let all = s.list_transfer_summaries(&TransferOwner::Operator, None, 10).unwrap();
        assert_eq!(
            all.iter().map(|x| x.transfer.id.as_str()).collect::<Vec<_>>(),
            [&b.id, &a.id]
        );
        assert_eq!(
            all[0].budget.map(|b| (b.allocated_micro_usd, b.spent_micro_usd)),
            Some((5_000, 0))
        );
        assert_eq!(all[0].last_event.map(|e| e.0), Some(EventKind::RuntimeProvisioned));
        assert_eq!(all[1].budget, None);
        assert_eq!(all[1].last_event.map(|e| e.0), Some(EventKind::SnapshotCreated));
        let staged = s
            .list_transfer_summaries(&TransferOwner::Operator, Some(TransferStatus::Staged), 10)
            .unwrap();
        assert_eq!(staged.len(), 1);
        assert_eq!(staged[0].transfer.id, a.id);
        assert_eq!(
            s.list_transfer_summaries(&TransferOwner::Operator, None, 1)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn a_principal_lists_only_its_own_transfers() {
        let mut s = crate::testing::store().unwrap();
        let alice = TransferOwner::ApiKey("prn_00000000000000000000000a".into());
        let bob = TransferOwner::ApiKey("prn_00000000000000000000000b".into());
        let mine = s.snapshot_state_as(&snapshot(0), &alice).unwrap();
        s.snapshot_state_as(&snapshot(1), &bob).unwrap();
        s.snapshot_state(&snapshot(2)).unwrap();
        let mut ids = |owner: &TransferOwner| -> Vec<String> {
            s.list_transfer_summaries(owner, None, 10)
                .unwrap()
                .into_iter()
                .map(|x| x.transfer.id)
                .collect()
        };
        assert_eq!(ids(&alice), [mine.id]);
        assert_eq!(ids(&bob).len(), 1);
        assert_eq!(
            ids(&TransferOwner::Operator).len(),
            3,
            "the operator sees every transfer"
        );
    }

    #[test]
    fn a_snapshot_summary_measures_without_loading_and_shows_only_references() {
        let mut s = crate::testing::store().unwrap();
        let t = s.snapshot_state(&snapshot(2)).unwrap();
        let sum = s.snapshot_summary(&t.id).unwrap();
        assert_eq!(sum.message_count, 3);
        assert_eq!(sum.system_prompt_bytes, "Forecast é".len() as u64);
        assert_eq!(sum.tool_state_bytes, r#"{"sku":42}"#.len() as u64);
        assert_eq!(sum.mcp_servers.len(), 2);
        assert_eq!(sum.mcp_servers[1].cred_ref, "tools1");
        assert!(matches!(
            s.snapshot_summary("tr_000000000000000000000000"),
            Err(Error::TransferNotFound(_))
        ));
        assert!(matches!(s.snapshot_summary("nope"), Err(Error::InvalidInput { .. })));
    }

    #[test]
    fn an_unknown_event_kind_fails_closed() {
        let mut s = crate::testing::store().unwrap();
        let t = s.snapshot_state(&snapshot(0)).unwrap();
        s.autocommit()
            .execute(
                "INSERT INTO usage_events (transfer_id, type, at, detail, seq) VALUES (?1, 'from_the_future', 0, '{}', 99)",
                [&t.id],
            )
            .unwrap();
        assert!(matches!(
            s.list_transfer_summaries(&TransferOwner::Operator, None, 10),
            Err(Error::CorruptRow { .. })
        ));
    }
}
