//! The transfer operations of the Handoff Protocol, one function each.
//!
//! Each is one `BEGIN IMMEDIATE` transaction that checks the edge with
//! [`crate::transition`], applies it with a compare-and-set `UPDATE`, and appends its
//! audit event — all or nothing — run through `Store::write`, which retries it
//! while the database is busy (a busy attempt rolls back, so it never spends a token). Inputs are validated before the transaction starts; a refused
//! operation returns an error and leaves the database exactly as it was.
//!
//! A transition out of `active` also unbinds the transfer's agent in the same transaction
//! (`insolvent` stops its turns, `terminated` detaches it; see [`crate::binding`]), and
//! [`Store::snapshot_state_as`] records the transfer's owner, to whom that agent belongs.
//!
//! `activate` is split in two because the sandbox runs the guest between the halves:
//! [`Store::begin_activation`] consumes the `activate` token and marks the activation started;
//! then [`Store::end_activation`] (completed: the guest's `resume` returned Ok; or failed: it
//! failed, trapped or broke a ceiling). A consumed token stays
//! consumed even when the activation fails: a retry needs a fresh token from the orchestrator,
//! so a leaked token can never be used to re-run a guest.

use ahp_store_sql::Tx;
use serde_json::json;

use crate::binding;
use crate::budget::{self, Budget, MAX_BUDGET_MICRO_USD};
use crate::clock::Timestamp;
use crate::conversation::CommunicationPrincipal;
use crate::conversation::mcp_task::{self, Awaited, McpTask, McpTaskStatus};
use crate::db::Store;
use crate::error::{Error, Result};
use crate::event::{self, EventKind};
use crate::id::new_id;
use crate::owner::TransferOwner;
use crate::snapshot::SnapshotInput;
use crate::state::{Operation, Phase, TransferStatus};
use crate::tier::Tier;
use crate::token::{self, Requested, TokenKey};
use crate::transfer::{self, TRANSFER_ID_PREFIX, Transfer, check};

/// Longest reason accepted by a failed activation's end and by `terminate`, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;
pub use crate::input::{MAX_COMPONENT_NAME_BYTES, validate_component};

impl Store {
    /// `snapshot_state` by the local operator (the CLI, stdio): as
    /// [`snapshot_state_as`](Self::snapshot_state_as) with [`TransferOwner::Operator`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the first field that breaks a rule or bound.
    pub fn snapshot_state(&mut self, input: &SnapshotInput) -> Result<Transfer> {
        self.snapshot_state_as(input, &TransferOwner::Operator)
    }

