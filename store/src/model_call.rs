//! Model calls: the reservation before a call to a model and its settlement after.
//!
//! The host's model gateway never lets a call's cost pass the budget. Before it sends a request
//! it *reserves* the call's worst case ([`Store::reserve_model_call`]) in one transaction that
//! also reads the spend: an upper bound of the input tokens at the highest of the model's input
//! prices, plus the output cap at the output price. The output cap is lowered to what the budget
//! still pays for; when not even [`MIN_OUTPUT_TOKENS`] fit, the call is refused and the provider
//! never sees it. The reservation is held in the budget's `reserved_micro_usd`, which
//! [`Budget::remaining_micro_usd`] subtracts, so concurrent reservations (and the fuel the CPU
//! meter grants) can never together pass the allocation.
//!
//! After the call the gateway *settles* it ([`Store::settle_model_call`]), again in one
//! transaction: the reservation is released and the call charged — exactly what its usage costs
//! at the prices stored with the reservation (never more than the reservation) when the provider
//! reported usage; nothing for a definite refusal; the whole reservation when the outcome is
//! unknown (the request went out, no usage came back). The charge is ordinary spend of kind
//! [`MODEL_TOKENS_USAGE_KIND`] (it may make the transfer `insolvent`), and the settlement appends
//! `model_called` (token counts, reserved, charged, latency; never text).
//!
//! A reservation left open by a host that stopped mid-call (a crash) is charged in full by the
//! next host that takes the data directory over ([`Store::settle_interrupted_model_calls`]).
//!
//! Costs are `ceil(Σ tokens × price / 1,000,000)` in integer micro-USD, computed in 128 bits.

use std::time::Duration;

use ahp_store_sql::{OptionalExtension, Row, Tx};
use serde::Serialize;
use serde_json::json;

use crate::budget::{self, Budget};
use crate::clock::Timestamp;
use crate::db::Store;
use crate::error::{Error, Result};
use crate::event::{self, EventKind};
use crate::id::{is_well_formed, new_id};
use crate::owner::TransferOwner;
use crate::spend::{MODEL_TOKENS_USAGE_KIND, add_spend};
use crate::state::{Operation, TransferStatus};
use crate::transfer;
use crate::transfer::check;

mod price;

pub use price::{ModelPrices, ModelUsage, ReservationPlan, plan_reservation};

/// Prefix of model-call ids.
pub const MODEL_CALL_ID_PREFIX: &str = "mc_";

/// The smallest output cap worth a call: a call the budget cannot pay this many output tokens
/// for (beside its input) is refused rather than sent to produce a useless fragment.
pub const MIN_OUTPUT_TOKENS: u32 = 16;

/// The highest price the store accepts, in micro-USD per million tokens: 1,000 USD, far above
/// any model's, small enough that every cost fits in 64 bits.
pub const MAX_PRICE_MICRO_USD_PER_MTOK: u64 = 1_000_000_000;

/// The most tokens one call may count in any field (input bound, output cap, usage): 100
/// million, beyond every model's context.
pub const MAX_CALL_TOKENS: u64 = 100_000_000;

/// Longest model id, in bytes.
pub const MAX_MODEL_ID_BYTES: usize = 64;

/// Most model calls [`Store::model_calls`] returns at once.
pub const MAX_MODEL_CALL_LIST: usize = 500;

/// What the gateway asks [`Store::reserve_model_call`] to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservationRequest<'a> {
    /// The policy's model id (`a-z A-Z 0-9 . _ -`, at most [`MAX_MODEL_ID_BYTES`]).
    pub model: &'a str,
    /// Its prices now; stored with the reservation, so the settlement charges at them.
    pub prices: ModelPrices,
    /// The upper bound of the request's input tokens (at most [`MAX_CALL_TOKENS`]).
    pub input_tokens_bound: u64,
    /// The output cap wanted (1 to [`MAX_CALL_TOKENS`]); the reservation may lower it.
    pub max_output_tokens: u32,
}

/// A reservation held for a call about to be sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelReservation {
    /// The call's id, for [`Store::settle_model_call`].
    pub call_id: String,
    /// What is held, and the output cap the request must be sent with.
    pub plan: ReservationPlan,
    /// The budget with the reservation held.
    pub budget: Budget,
}

