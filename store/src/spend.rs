//! Spend: what a transfer's budget is charged, by kind — the host's own meter (compute, model
//! calls, tool calls) and what clients report — and the move to `insolvent` when spend reaches
//! the allocation, each report one transaction with its `usage_reported` event.

use ahp_store_sql::Tx;
use serde_json::json;

use crate::budget::{self, Budget, MAX_USAGE_REPORT_MICRO_USD};
use crate::clock::Timestamp;
use crate::db::Store;
use crate::error::{Error, Result};
use crate::event::{self, EventKind};
use crate::lifecycle::become_insolvent;
use crate::lifecycle::move_to;
use crate::owner::TransferOwner;
use crate::state::Operation;
use crate::state::TransferStatus;
use crate::transfer::{self, Transfer, check};

/// Longest usage `kind`, in bytes.
pub const MAX_USAGE_KIND_BYTES: usize = 32;
/// The usage kind of compute spend, metered by the host from the fuel a guest burnt.
pub const COMPUTE_USAGE_KIND: &str = "compute";
/// The usage kind of model calls, reserved and charged by the host's model gateway
/// ([`crate::model_call`]).
pub const MODEL_TOKENS_USAGE_KIND: &str = "model_tokens";
/// The usage kind of what MCP tool calls cost, charged by the host at the policy's per-call
/// price.
pub const TOOL_CALLS_USAGE_KIND: &str = "tool_calls";
/// Usage kinds only the host's own meter records; [`Store::report_client_usage`] refuses them.
pub const HOST_RESERVED_USAGE_KINDS: [&str; 2] = [COMPUTE_USAGE_KIND, TOOL_CALLS_USAGE_KIND];
/// Usage kinds the host meters itself for a sandboxed guest, which the guest's
/// `metering.report` may therefore not add to: compute (fuel), model calls (the gateway) and
/// MCP tool calls. An orchestrator may still report `model_tokens` its source host spent
/// ([`Store::report_client_usage`]).
pub const HOST_METERED_USAGE_KINDS: [&str; 3] = [COMPUTE_USAGE_KIND, MODEL_TOKENS_USAGE_KIND, TOOL_CALLS_USAGE_KIND];
/// The usage kind recorded when the caller names none.
pub const DEFAULT_USAGE_KIND: &str = "unspecified";

/// What `report_usage` returns.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    /// The transfer after the report (possibly now `insolvent`).
    pub transfer: Transfer,
    /// The budget after the report.
    pub budget: Budget,
}

impl Store {
    /// `report_usage` as the host's own meter records it: adds `micro_usd` of spend of `kind`
    /// (including the host-reserved [`COMPUTE_USAGE_KIND`]). Spend reported by anyone else — an
    /// MCP client, a guest — goes through [`report_client_usage`](Self::report_client_usage),
    /// which refuses the reserved kinds.
    ///
    /// By state: while an activation is in progress the spend is recorded and the status is
    /// unchanged (if it reached the allocation, [`end_activation`](Self::end_activation)
    /// makes the transfer `insolvent`); when `active`, spend reaching the allocation makes the
    /// transfer `insolvent` (event `insolvent`, starting the grace period); when `insolvent`,
    /// late spend is still recorded so the account stays true. Every other state has nothing
    /// running to spend and is refused.
    ///
    /// The host's meter spends only for the agents this host carries: a host that lost the
    /// agent to another (a takeover, a move) records nothing more for it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for an amount outside 1..=[`MAX_USAGE_REPORT_MICRO_USD`] or a
    /// malformed kind; [`Error::InvalidTransition`] as above; [`Error::CarriedElsewhere`] when
    /// another host carries the transfer.
    pub fn report_usage(&mut self, transfer: &str, micro_usd: u64, kind: &str) -> Result<UsageReport> {
        let here = self.host_id().to_owned();
        self.add_usage(transfer, micro_usd, kind, &TransferOwner::Operator, Some(&here))
    }

    /// [`report_usage`](Self::report_usage) on a transfer of `caller`'s; with `carrier`, only
    /// if no other host carries it.
    fn add_usage(
        &mut self,
        transfer: &str,
        micro_usd: u64,
        kind: &str,
        caller: &TransferOwner,
        carrier: Option<&str>,
    ) -> Result<UsageReport> {
        if micro_usd == 0 || micro_usd > MAX_USAGE_REPORT_MICRO_USD {
            return Err(Error::invalid(
                "amountMicroUsd",
                format!("must be 1 to {MAX_USAGE_REPORT_MICRO_USD}"),
            ));
        }
        validate_usage_kind(kind)?;
        transfer::check_id(transfer)?;
        let now = self.now();
        self.write(|tx| {
            let t = transfer::load_for(tx, transfer, caller)?;
            if let Some(me) = carrier {
                crate::hosts::check_carries(tx, transfer, me)?;
            }
            add_spend(tx, &t, micro_usd, kind, now)
        })
    }

