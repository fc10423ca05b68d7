//! A transfer's spend curve for people, sampled at a bounded number of points, so the console's
//! page of a long-lived agent's transfer costs the same to read whatever the length of its log
//! (its events are paged by [`Store::event_page`]).
//!
//! The curve is the budget's opening and then the spend after each `usage_reported` event —
//! exactly, while there are fewer than the points asked for; past that, the last report at or
//! before each of evenly spaced instants from the opening to now, so its last point is always
//! the latest spend. Each sample is one probe of the `(transfer_id, type, at)` index
//! (`sql/0008_usage_events_by_kind.sql`).

use ahp_store_sql::{OptionalExtension, Row};

use crate::clock::Timestamp;
use crate::db::Store;
use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::transfer;

/// Most points one spend curve holds: more than a chart a few hundred pixels wide can show.
pub const MAX_SPEND_POINTS: usize = 1000;

/// One point of a spend curve: when, and the cumulative spend after it, in micro-USD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpendSample {
    /// When the spend was recorded (the budget's opening, or a usage report).
    pub at: Timestamp,
    /// Cumulative spend after it.
    pub spent_micro_usd: u64,
}

fn corrupt(reason: String) -> Error {
    Error::CorruptRow {
        table: "usage_events",
        reason,
    }
}

/// A usage report's sample: its time and the `spentMicroUsd` it recorded.
fn sample_from_row(r: &Row) -> Result<SpendSample> {
    let id: i64 = r.get(0)?;
    let detail: String = r.get(2)?;
    let detail: serde_json::Value =
        serde_json::from_str(&detail).map_err(|e| corrupt(format!("event {id} detail: {e}")))?;
    let spent = detail
        .get("spentMicroUsd")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| corrupt(format!("event {id}: a usage report without spentMicroUsd")))?;
    Ok(SpendSample {
        at: Timestamp::from_micros(r.get(1)?),
        spent_micro_usd: spent,
    })
}