/// What [`Store::reserve_model_call`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// Held: send the request with `plan.max_output_tokens`.
    Granted(ModelReservation),
    /// The budget cannot pay for the smallest useful call; nothing was held or written.
    InsufficientBudget {
        /// What is missing, in micro-USD (at least 1).
        shortfall_micro_usd: u64,
    },
    /// The transfer is `insolvent`: nothing was held or written.
    Insolvent,
}

/// How a call ended, for its settlement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    /// The provider answered and reported its usage: charged exactly (at most the reservation).
    Completed(ModelUsage),
    /// The provider refused the call definitely (an HTTP error status with its error body), or
    /// the request was never sent: charged nothing.
    Refused,
    /// The request was sent and no usage came back (a timeout, a cut or malformed response):
    /// charged the whole reservation.
    Unknown,
}

impl CallOutcome {
    fn as_str(self) -> &'static str {
        match self {
            Self::Completed(_) => "completed",
            Self::Refused => "refused",
            Self::Unknown => "unknown",
        }
    }
}

/// What a settlement charged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settlement {
    /// What the call was charged, in micro-USD.
    pub charged_micro_usd: u64,
    /// The budget after the charge and the release.
    pub budget: Budget,
    /// The transfer's status after the charge (`insolvent` once spend reached the allocation).
    pub status: TransferStatus,
}

/// One model call as the store records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCall {
    /// Its id.
    pub id: String,
    /// The transfer it was paid from.
    pub transfer_id: String,
    /// The policy's model id.
    pub model: String,
    /// `completed`, `refused`, `unknown`, `interrupted` — or `None` while in flight.
    pub outcome: Option<String>,
    /// What was held.
    pub reservation: ReservationPlan,
    /// What the provider reported, once settled with usage.
    pub usage: Option<ModelUsage>,
    /// What it was charged, once settled.
    pub charged_micro_usd: Option<u64>,
    /// How long the call took, once settled.
    pub latency_ms: Option<u64>,
    /// When it was reserved.
    pub reserved_at: Timestamp,
}

fn validate_model(model: &str) -> Result<()> {
    let ok = !model.is_empty()
        && model.len() <= MAX_MODEL_ID_BYTES
        && model
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "model",
            format!("must be 1 to {MAX_MODEL_ID_BYTES} of a-z, A-Z, 0-9, '.', '_', '-'"),
        ))
    }
}

fn validate_tokens(field: &str, n: u64) -> Result<()> {
    if n > MAX_CALL_TOKENS {
        return Err(Error::invalid(field, format!("must be at most {MAX_CALL_TOKENS}")));
    }
    Ok(())
}

fn check_call_id(id: &str) -> Result<()> {
    if is_well_formed(id, MODEL_CALL_ID_PREFIX) {
        Ok(())
    } else {
        Err(Error::invalid("callId", "is not a model-call id"))
    }
}

const CALL_COLUMNS: &str = "id, transfer_id, model, outcome, input_tokens_bound, max_output_tokens,
    reserved_micro_usd, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens,
    charged_micro_usd, latency_ms, reserved_at, price_input, price_output, price_cache_read,
    price_cache_write";

fn unsigned(r: &Row, i: usize) -> ahp_store_sql::SqlResult<u64> {
    let v: i64 = r.get(i)?;
    u64::try_from(v).map_err(|_| ahp_store_sql::SqlError::conversion(i, format!("{v} is negative")))
}

fn opt_unsigned(r: &Row, i: usize) -> ahp_store_sql::SqlResult<Option<u64>> {
    let v: Option<i64> = r.get(i)?;
    v.map(|v| u64::try_from(v).map_err(|_| ahp_store_sql::SqlError::conversion(i, format!("{v} is negative"))))
        .transpose()
}