    /// `report_usage` from outside the host's meter by the local operator: as
    /// [`report_client_usage_as`](Self::report_client_usage_as) with
    /// [`TransferOwner::Operator`], who may report on any transfer.
    ///
    /// # Errors
    ///
    /// As `report_client_usage_as`.
    pub fn report_client_usage(&mut self, transfer: &str, micro_usd: u64, kind: &str) -> Result<UsageReport> {
        self.report_client_usage_as(transfer, micro_usd, kind, &TransferOwner::Operator)
    }

    /// `report_usage` from outside the host's meter (the MCP tool) by `caller`: as
    /// [`report_usage`](Self::report_usage) on a transfer of `caller`'s, except that the
    /// host-reserved kinds ([`HOST_RESERVED_USAGE_KINDS`]) are refused — compute is metered by
    /// the host from the fuel a guest burnt, and nobody else may add to it. A transfer that is
    /// not `caller`'s is refused as if it did not exist.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (field `kind`) for a reserved kind, changing nothing;
    /// [`Error::TransferNotFound`] for a missing or foreign transfer; otherwise as
    /// `report_usage`.
    pub fn report_client_usage_as(
        &mut self,
        transfer: &str,
        micro_usd: u64,
        kind: &str,
        caller: &TransferOwner,
    ) -> Result<UsageReport> {
        if HOST_RESERVED_USAGE_KINDS.contains(&kind) {
            return Err(Error::invalid(
                "kind",
                format!("{kind:?} is reserved to the host's meter; report another kind (e.g. model_tokens)"),
            ));
        }
        self.add_usage(transfer, micro_usd, kind, caller, None)
    }
}

/// Adds `micro_usd` of spend of `kind` to `t`'s budget inside `tx`, with its `usage_reported`
/// event, moving the transfer to `insolvent` when spend reaches the allocation (see
/// [`Store::report_usage`]). The caller has validated the amount and the kind and read `t` in
/// `tx`.
pub(crate) fn add_spend(tx: &Tx<'_>, t: &Transfer, micro_usd: u64, kind: &str, now: Timestamp) -> Result<UsageReport> {
    let transfer = t.id.as_str();
    let before = budget::load(tx, transfer)?;
    let exhausts_budget = before.is_some_and(|b| b.spent_micro_usd + micro_usd >= b.allocated_micro_usd);
    let to = check(t, Operation::ReportUsage { exhausts_budget })?;
    let before = before.ok_or_else(|| Error::CorruptRow {
        table: "budgets",
        reason: format!("{transfer} is {} but has no budget", t.status),
    })?;
    let after = Budget {
        spent_micro_usd: before.spent_micro_usd + micro_usd,
        ..before
    };
    tx.prepare_cached("UPDATE budgets SET spent_micro_usd = ?2 WHERE transfer_id = ?1")?
        .execute((transfer, after.spent_micro_usd as i64))?;
    move_to(tx, t, to, now)?;
    let detail = json!({
        "kind": kind,
        "amountMicroUsd": micro_usd,
        "spentMicroUsd": after.spent_micro_usd,
        "allocatedMicroUsd": after.allocated_micro_usd,
    });
    event::append(tx, transfer, EventKind::UsageReported, now, detail)?;
    if t.status == TransferStatus::Active && to.status == TransferStatus::Insolvent {
        become_insolvent(tx, transfer, &after, now, "usage")?;
    }
    Ok(UsageReport {
        transfer: transfer::load(tx, transfer)?,
        budget: after,
    })
}

/// Checks a usage `kind` as [`Store::report_usage`] does: 1 to [`MAX_USAGE_KIND_BYTES`] bytes of
/// lowercase ASCII letters, digits and `_`.
///
/// # Errors
///
/// [`Error::InvalidInput`] (field `kind`) otherwise.
pub fn validate_usage_kind(kind: &str) -> Result<()> {
    let ok = !kind.is_empty()
        && kind.len() <= MAX_USAGE_KIND_BYTES
        && kind
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "kind",
            format!("must be 1 to {MAX_USAGE_KIND_BYTES} of a-z, 0-9 and '_'"),
        ))
    }
}
