//! Budgets: what a transfer may spend, at what rate, and what it has spent.
//!
//! A budget row is opened by `provision_runtime` and only ever grows its `spent` column, through
//! `report_usage`; its `reserved` column holds what model calls in flight may still cost
//! ([`crate::model_call`]). Money is integer micro-USD (1 USD = 1,000,000) everywhere — never floating
//! point, so sums are exact and comparisons with the allocation are never off by a rounding.

use ahp_store_sql::{OptionalExtension, Tx};
use serde::Serialize;

use crate::error::Result;

pub use crate::input::MAX_BUDGET_MICRO_USD;
/// The largest single `report_usage` amount: 1,000 USD.
pub const MAX_USAGE_REPORT_MICRO_USD: u64 = 1_000 * 1_000_000;

/// A transfer's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// What the transfer may spend in all.
    pub allocated_micro_usd: u64,
    /// Price of one CPU-second for its tier (fixed when the budget was opened).
    pub rate_micro_usd_per_cpu_second: u64,
    /// What it has spent so far. May end above `allocated` by the last report.
    pub spent_micro_usd: u64,
    /// What open model-call reservations hold back ([`crate::model_call`]): not spent, not
    /// spendable until the calls settle.
    #[serde(skip_serializing_if = "is_zero")]
    pub reserved_micro_usd: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Budget {
    /// What is left to spend: `allocated − spent − reserved`, or zero once spent and open
    /// reservations have reached the allocation.
    pub fn remaining_micro_usd(&self) -> u64 {
        self.allocated_micro_usd
            .saturating_sub(self.spent_micro_usd)
            .saturating_sub(self.reserved_micro_usd)
    }

    /// Whether spend has reached the allocation.
    pub fn is_exhausted(&self) -> bool {
        self.spent_micro_usd >= self.allocated_micro_usd
    }
}

/// The budget of `transfer`, if one has been opened.
pub(crate) fn load(conn: &Tx<'_>, transfer: &str) -> Result<Option<Budget>> {
    Ok(conn
        .prepare_cached(
            "SELECT allocated_micro_usd, rate_micro_usd_per_cpu_second, spent_micro_usd, reserved_micro_usd
             FROM budgets WHERE transfer_id = ?1",
        )?
        .query_row([transfer], |r| {
            Ok(Budget {
                allocated_micro_usd: r.get(0)?,
                rate_micro_usd_per_cpu_second: r.get(1)?,
                spent_micro_usd: r.get(2)?,
                reserved_micro_usd: r.get(3)?,
            })
        })
        .optional()?)
}

impl crate::db::Store {
    /// The budget of `transfer`, if one has been opened: the one-row read the sandbox does on
    /// every turn (unlike [`get_status`](crate::db::Store::get_status), no event log).
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidInput`] for a malformed id.
    pub fn budget(&mut self, transfer: &str) -> Result<Option<Budget>> {
        crate::input::check_transfer_id(transfer)?;
        #[cfg(any(test, feature = "testing"))]
        self.fault_point(crate::fault::FaultStep::BudgetRead)?;
        load(&self.autocommit(), transfer)
    }

    /// [`budget`](Self::budget), for spending it from this host: read with the check that no
    /// other host carries `transfer` now (a host that lost the agent must not act for it), in
    /// one read.
    ///
    /// # Errors
    ///
    /// As [`budget`](Self::budget); [`crate::Error::TransferNotFound`];
    /// [`crate::Error::CarriedElsewhere`] when another host carries the transfer.
    pub fn budget_carried_here(&mut self, transfer: &str) -> Result<Option<Budget>> {
        crate::input::check_transfer_id(transfer)?;
        #[cfg(any(test, feature = "testing"))]
        self.fault_point(crate::fault::FaultStep::BudgetRead)?;
        let me = self.host_id().to_owned();
        let tx = self.autocommit();
        crate::hosts::check_carries(&tx, transfer, &me)?;
        load(&tx, transfer)
    }

    /// Whether this host may act for `transfer` now, for an effect that commits nothing here
    /// (an outgoing HTTP request): no other host carries it. One read by primary key.
    ///
    /// # Errors
    ///
    /// [`crate::Error::TransferNotFound`]; [`crate::Error::CarriedElsewhere`] when another host
    /// carries the transfer.
    pub fn check_carried_here(&mut self, transfer: &str) -> Result<()> {
        crate::input::check_transfer_id(transfer)?;
        let me = self.host_id().to_owned();
        crate::hosts::check_carries(&self.autocommit(), transfer, &me)
    }
}