fn call_from_row(r: &Row) -> ahp_store_sql::SqlResult<(ModelCall, ModelPrices)> {
    let usage = match (
        opt_unsigned(r, 7)?,
        opt_unsigned(r, 8)?,
        opt_unsigned(r, 9)?,
        opt_unsigned(r, 10)?,
    ) {
        (Some(input_tokens), Some(cache_read_tokens), Some(cache_write_tokens), Some(output_tokens)) => {
            Some(ModelUsage {
                input_tokens,
                cache_read_tokens,
                cache_write_tokens,
                output_tokens,
            })
        }
        _ => None,
    };
    let max_output: i64 = r.get(5)?;
    let call = ModelCall {
        id: r.get(0)?,
        transfer_id: r.get(1)?,
        model: r.get(2)?,
        outcome: r.get(3)?,
        reservation: ReservationPlan {
            input_tokens_bound: unsigned(r, 4)?,
            max_output_tokens: u32::try_from(max_output)
                .map_err(|_| ahp_store_sql::SqlError::conversion(5, format!("{max_output} is out of range")))?,
            reserved_micro_usd: unsigned(r, 6)?,
        },
        usage,
        charged_micro_usd: opt_unsigned(r, 11)?,
        latency_ms: opt_unsigned(r, 12)?,
        reserved_at: Timestamp::from_micros(r.get(13)?),
    };
    let prices = ModelPrices {
        input: unsigned(r, 14)?,
        output: unsigned(r, 15)?,
        cache_read: unsigned(r, 16)?,
        cache_write: unsigned(r, 17)?,
    };
    Ok((call, prices))
}

/// Settles the open call `call` (with `prices`) inside `tx` as `outcome` (`interrupted` names a
/// takeover's settlement of an unknown outcome).
fn settle(
    tx: &Tx<'_>,
    call: &ModelCall,
    prices: &ModelPrices,
    outcome: CallOutcome,
    outcome_name: &str,
    latency: Duration,
    now: Timestamp,
) -> Result<Settlement> {
    let reserved = call.reservation.reserved_micro_usd;
    let (usage, charged) = match outcome {
        // A provider reporting more than the reservation bounds is charged the reservation:
        // the bound is the promise the budget was checked against.
        CallOutcome::Completed(u) => (Some(u), prices.cost(&u).min(reserved)),
        CallOutcome::Refused => (None, 0),
        CallOutcome::Unknown => (None, reserved),
    };
    let latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
    let changed = tx
        .prepare_cached(
            "UPDATE model_calls SET status = 'settled', outcome = ?2, input_tokens = ?3, cache_read_tokens = ?4,
                    cache_write_tokens = ?5, output_tokens = ?6, charged_micro_usd = ?7, latency_ms = ?8,
                    settled_at = ?9
             WHERE id = ?1 AND status = 'reserved'",
        )?
        .execute((
            &call.id,
            outcome_name,
            usage.map(|u| u.input_tokens as i64),
            usage.map(|u| u.cache_read_tokens as i64),
            usage.map(|u| u.cache_write_tokens as i64),
            usage.map(|u| u.output_tokens as i64),
            charged as i64,
            i64::try_from(latency_ms).unwrap_or(i64::MAX),
            now.as_micros(),
        ))?;
    if changed != 1 {
        return Err(Error::invalid(
            "callId",
            format!("{} is not an open reservation", call.id),
        ));
    }
    // A database error (a busy one above all: another writer of this budget) is returned as
    // it is, so that the write path runs the transaction again; only a budget that does not
    // hold the reservation is corrupt.
    let released = tx
        .prepare_cached(
            "UPDATE budgets SET reserved_micro_usd = reserved_micro_usd - ?2 WHERE transfer_id = ?1 AND reserved_micro_usd >= ?2",
        )?
        .execute((&call.transfer_id, reserved as i64))?;
    if released != 1 {
        return Err(Error::CorruptRow {
            table: "budgets",
            reason: format!("{} holds less than the reservation of {}", call.transfer_id, call.id),
        });
    }
    let t = transfer::load(tx, &call.transfer_id)?;
    // Spend lands on a transfer that can still take it; one that ended meanwhile has nothing
    // left to pay from, and its call is recorded as charged nothing.
    let spendable = check(&t, Operation::ReportUsage { exhausts_budget: false }).is_ok();
    let charged = if spendable { charged } else { 0 };
    let status = if charged > 0 {
        add_spend(tx, &t, charged, MODEL_TOKENS_USAGE_KIND, now)?
            .transfer
            .status
    } else {
        t.status
    };
    if !spendable {
        tx.prepare_cached("UPDATE model_calls SET charged_micro_usd = 0 WHERE id = ?1")?
            .execute([&call.id])?;
    }
    let u = usage.unwrap_or_default();
    let detail = json!({
        "callId": call.id,
        "model": call.model,
        "outcome": outcome_name,
        "inputTokens": u.input_tokens,
        "cacheReadTokens": u.cache_read_tokens,
        "cacheWriteTokens": u.cache_write_tokens,
        "outputTokens": u.output_tokens,
        "maxOutputTokens": call.reservation.max_output_tokens,
        "reservedMicroUsd": reserved,
        "chargedMicroUsd": charged,
        "latencyMs": latency_ms,
    });
    event::append(tx, &call.transfer_id, EventKind::ModelCalled, now, detail)?;
    let budget = budget::load(tx, &call.transfer_id)?.ok_or_else(|| Error::CorruptRow {
        table: "budgets",
        reason: format!("{} has a model call but no budget", call.transfer_id),
    })?;
    Ok(Settlement {
        charged_micro_usd: charged,
        budget,
        status,
    })
}

