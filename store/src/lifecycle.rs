//! The transfer operations of the Handoff Protocol, one function each.
//!
//! Each is one `BEGIN IMMEDIATE` transaction that checks the edge with
//! [`transition`](crate::transition), applies it with a compare-and-set `UPDATE`, and appends its
//! audit event — all or nothing. Inputs are validated before the transaction starts; a refused
//! operation returns an error and leaves the database exactly as it was.
//!
//! `activate` is split in two because the sandbox runs the guest between the halves:
//! [`Store::begin_activation`] consumes the `activate` token and marks the activation started;
//! then [`Store::complete_activation`] (the guest's `resume` returned Ok) or
//! [`Store::fail_activation`] (it failed, trapped or broke a ceiling). A consumed token stays
//! consumed even when the activation fails: a retry needs a fresh token from the orchestrator,
//! so a leaked token can never be used to re-run a guest.

use rusqlite::Transaction;
use serde_json::json;

use crate::budget::{self, Budget, MAX_BUDGET_MICRO_USD, MAX_USAGE_REPORT_MICRO_USD};
use crate::clock::Timestamp;
use crate::db::Store;
use crate::error::{Error, Result};
use crate::event::{self, EventKind};
use crate::id::new_id;
use crate::snapshot::SnapshotInput;
use crate::state::{Operation, Phase, Refusal, TransferStatus, transition};
use crate::tier::Tier;
use crate::token::{self, TokenKey, TokenScope};
use crate::transfer::{self, TRANSFER_ID_PREFIX, Transfer};