impl Store {
    /// The spend curve of `transfer` up to `now` in at most `points` points (see the
    /// [module docs](self)): empty before its budget opened.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed transfer id or `points` outside
    /// 2..=[`MAX_SPEND_POINTS`]; [`Error::TransferNotFound`]; [`Error::CorruptRow`] for a
    /// usage report without its spend.
    pub fn spend_curve(&mut self, transfer: &str, now: Timestamp, points: usize) -> Result<Vec<SpendSample>> {
        if !(2..=MAX_SPEND_POINTS).contains(&points) {
            return Err(Error::invalid("points", format!("must be 2 to {MAX_SPEND_POINTS}")));
        }
        transfer::exists(&self.autocommit(), transfer)?;
        let opened: Option<i64> = self
            .autocommit()
            .prepare_cached("SELECT at FROM usage_events WHERE transfer_id = ?1 AND type = ?2 ORDER BY at, id LIMIT 1")?
            .query_row((transfer, EventKind::RuntimeProvisioned.as_str()), |r| r.get(0))
            .optional()?;
        let Some(opened) = opened else {
            return Ok(Vec::new());
        };
        let mut curve = vec![SpendSample {
            at: Timestamp::from_micros(opened),
            spent_micro_usd: 0,
        }];
        let reports = points - 1;
        let first: Vec<SpendSample> = self
            .autocommit()
            .prepare_cached(
                "SELECT id, at, detail FROM usage_events WHERE transfer_id = ?1 AND type = ?2
                 ORDER BY at, id LIMIT ?3",
            )?
            .query_map((transfer, EventKind::UsageReported.as_str(), reports as i64 + 1), |r| {
                Ok(sample_from_row(r))
            })?
            .map(|r| r?)
            .collect::<Result<_>>()?;
        if first.len() <= reports {
            curve.extend(first);
            return Ok(curve);
        }
        // Too many to draw each: the last report at or before each of `reports` instants.
        let tx = self.autocommit();
        let mut probe = tx.prepare_cached(
            "SELECT id, at, detail FROM usage_events WHERE transfer_id = ?1 AND type = ?2 AND at <= ?3
             ORDER BY at DESC, id DESC LIMIT 1",
        )?;
        let (start, end) = (opened, now.as_micros().max(opened));
        let mut last_id = None;
        for i in 1..=reports as i64 {
            let instant = start + ((end - start) as i128 * i as i128 / reports as i128) as i64;
            let found = probe
                .query_row((transfer, EventKind::UsageReported.as_str(), instant), |r| {
                    Ok((r.get::<_, i64>(0)?, sample_from_row(r)))
                })
                .optional()?;
            if let Some((id, sample)) = found
                && last_id != Some(id)
            {
                last_id = Some(id);
                curve.push(sample?);
            }
        }
        // Reports stamped after `now` (a clock step) still show: the latest spend ends the curve.
        let latest = probe
            .query_row((transfer, EventKind::UsageReported.as_str(), i64::MAX), |r| {
                Ok((r.get::<_, i64>(0)?, sample_from_row(r)))
            })
            .optional()?;
        if let Some((id, sample)) = latest
            && last_id != Some(id)
        {
            if curve.len() > reports {
                curve.pop();
            }
            curve.push(sample?);
        }
        Ok(curve)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::clock::ManualClock;
    use crate::{DEFAULT_TOKEN_TTL, SnapshotInput, Tier, TokenKey, TokenScope, issue_transfer_token};

    const START: Timestamp = Timestamp::from_micros(1_796_039_139_000_000);

    fn snapshot() -> SnapshotInput {
        SnapshotInput {
            source_host: "h".into(),
            system_prompt: String::new(),
            message_history: vec![],
            tool_state: json!({}),
            mcp_config: vec![],
        }
    }

    /// An `active` transfer on a manual clock (five events), and the clock.
    fn active() -> (Store, ManualClock, String) {
        let key = TokenKey::random();
        let clock = ManualClock::new(START);
        let mut store = crate::testing::store()
            .unwrap()
            .with_clock(Arc::new(clock.clone()))
            .with_token_key(key.clone());
        let t = store.snapshot_state(&snapshot()).unwrap().id;
        let tok = issue_transfer_token(&key, &t, TokenScope::ProvisionRuntime, START, DEFAULT_TOKEN_TTL).unwrap();
        store
            .provision_runtime(&t, Tier::Nano, 1_000_000_000, "c", &tok)
            .unwrap();
        store.push_state(&t, None).unwrap();
        let tok = issue_transfer_token(&key, &t, TokenScope::Activate, START, DEFAULT_TOKEN_TTL).unwrap();
        store.begin_activation(&t, &tok).unwrap();
        store.complete_activation(&t).unwrap();
        (store, clock, t)
    }

    #[test]
    fn a_short_curve_is_exact_and_a_long_one_is_sampled_to_its_bound() {
        let (mut store, clock, t) = active();
        let curve = store.spend_curve(&t, store.now(), 10).unwrap();
        assert_eq!(
            curve,
            [SpendSample {
                at: START,
                spent_micro_usd: 0
            }]
        );
        for _ in 0..9 {
            clock.advance(Duration::from_secs(1));
            store.report_usage(&t, 7, "model").unwrap();
        }
        let exact = store.spend_curve(&t, store.now(), 10).unwrap();
        assert_eq!(exact.len(), 10, "the opening and every report");
        assert_eq!(exact.last().unwrap().spent_micro_usd, 63);
        // One report more than the points hold: sampled, still ending at the latest spend.
        clock.advance(Duration::from_secs(1));
        store.report_usage(&t, 7, "model").unwrap();
        let sampled = store.spend_curve(&t, store.now(), 10).unwrap();
        assert!(sampled.len() <= 10, "{}", sampled.len());
        assert_eq!(sampled.last().unwrap().spent_micro_usd, 70);
        assert!(
            sampled
                .windows(2)
                .all(|w| w[0].at <= w[1].at && w[0].spent_micro_usd <= w[1].spent_micro_usd)
        );
        // A long log: the curve stays at its bound and keeps the latest spend.
        for _ in 0..2_000 {
            clock.advance(Duration::from_millis(10));
            store.report_usage(&t, 1, "model").unwrap();
        }
        let long = store.spend_curve(&t, store.now(), 50).unwrap();
        assert!(long.len() <= 50 && long.len() > 40, "{}", long.len());
        assert_eq!(long.last().unwrap().spent_micro_usd, 2_070);
        assert_eq!(long[0].spent_micro_usd, 0);
        for points in [0, 1, MAX_SPEND_POINTS + 1] {
            assert!(matches!(
                store.spend_curve(&t, store.now(), points),
                Err(Error::InvalidInput { field, .. }) if field == "points"
            ));
        }
    }

    #[test]
    fn a_transfer_not_yet_provisioned_has_no_curve() {
        let mut store = crate::testing::store().unwrap();
        let t = store.snapshot_state(&snapshot()).unwrap().id;
        assert!(store.spend_curve(&t, store.now(), 10).unwrap().is_empty());
    }
}