    /// `snapshot_state`: stores a validated snapshot as a new `staged` transfer owned by `owner`
    /// (the principal that called it). The agent the transfer becomes belongs to that owner.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the first field that breaks a rule or bound, or `owner`
    /// for an API-key owner that is not a principal id.
    pub fn snapshot_state_as(&mut self, input: &SnapshotInput, owner: &TransferOwner) -> Result<Transfer> {
        input.validate()?;
        owner.validate()?;
        let owner_subject = owner.subject();
        let id = new_id(TRANSFER_ID_PREFIX);
        let checksum = input.checksum();
        let now = self.now();
        self.write(|tx| {
            tx.prepare_cached(
                "INSERT INTO transfers (id, status, source_host, system_prompt, message_history, message_count,
                                    tool_state, mcp_config, checksum, created_at, updated_at, owner_subject)
             VALUES (?1, 'staged', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10)",
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
                &owner_subject,
            ))?;
            let detail = json!({
                "checksum": checksum,
                "sourceHost": input.source_host,
                "messageCount": input.message_history.len(),
                "mcpServers": input.mcp_config.len(),
            });
            event::append(tx, &id, EventKind::SnapshotCreated, now, detail)?;
            transfer::load(tx, &id)
        })
    }

    /// `provision_runtime`: sizes the destination by `tier`, opens its budget and records the
    /// guest `component` (a `sha256:<hex>` digest or a registered name) the sandbox will run.
    /// Needs a token of scope `provision_runtime` for this transfer, which it consumes; if the
    /// token binds the tier, a budget cap or the component, the request must keep to them.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a budget outside 1..=[`MAX_BUDGET_MICRO_USD`] or a malformed
    /// component; [`Error::InvalidTransition`] unless `staged`; [`Error::Token`] for a refused
    /// token, including [`TokenRefusal::Binding`](crate::TokenRefusal::Binding) for a request
    /// the token does not allow (the token stays unspent).
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
            let requested = Requested::Provision {
                tier,
                budget_micro_usd,
                component,
            };
            token::verify_and_consume(tx, key, token, transfer, requested, now)?;
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

    /// `push_state` by the local operator: as [`push_state_as`](Self::push_state_as) with
    /// [`TransferOwner::Operator`], who may push any transfer.
    ///
    /// # Errors
    ///
    /// As `push_state_as`.
    pub fn push_state(&mut self, transfer: &str, checksum: Option<&str>) -> Result<Transfer> {
        self.push_state_as(transfer, checksum, &TransferOwner::Operator)
    }

    /// `push_state` for `caller`: stages the snapshot for the destination. If the caller sends
    /// the checksum `snapshot_state` returned, it must match. A transfer that is not `caller`'s
    /// is refused as if it did not exist (before its state or checksum is looked at).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a checksum that is not 64 hex digits;
    /// [`Error::TransferNotFound`] for a missing or foreign transfer;
    /// [`Error::InvalidTransition`] unless `provisioned`; [`Error::ChecksumMismatch`].
    pub fn push_state_as(
        &mut self,
        transfer: &str,
        checksum: Option<&str>,
        caller: &TransferOwner,
    ) -> Result<Transfer> {
        let given = checksum.map(str::to_ascii_lowercase);
        if let Some(c) = &given
            && (c.len() != 64 || !c.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(Error::invalid(
                "checksum",
                "must be 64 hex digits (the SHA-256 snapshot_state returned)",
            ));
        }
        self.step_as(transfer, Operation::Push, caller, |_, tx, t, to, now| {
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
    /// activation in progress. Returns the transfer, with the tier and component to run. A token
    /// bound to a snapshot checksum activates only that snapshot.
    ///
    /// # Errors
    ///
    /// [`Error::ActivationInProgress`] if another activation has begun and not finished;
    /// [`Error::InvalidTransition`] unless `pushed`; [`Error::Token`] for a refused token
    /// (a checksum binding that does not match is
    /// [`TokenRefusal::Binding`](crate::TokenRefusal::Binding)).
    pub fn begin_activation(&mut self, transfer: &str, token: &str) -> Result<Transfer> {
        Ok(self.begin_activation_as(transfer, token, None)?.0)
    }

    /// [`begin_activation`](Self::begin_activation), and the MCP task of `owner` that waits for
    /// the activation's end ([`mcp_task`]), created in the same commit:
    /// however the activation ends (completed, failed, interrupted by a crash, the transfer
    /// terminated or expired), the commit that ends it ends the task.
    ///
    /// # Errors
    ///
    /// As `begin_activation`; [`Error::Conversation`]-wrapped `LimitReached` at the principal's
    /// MCP task bound.
    pub fn begin_activation_tracked(
        &mut self,
        transfer: &str,
        token: &str,
        owner: &CommunicationPrincipal,
    ) -> Result<(Transfer, McpTask)> {
        let (t, task) = self.begin_activation_as(transfer, token, Some(owner))?;
        Ok((t, task.expect("a tracked begin creates its task")))
    }

    /// `begin_activation`, creating the MCP task of `track` when given.
    fn begin_activation_as(
        &mut self,
        transfer: &str,
        token: &str,
        track: Option<&CommunicationPrincipal>,
    ) -> Result<(Transfer, Option<McpTask>)> {
        let host = self.host_id.clone();
        let mut tracked = None;
        let t = self.step(transfer, Operation::BeginActivation, |key, tx, t, to, now| {
            if let Some(owner) = track {
                let awaited = Awaited::Activation {
                    transfer: transfer.to_owned(),
                };
                tracked = Some(mcp_task::create_in(tx, owner, "activate", &awaited, now)?);
            }
            let requested = Requested::Activate { checksum: &t.checksum };
            token::verify_and_consume(tx, key, token, transfer, requested, now)?;
            move_to(tx, t, to, now)?;
            // The host running the activation carries the agent it becomes.
            tx.prepare_cached("UPDATE transfers SET host_id = ?2 WHERE id = ?1")?
                .execute((transfer, &host))?;
            event::append(
                tx,
                transfer,
                EventKind::ActivationStarted,
                now,
                json!({ "component": t.component }),
            )
        })?;
        Ok((t, tracked))
    }

    /// Fails every activation left in progress by a host that stopped mid-activation (a crash,
    /// a kill, a power loss): each such transfer gets `activation_failed` with `reason` and is
    /// `pushed` again, so the orchestrator can retry with a new `activate` token. Returns their
    /// ids.
    ///
    /// Only the process that owns the data directory's sandboxes may call this (`ahp serve`, at
    /// start, holding the directory's guard): an activation in progress belongs to the process
    /// running its guest, and no guest survives its process.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for an empty or over-long reason; otherwise only if SQLite fails
    /// or a row is corrupt (nothing is then changed).
    pub fn fail_interrupted_activations(&mut self, reason: &str) -> Result<Vec<String>> {
        validate_reason(reason)?;
        self.write_at(|tx, now| fail_interrupted_in(tx, None, reason, now))
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

    /// [`terminate`](Self::terminate) if the transfer is still `active`, else nothing: the check
    /// and the teardown are one transaction, so a concurrent writer that ended the transfer or
    /// made it `insolvent` meanwhile is not overridden. Returns the transfer as it then stands.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for an empty or over-long reason; [`Error::TransferNotFound`]
    /// for an unknown transfer.
    pub fn terminate_if_active(&mut self, transfer: &str, reason: &str) -> Result<Transfer> {
        validate_reason(reason)?;
        transfer::check_id(transfer)?;
        let now = self.now();
        self.write(|tx| {
            let t = transfer::load(tx, transfer)?;
            if t.status != TransferStatus::Active {
                return Ok(t);
            }
            let to = check(&t, Operation::Terminate)?;
            end(tx, &t, to, now, EventKind::Terminated, reason)?;
            transfer::load(tx, transfer)
        })
    }

    /// Runs one operation on one transfer as the operator: [`step_as`](Self::step_as) with
    /// [`TransferOwner::Operator`]. The operations a token authorizes (provision, activate) need
    /// no owner: the operator minted the token for this transfer.
    fn step(
        &mut self,
        transfer: &str,
        op: Operation,
        body: impl FnMut(Option<&TokenKey>, &Tx<'_>, &Transfer, Phase, Timestamp) -> Result<()>,
    ) -> Result<Transfer> {
        self.step_as(transfer, op, &TransferOwner::Operator, body)
    }

    /// Runs one operation on one transfer of `caller`'s: a transaction (retried while the
    /// database is busy), the ownership and edge checks, `body`, commit.
    fn step_as(
        &mut self,
        transfer: &str,
        op: Operation,
        caller: &TransferOwner,
        mut body: impl FnMut(Option<&TokenKey>, &Tx<'_>, &Transfer, Phase, Timestamp) -> Result<()>,
    ) -> Result<Transfer> {
        transfer::check_id(transfer)?;
        let now = self.now();
        let key = self.token_key.clone();
        self.write(|tx| {
            let t = transfer::load_for(tx, transfer, caller)?;
            let to = check(&t, op)?;
            body(key.as_ref(), tx, &t, to, now)?;
            transfer::load(tx, transfer)
        })
    }
}

/// The completion of [`Store::end_activation`] in `tx`.
pub(crate) fn complete_activation_in(tx: &Tx<'_>, transfer: &str, now: Timestamp) -> Result<Transfer> {
    let t = transfer::load(tx, transfer)?;
    let budget = budget::load(tx, transfer)?;
    let budget_exhausted = budget.is_some_and(|b| b.is_exhausted());
    let to = check(&t, Operation::CompleteActivation { budget_exhausted })?;
    move_to(tx, &t, to, now)?;
    tx.prepare_cached("UPDATE transfers SET activated_at = ?2 WHERE id = ?1")?
        .execute((transfer, now.as_micros()))?;
    event::append(tx, transfer, EventKind::Activated, now, json!({}))?;
    if let (TransferStatus::Insolvent, Some(b)) = (to.status, budget) {
        become_insolvent(tx, transfer, &b, now, "activation")?;
    }
    transfer::load(tx, transfer)
}

/// Moves `t` along `to` (out of its activation) and appends `activation_failed` with `reason`
/// (see [`Store::end_activation`]).
pub(crate) fn fail_activation_in(tx: &Tx<'_>, t: &Transfer, to: Phase, reason: &str, now: Timestamp) -> Result<()> {
    move_to(tx, t, to, now)?;
    event::append(tx, &t.id, EventKind::ActivationFailed, now, json!({ "reason": reason }))
}

/// Stamps `insolvent_at` and appends the `insolvent` event; `during` says what found the
/// budget spent (`usage` or `activation`).
pub(crate) fn become_insolvent(tx: &Tx<'_>, transfer: &str, b: &Budget, now: Timestamp, during: &str) -> Result<()> {
    tx.prepare_cached("UPDATE transfers SET insolvent_at = ?2 WHERE id = ?1")?
        .execute((transfer, now.as_micros()))?;
    let detail = json!({
        "spentMicroUsd": b.spent_micro_usd,
        "allocatedMicroUsd": b.allocated_micro_usd,
        "insolventAt": now.to_string(),
        "during": during,
    });
    event::append(tx, transfer, EventKind::Insolvent, now, detail)
}

/// Compare-and-set of a transfer's phase: applies only if `t` is still as it was read.
///
/// Every transition goes through here, so this is also where a transfer leaving `active`
/// unbinds its agent, in the same transaction ([`binding::unbind`]): `insolvent` stops its turns,
/// `terminated` and `expired` detach its endpoint.
pub(crate) fn move_to(tx: &Tx<'_>, t: &Transfer, to: Phase, now: Timestamp) -> Result<()> {
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
    if to.status != t.status {
        binding::unbind(tx, t, to.status, now)?;
    }
    if t.activating && !to.activating {
        // However the activation ends — completed, failed, interrupted, expired, terminated —
        // the MCP tasks waiting for it end in this commit.
        let awaited = Awaited::Activation { transfer: t.id.clone() };
        let said = format!("the activation ended: the transfer is {}", to.status.as_str());
        mcp_task::end_awaiting(tx, &awaited, McpTaskStatus::Completed, Some(&said), now)?;
    }
    Ok(())
}

/// Moves `t` to a terminal phase, stamping when and why, with its event.
pub(crate) fn end(tx: &Tx<'_>, t: &Transfer, to: Phase, now: Timestamp, kind: EventKind, reason: &str) -> Result<()> {
    move_to(tx, t, to, now)?;
    tx.prepare_cached("UPDATE transfers SET ended_at = ?2, end_reason = ?3 WHERE id = ?1")?
        .execute((&t.id, now.as_micros(), reason))?;
    event::append(tx, &t.id, kind, now, json!({ "reason": reason, "from": t.status }))
}

pub(crate) fn validate_reason(reason: &str) -> Result<()> {
    if reason.trim().is_empty() || reason.len() > MAX_REASON_BYTES {
        return Err(Error::invalid(
            "reason",
            format!("must be 1 to {MAX_REASON_BYTES} bytes and not blank"),
        ));
    }
    Ok(())
}

/// Fails every activation in progress (of the transfers host `host` carries, or all with
/// `None`) as interrupted with `reason`, inside `tx`; returns their ids.
pub(crate) fn fail_interrupted_in(
    tx: &Tx<'_>,
    host: Option<&str>,
    reason: &str,
    now: Timestamp,
) -> Result<Vec<String>> {
    let sql = format!(
        "SELECT {} FROM transfers WHERE status = 'pushed' AND activation_started_at IS NOT NULL
           AND (?1 IS NULL OR host_id = ?1) ORDER BY id",
        transfer::TRANSFER_COLUMNS
    );
    let stuck = {
        let mut stmt = tx.prepare_cached(&sql)?;
        let rows = stmt.query_map([host], |r| Ok(transfer::from_row(r)))?;
        rows.map(|r| r?).collect::<Result<Vec<_>>>()?
    };
    for t in &stuck {
        let to = check(t, Operation::FailActivation)?;
        move_to(tx, t, to, now)?;
        let detail = json!({ "reason": reason, "interrupted": true });
        event::append(tx, &t.id, EventKind::ActivationFailed, now, detail)?;
    }
    Ok(stuck.into_iter().map(|t| t.id).collect())
}