/// Longest reason accepted by `fail_activation` and `terminate`, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;
/// Longest usage `kind`, in bytes.
pub const MAX_USAGE_KIND_BYTES: usize = 32;
/// The usage kind recorded when the caller names none.
pub const DEFAULT_USAGE_KIND: &str = "unspecified";
/// Longest component *name* (a digest is always `sha256:` and 64 hex digits).
pub const MAX_COMPONENT_NAME_BYTES: usize = 64;

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
    /// `snapshot_state`: stores a validated snapshot as a new `staged` transfer.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the first field that breaks a rule or bound.
    pub fn snapshot_state(&mut self, input: &SnapshotInput) -> Result<Transfer> {
        input.validate()?;
        let id = new_id(TRANSFER_ID_PREFIX);
        let checksum = input.checksum();
        let now = self.now();
        let tx = self.immediate()?;
        tx.prepare_cached(
            "INSERT INTO transfers (id, status, source_host, system_prompt, message_history, message_count,
                                    tool_state, mcp_config, checksum, created_at, updated_at)
             VALUES (?1, 'staged', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
        )?
        .execute((
            &id,
            &input.source_host,
            &input.system_prompt,
            serde_json::to_string(&input.message_history).expect("messages serialize"),
            input.message_history.len() as i64,
            input.tool_state.to_string(),
            serde_json::to_string(&input.mcp_config).expect("mcp config serializes"),
            &checksum,
            now.as_micros(),
        ))?;
        let detail = json!({
            "checksum": checksum,
            "sourceHost": input.source_host,
            "messageCount": input.message_history.len(),
            "mcpServers": input.mcp_config.len(),
        });
        event::append(&tx, &id, EventKind::SnapshotCreated, now, detail)?;
        let t = transfer::load(&tx, &id)?;
        tx.commit()?;
        Ok(t)
    }

    /// `provision_runtime`: sizes the destination by `tier`, opens its budget and records the
    /// guest `component` (a `sha256:<hex>` digest or a registered name) the sandbox will run.
    /// Needs a token of scope `provision_runtime` for this transfer, which it consumes.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a budget outside 1..=[`MAX_BUDGET_MICRO_USD`] or a malformed
    /// component; [`Error::InvalidTransition`] unless `staged`; [`Error::Token`] for a refused token.
    pub fn provision_runtime(
        &mut self,
        transfer: &str,
        tier: Tier,
        budget_micro_usd: u64,
        component: &str,
        token: &str,
    ) -> Result<Transfer> {
        if budget_micro_usd == 0 || budget_micro_usd > MAX_BUDGET_MICRO_USD {
            return Err(Error::invalid(
                "budgetMicroUsd",
                format!("must be 1 to {MAX_BUDGET_MICRO_USD}"),
            ));
        }
        validate_component(component)?;
        let rate = tier.limits().price_micro_usd_per_cpu_second;
        self.step(transfer, Operation::Provision, |key, tx, t, to, now| {
            token::verify_and_consume(tx, key, token, transfer, TokenScope::ProvisionRuntime, now)?;
            move_to(tx, t, to, now)?;
            tx.prepare_cached("UPDATE transfers SET tier = ?2, component = ?3 WHERE id = ?1")?
                .execute((transfer, tier.as_str(), component))?;
            tx.prepare_cached(
                "INSERT INTO budgets (transfer_id, allocated_micro_usd, rate_micro_usd_per_cpu_second, opened_at)
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute((transfer, budget_micro_usd as i64, rate as i64, now.as_micros()))?;
            let detail = json!({
                "tier": tier,
                "budgetMicroUsd": budget_micro_usd,
                "rateMicroUsdPerCpuSecond": rate,
                "component": component,
            });
            event::append(tx, transfer, EventKind::RuntimeProvisioned, now, detail)
        })
    }

    /// `push_state`: stages the snapshot for the destination. If the caller sends the checksum
    /// `snapshot_state` returned, it must match.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a checksum that is not 64 hex digits;
    /// [`Error::InvalidTransition`] unless `provisioned`; [`Error::ChecksumMismatch`].
    pub fn push_state(&mut self, transfer: &str, checksum: Option<&str>) -> Result<Transfer> {
        let given = checksum.map(str::to_ascii_lowercase);
        if let Some(c) = &given
            && (c.len() != 64 || !c.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(Error::invalid(
                "checksum",
                "must be 64 hex digits (the SHA-256 snapshot_state returned)",
            ));
        }
        self.step(transfer, Operation::Push, |_, tx, t, to, now| {
            if let Some(given) = given.as_deref()
                && given != t.checksum
            {
                return Err(Error::ChecksumMismatch {
                    transfer: transfer.to_owned(),
                    expected: t.checksum.clone(),
                    given: given.to_owned(),
                });
            }
            move_to(tx, t, to, now)?;
            event::append(
                tx,
                transfer,
                EventKind::StatePushed,
                now,
                json!({ "checksumVerified": given.is_some() }),
            )
        })
    }

    /// First half of `activate`: verifies and consumes the `activate` token and marks the
    /// activation in progress. Returns the transfer, with the tier and component to run.
    ///
    /// # Errors
    ///
    /// [`Error::ActivationInProgress`] if another activation has begun and not finished;
    /// [`Error::InvalidTransition`] unless `pushed`; [`Error::Token`] for a refused token.
    pub fn begin_activation(&mut self, transfer: &str, token: &str) -> Result<Transfer> {
        self.step(transfer, Operation::BeginActivation, |key, tx, t, to, now| {
            token::verify_and_consume(tx, key, token, transfer, TokenScope::Activate, now)?;
            move_to(tx, t, to, now)?;
            event::append(
                tx,
                transfer,
                EventKind::ActivationStarted,
                now,
                json!({ "component": t.component }),
            )
        })
    }

    /// Second half of `activate`, after the guest's `resume` returned Ok: the transfer is `active`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidTransition`] unless an activation is in progress (it may have been
    /// terminated or expired meanwhile).
    pub fn complete_activation(&mut self, transfer: &str) -> Result<Transfer> {
        self.step(transfer, Operation::CompleteActivation, |_, tx, t, to, now| {
            move_to(tx, t, to, now)?;
            tx.prepare_cached("UPDATE transfers SET activated_at = ?2 WHERE id = ?1")?
                .execute((transfer, now.as_micros()))?;
            event::append(tx, transfer, EventKind::Activated, now, json!({}))
        })
    }

    /// The activation failed (resume returned an error, trapped, or broke a ceiling): records
    /// `activation_failed` with `reason` and leaves the transfer `pushed`, ready for a retry
    /// with a new token.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for an empty or over-long reason; [`Error::InvalidTransition`]
    /// unless an activation is in progress.
    pub fn fail_activation(&mut self, transfer: &str, reason: &str) -> Result<Transfer> {
        validate_reason(reason)?;
        self.step(transfer, Operation::FailActivation, |_, tx, t, to, now| {
            move_to(tx, t, to, now)?;
            event::append(
                tx,
                transfer,
                EventKind::ActivationFailed,
                now,
                json!({ "reason": reason }),
            )
        })
    }

    /// `report_usage`: adds `micro_usd` of spend of `kind` (e.g. `compute`, `model_tokens`).
    ///
    /// By state: while an activation is in progress the spend is recorded and the status is
    /// unchanged (only an `active` transfer turns insolvent); when `active`, spend reaching the
    /// allocation makes the transfer `insolvent` (event `insolvent`, starting the grace period);
    /// when `insolvent`, late spend is still recorded so the account stays true. Every other
    /// state has nothing running to spend and is refused.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for an amount outside 1..=[`MAX_USAGE_REPORT_MICRO_USD`] or a
    /// malformed kind; [`Error::InvalidTransition`] as above.
    pub fn report_usage(&mut self, transfer: &str, micro_usd: u64, kind: &str) -> Result<UsageReport> {
        if micro_usd == 0 || micro_usd > MAX_USAGE_REPORT_MICRO_USD {
            return Err(Error::invalid(
                "amountMicroUsd",
                format!("must be 1 to {MAX_USAGE_REPORT_MICRO_USD}"),
            ));
        }
        validate_usage_kind(kind)?;
        transfer::check_id(transfer)?;
        let now = self.now();
        let tx = self.immediate()?;
        let t = transfer::load(&tx, transfer)?;
        let before = budget::load(&tx, transfer)?;
        let exhausts_budget = before.is_some_and(|b| b.spent_micro_usd + micro_usd >= b.allocated_micro_usd);
        let to = check(&t, Operation::ReportUsage { exhausts_budget })?;
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
        move_to(&tx, &t, to, now)?;
        let detail = json!({
            "kind": kind,
            "amountMicroUsd": micro_usd,
            "spentMicroUsd": after.spent_micro_usd,
            "allocatedMicroUsd": after.allocated_micro_usd,
        });
        event::append(&tx, transfer, EventKind::UsageReported, now, detail)?;
        if t.status == TransferStatus::Active && to.status == TransferStatus::Insolvent {
            tx.prepare_cached("UPDATE transfers SET insolvent_at = ?2 WHERE id = ?1")?
                .execute((transfer, now.as_micros()))?;
            let detail = json!({
                "spentMicroUsd": after.spent_micro_usd,
                "allocatedMicroUsd": after.allocated_micro_usd,
                "insolventAt": now.to_string(),
            });
            event::append(&tx, transfer, EventKind::Insolvent, now, detail)?;
        }
        let t = transfer::load(&tx, transfer)?;
        tx.commit()?;
        Ok(UsageReport {
            transfer: t,
            budget: after,
        })
    }

    /// Tears a transfer down for `reason`. A library function and a CLI command — never an MCP
    /// tool: nothing an agent can call terminates a transfer.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for an empty or over-long reason; [`Error::InvalidTransition`]
    /// if already `terminated` or `expired`.
    pub fn terminate(&mut self, transfer: &str, reason: &str) -> Result<Transfer> {
        validate_reason(reason)?;
        self.step(transfer, Operation::Terminate, |_, tx, t, to, now| {
            end(tx, t, to, now, EventKind::Terminated, reason)
        })
    }

    /// Runs one operation on one transfer: a transaction, the edge check, `body`, commit.
    fn step(
        &mut self,
        transfer: &str,
        op: Operation,
        body: impl FnOnce(Option<&TokenKey>, &Transaction<'_>, &Transfer, Phase, Timestamp) -> Result<()>,
    ) -> Result<Transfer> {
        transfer::check_id(transfer)?;
        let now = self.now();
        // Borrow the connection and the key as separate fields: the body needs both.
        let key = self.token_key.as_ref();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let t = transfer::load(&tx, transfer)?;
        let to = check(&t, op)?;
        body(key, &tx, &t, to, now)?;
        let t = transfer::load(&tx, transfer)?;
        tx.commit()?;
        Ok(t)
    }
}

/// The phase `op` moves `t` to, or the error that names why not.
pub(crate) fn check(t: &Transfer, op: Operation) -> Result<Phase> {
    transition(t.phase(), op).map_err(|refusal| match refusal {
        Refusal::ActivationInProgress => Error::ActivationInProgress { transfer: t.id.clone() },
        Refusal::NotAllowed => Error::InvalidTransition {
            transfer: t.id.clone(),
            operation: op,
            phase: t.phase(),
        },
    })
}

/// Compare-and-set of a transfer's phase: applies only if `t` is still as it was read.
pub(crate) fn move_to(tx: &Transaction<'_>, t: &Transfer, to: Phase, now: Timestamp) -> Result<()> {
    let changed = tx
        .prepare_cached(
            "UPDATE transfers SET status = ?1, activation_started_at = ?2, updated_at = ?3
             WHERE id = ?4 AND status = ?5 AND (activation_started_at IS NOT NULL) = ?6",
        )?
        .execute((
            to.status.as_str(),
            to.activating.then_some(now.as_micros()),
            now.as_micros(),
            &t.id,
            t.status.as_str(),
            t.activating,
        ))?;
    if changed != 1 {
        // Unreachable inside an immediate transaction; kept so a future caller cannot skip it.
        return Err(Error::CorruptRow {
            table: "transfers",
            reason: format!("{} changed under its own write transaction", t.id),
        });
    }
    Ok(())
}

/// Moves `t` to a terminal phase, stamping when and why, with its event.
pub(crate) fn end(
    tx: &Transaction<'_>,
    t: &Transfer,
    to: Phase,
    now: Timestamp,
    kind: EventKind,
    reason: &str,
) -> Result<()> {
    move_to(tx, t, to, now)?;
    tx.prepare_cached("UPDATE transfers SET ended_at = ?2, end_reason = ?3 WHERE id = ?1")?
        .execute((&t.id, now.as_micros(), reason))?;
    event::append(tx, &t.id, kind, now, json!({ "reason": reason, "from": t.status }))
}

fn validate_reason(reason: &str) -> Result<()> {
    if reason.trim().is_empty() || reason.len() > MAX_REASON_BYTES {
        return Err(Error::invalid(
            "reason",
            format!("must be 1 to {MAX_REASON_BYTES} bytes and not blank"),
        ));
    }
    Ok(())
}

fn validate_usage_kind(kind: &str) -> Result<()> {
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

/// Checks a component reference: `sha256:` and 64 lowercase hex digits, or a name of 1 to
/// [`MAX_COMPONENT_NAME_BYTES`] lowercase letters, digits, `.`, `_` and `-` starting with a
/// letter or digit.
///
/// # Errors
///
/// [`Error::InvalidInput`] naming the rule broken.
pub fn validate_component(component: &str) -> Result<()> {
    if let Some(hex) = component.strip_prefix("sha256:") {
        if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Ok(());
        }
        return Err(Error::invalid(
            "component",
            "a digest must be sha256: followed by 64 lowercase hex digits",
        ));
    }
    let name_ok = !component.is_empty()
        && component.len() <= MAX_COMPONENT_NAME_BYTES
        && component.as_bytes()[0].is_ascii_alphanumeric()
        && component
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'));
    if name_ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "component",
            format!("must be a sha256: digest or a name of 1 to {MAX_COMPONENT_NAME_BYTES} of a-z, 0-9, '.', '_', '-'"),
        ))
    }
}
