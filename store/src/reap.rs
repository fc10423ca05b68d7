//! The reapers: the two sweeps that end transfers nobody else will end.
//!
//! - [`Store::reap_insolvent`]: `insolvent` for longer than the grace period → `terminated`.
//! - [`Store::reap_expired`]: `staged`, `provisioned` or `pushed` (even mid-activation) for
//!   longer than the TTL since the snapshot was taken → `expired`.
//!
//! Each sweep works in batches of [`REAP_BATCH`], each batch one immediate transaction that
//! re-checks every edge, so sweeps are safe to run concurrently (from `ahp serve` and a cron
//! `ahp reap` at once) and repeatedly: a transfer is ended exactly once, and a second run finds
//! nothing to do.

use std::time::Duration;

use crate::clock::Timestamp;
use crate::db::Store;
use crate::error::Result;
use crate::event::EventKind;
use crate::lifecycle::end;
use crate::state::Operation;
use crate::transfer::check;
use crate::transfer::{self, TRANSFER_COLUMNS};

/// Default grace period between `insolvent` and termination.
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(15 * 60);
/// Default time a transfer may stay unactivated before it expires.
pub const DEFAULT_TRANSFER_TTL: Duration = Duration::from_secs(60 * 60);
/// Transfers ended per transaction; bounds how long one sweep holds the write lock.
pub const REAP_BATCH: usize = 500;

impl Store {
    /// Terminates every transfer insolvent since before `now − grace`. Returns their ids.
    ///
    /// # Errors
    ///
    /// Only if SQLite fails or a row is corrupt; transfers ended by earlier batches stay ended.
    pub fn reap_insolvent(&mut self, now: Timestamp, grace: Duration) -> Result<Vec<String>> {
        let cutoff = now.saturating_sub(grace).as_micros();
        self.sweep(
            "status = 'insolvent' AND insolvent_at <= ?1",
            cutoff,
            now,
            Operation::ReapInsolvent,
            EventKind::Terminated,
            &format!("insolvent for longer than the {}s grace period", grace.as_secs()),
        )
    }

    /// Expires every transfer still unactivated (`staged`, `provisioned` or `pushed`) that was
    /// created before `now − ttl`. Returns their ids.
    ///
    /// # Errors
    ///
    /// As [`reap_insolvent`](Self::reap_insolvent).
    pub fn reap_expired(&mut self, now: Timestamp, ttl: Duration) -> Result<Vec<String>> {
        let cutoff = now.saturating_sub(ttl).as_micros();
        self.sweep(
            "status IN ('staged', 'provisioned', 'pushed') AND created_at <= ?1",
            cutoff,
            now,
            Operation::Expire,
            EventKind::Expired,
            &format!("not activated within the {}s TTL", ttl.as_secs()),
        )
    }

    fn sweep(
        &mut self,
        condition: &str,
        cutoff: i64,
        now: Timestamp,
        op: Operation,
        kind: EventKind,
        reason: &str,
    ) -> Result<Vec<String>> {
        let sql = format!("SELECT {TRANSFER_COLUMNS} FROM transfers WHERE {condition} ORDER BY id LIMIT {REAP_BATCH}");
        let mut ended = Vec::new();
        loop {
            let batch = self.write(|tx| {
                let batch = {
                    let mut stmt = tx.prepare_cached(&sql)?;
                    let rows = stmt.query_map([cutoff], |r| Ok(transfer::from_row(r)))?;
                    rows.map(|r| r?).collect::<Result<Vec<_>>>()?
                };
                for t in &batch {
                    let to = check(t, op)?;
                    end(tx, t, to, now, kind, reason)?;
                }
                Ok(batch.into_iter().map(|t| t.id).collect::<Vec<_>>())
            })?;
            let full = batch.len() == REAP_BATCH;
            ended.extend(batch);
            if !full {
                return Ok(ended);
            }
        }
    }
}