impl Store {
    /// Reserves the worst case of a call to `request.model` from `transfer`'s budget (see the
    /// [module docs](self)), in one transaction with the spend it checks. Allowed while the
    /// transfer is `active` or activating.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed model id, a price or token count past its bound,
    /// or an output cap of 0; [`Error::TransferNotFound`]; [`Error::InvalidTransition`] for a
    /// transfer that is not running; [`Error::CarriedElsewhere`] when another host carries it
    /// now (this host lost the agent: it calls no model for it). A refusal for the budget is not an error but
    /// [`Reservation::InsufficientBudget`] or [`Reservation::Insolvent`]; nothing is then written.
    pub fn reserve_model_call(&mut self, transfer: &str, request: &ReservationRequest<'_>) -> Result<Reservation> {
        transfer::check_id(transfer)?;
        validate_model(request.model)?;
        request.prices.validate()?;
        validate_tokens("inputTokensBound", request.input_tokens_bound)?;
        validate_tokens("maxOutputTokens", u64::from(request.max_output_tokens))?;
        if request.max_output_tokens == 0 {
            return Err(Error::invalid("maxOutputTokens", "must be at least 1"));
        }
        let now = self.now();
        let me = self.host_id.clone();
        self.write(|tx| {
            let t = transfer::load_for(tx, transfer, &TransferOwner::Operator)?;
            // A host that lost the agent to another (a claim, a move) calls no model for it.
            crate::hosts::check_carries(tx, transfer, &me)?;
            if t.status == TransferStatus::Insolvent {
                return Ok(Reservation::Insolvent);
            }
            check(&t, Operation::ReportUsage { exhausts_budget: false })?;
            let b = budget::load(tx, transfer)?.ok_or_else(|| Error::CorruptRow {
                table: "budgets",
                reason: format!("{transfer} is {} but has no budget", t.status),
            })?;
            let plan = match plan_reservation(
                &request.prices,
                request.input_tokens_bound,
                request.max_output_tokens,
                b.remaining_micro_usd(),
            ) {
                Ok(plan) => plan,
                Err(shortfall_micro_usd) => return Ok(Reservation::InsufficientBudget { shortfall_micro_usd }),
            };
            let call_id = new_id(MODEL_CALL_ID_PREFIX);
            let p = request.prices;
            tx.prepare_cached(
                "INSERT INTO model_calls (id, transfer_id, model, status, price_input, price_output, price_cache_read,
                                          price_cache_write, input_tokens_bound, max_output_tokens,
                                          reserved_micro_usd, reserved_at)
                 VALUES (?1, ?2, ?3, 'reserved', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(ahp_store_sql::params![
                &call_id,
                transfer,
                request.model,
                p.input as i64,
                p.output as i64,
                p.cache_read as i64,
                p.cache_write as i64,
                plan.input_tokens_bound as i64,
                i64::from(plan.max_output_tokens),
                plan.reserved_micro_usd as i64,
                now.as_micros(),
            ])?;
            tx.prepare_cached(
                "UPDATE budgets SET reserved_micro_usd = reserved_micro_usd + ?2 WHERE transfer_id = ?1",
            )?
            .execute((transfer, plan.reserved_micro_usd as i64))?;
            Ok(Reservation::Granted(ModelReservation {
                call_id,
                plan,
                budget: Budget {
                    reserved_micro_usd: b.reserved_micro_usd + plan.reserved_micro_usd,
                    ..b
                },
            }))
        })
    }

    /// Settles the open call `call_id` as `outcome` after `latency` (see the
    /// [module docs](self)): releases its reservation, charges it, appends `model_called` —
    /// one transaction.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (field `callId`) for a malformed id or a call that is not open
    /// (already settled: nothing changes), or a usage count past [`MAX_CALL_TOKENS`].
    pub fn settle_model_call(&mut self, call_id: &str, outcome: CallOutcome, latency: Duration) -> Result<Settlement> {
        check_call_id(call_id)?;
        if let CallOutcome::Completed(u) = outcome {
            for (field, n) in [
                ("usage.inputTokens", u.input_tokens),
                ("usage.cacheReadTokens", u.cache_read_tokens),
                ("usage.cacheWriteTokens", u.cache_write_tokens),
                ("usage.outputTokens", u.output_tokens),
            ] {
                validate_tokens(field, n)?;
            }
        }
        let now = self.now();
        let sql = format!("SELECT {CALL_COLUMNS} FROM model_calls WHERE id = ?1 AND status = 'reserved'");
        self.write(|tx| {
            let found = tx
                .prepare_cached(&sql)?
                .query_row([call_id], call_from_row)
                .optional()?;
            let (call, prices) =
                found.ok_or_else(|| Error::invalid("callId", format!("{call_id} is not an open reservation")))?;
            settle(tx, &call, &prices, outcome, outcome.as_str(), latency, now)
        })
    }

    /// Charges in full every reservation left open by a host that stopped mid-call (outcome
    /// `interrupted`), and returns their ids. Only the process that takes the data directory over
    /// may call this (`ahp serve` at start, holding its guard): a call in flight belongs to the
    /// process that sent it, and no call survives its process.
    ///
    /// # Errors
    ///
    /// Only if SQLite fails or a row is corrupt (nothing is then changed).
    pub fn settle_interrupted_model_calls(&mut self) -> Result<Vec<String>> {
        self.write_at(|tx, now| settle_interrupted_in(tx, None, now))
    }

    /// The newest `limit` (at most [`MAX_MODEL_CALL_LIST`]) model calls of `transfer`, oldest
    /// first: for the operator (`ahp transfer show`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed id or a limit out of range.
    pub fn model_calls(&mut self, transfer: &str, limit: usize) -> Result<Vec<ModelCall>> {
        transfer::check_id(transfer)?;
        if limit == 0 || limit > MAX_MODEL_CALL_LIST {
            return Err(Error::invalid("limit", format!("must be 1 to {MAX_MODEL_CALL_LIST}")));
        }
        let sql = format!(
            "SELECT * FROM (SELECT {CALL_COLUMNS} FROM model_calls WHERE transfer_id = ?1
                            ORDER BY reserved_at DESC, id DESC LIMIT ?2) AS recent
             ORDER BY reserved_at, id"
        );
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(&sql)?;
        let rows = stmt.query_map((transfer, limit as i64), call_from_row)?;
        Ok(rows
            .map(|r| r.map(|(c, _)| c))
            .collect::<ahp_store_sql::SqlResult<Vec<_>>>()?)
    }
}

/// Charges every model call in flight (of the transfers host `host` carries, or all with
/// `None`) its reservation, as interrupted, inside `tx`; returns their ids.
pub(crate) fn settle_interrupted_in(tx: &Tx<'_>, host: Option<&str>, now: Timestamp) -> Result<Vec<String>> {
    let sql = format!(
        "SELECT {CALL_COLUMNS} FROM model_calls
         WHERE status = 'reserved'
           AND (?1 IS NULL OR transfer_id IN (SELECT id FROM transfers WHERE host_id = ?1))
         ORDER BY reserved_at, id"
    );
    let open = {
        let mut stmt = tx.prepare_cached(&sql)?;
        let rows = stmt.query_map([host], call_from_row)?;
        rows.collect::<ahp_store_sql::SqlResult<Vec<_>>>()?
    };
    for (call, prices) in &open {
        let latency = Duration::from_micros(
            u64::try_from(now.as_micros().saturating_sub(call.reserved_at.as_micros())).unwrap_or(0),
        );
        settle(tx, call, prices, CallOutcome::Unknown, "interrupted", latency, now)?;
    }
    Ok(open.into_iter().map(|(c, _)| c.id).collect())
}

#[cfg(test)]
mod tests;
