//! The wake carrier's side of wake delivery: what a host that carries agents records around a
//! turn, so that no step of it can leave a wake stuck.
//!
//! A carrier claims a wake and crosses the fence with [`Store::claim_wake`] and
//! [`Store::prepare_dispatch`] ([`super::attempt`]). Around that:
//!
//! - the end of a turn — its outcome and, for a turn that succeeded, the exact consume of its
//!   wake — is **one** transaction, [`Store::finish_turn`]: the attempt goes from `dispatched`
//!   straight to `consumed` (or to `delivery_unknown`), never to an `accepted` that waits for a
//!   consume that may never come;
//! - when the carrier knows no turn of it is running (its own turn's end could not be
//!   recorded, or a claim found an unresolved dispatch in the way), it settles what is left
//!   with [`Store::settle_unconfirmed_attempts`]: every dispatched or accepted attempt through
//!   its endpoint becomes `delivery_unknown` — the same settlement reconciliation applies, and
//!   never a redispatch.
//!
//! (`release_claim`, giving a claim back before the fence, and `wake_ready_endpoints`, the
//! endpoints with a wake to claim, serve the store's tests only: the `testing` feature.)

use ahp_store_sql::Tx;

use super::admission;
use super::attempt::{
    self, DispatchOutcome, DispatchTicket, WakeAttempt, check_attempt_id, check_consume_token, load_attempt,
    load_attempt_for,
};
use super::delivery;
use super::endpoint::AgentActor;
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::idempotency::Mutation;
use super::principal::Caller;
use super::scope::Scope;
use super::state::{AttemptEvent, AttemptState};
use super::wake::check_wake_id;
use crate::budget::MAX_USAGE_REPORT_MICRO_USD;
use crate::clock::Timestamp;
use crate::db::Store;
use crate::owner::TransferOwner;
use crate::spend::{self, COMPUTE_USAGE_KIND, UsageReport};
use crate::transfer;

/// Most endpoints `wake_ready_endpoints` returns per page.
pub const MAX_READY_PAGE: usize = 1000;

/// Compute spend of a turn not yet recorded — the fuel it burnt since the meter's last
/// settlement, priced — to be recorded with the turn's end ([`Store::finish_turn_spending`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnSpend {
    /// The transfer that pays.
    pub transfer: String,
    /// Micro-USD, 1 to [`MAX_USAGE_REPORT_MICRO_USD`].
    pub micro_usd: u64,
}

/// What a turn did with its inbox, recorded with its end ([`Store::finish_turn_spending`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct TurnInbox<'a> {
    /// Deliveries the turn consumed and the host held: consumed in the end's commit. At most
    /// [`MAX_TURN_CONSUMES`](super::bounds::MAX_TURN_CONSUMES).
    pub consumed: &'a [String],
    /// Deliveries the turn read while they were queued: each still queued once `consumed` are
    /// counts one more try ([`Delivery::tries`](super::Delivery::tries)). At most
    /// [`MAX_TURN_CONSUMES`](super::bounds::MAX_TURN_CONSUMES).
    pub read: &'a [String],
}

/// What [`Store::finish_turn_spending`] recorded.
#[derive(Debug, Clone)]
pub struct TurnEnd {
    /// The attempt as it now stands (`state_changed` false for an exact retry).
    pub attempt: Mutation<WakeAttempt>,
    /// The spend's report, when it was recorded with this end.
    pub spend: Option<UsageReport>,
    /// Why the transfer refused the spend (it left `active` meanwhile, say): the end is
    /// recorded without it.
    pub spend_refused: Option<String>,
    /// The turn consumed something and left deliveries queued with no wake for them: a new
    /// pending wake was created for them (whom a host should schedule again).
    pub rewoken: bool,
    /// When this call changed nothing (an exact retry of an end that committed, its answer
    /// lost), the spend that earlier commit recorded with the end, micro-USD: the caller counts
    /// it as recorded instead of owing it again.
    pub earlier_spend_micro_usd: Option<u64>,
}

/// Finishes the admitted attempt `a` of `actor` with `outcome`, consuming `wake` with
/// `consume_token` for an accepted turn.
fn finish_in(
    tx: &Tx<'_>,
    actor: &AgentActor,
    a: WakeAttempt,
    wake: &str,
    consume_token: &str,
    outcome: DispatchOutcome,
    now: Timestamp,
) -> Result<Mutation<WakeAttempt>> {
    if a.wake_id != wake {
        // The attempt is the actor's, but not for this wake: the ticket was not minted for it.
        return Err(Error::AttemptNotFound(a.id));
    }
    match outcome {
        DispatchOutcome::Unknown => attempt::finish(tx, &actor.agent, a, AttemptEvent::Unknown, now),
        DispatchOutcome::Accepted => {
            if a.state.after(AttemptEvent::Consume).is_none() && a.state != AttemptState::Consumed {
                return Err(Error::InvalidAttemptState {
                    attempt: a.id,
                    operation: "finish the turn of",
                    state: a.state,
                });
            }
            let consumed = attempt::consume(tx, actor, wake, consume_token, now)?;
            let after = load_attempt(tx, &a.id)?;
            Ok(if consumed.state_changed {
                Mutation::changed(after)
            } else {
                Mutation::unchanged(after)
            })
        }
    }
}

/// Records `spend` as compute spend of its transfer inside `tx` (as `report_usage` does).
fn charge_in(tx: &Tx<'_>, spend: &TurnSpend, now: Timestamp) -> crate::Result<UsageReport> {
    let t = transfer::load_for(tx, &spend.transfer, &TransferOwner::Operator)?;
    spend::add_spend(tx, &t, spend.micro_usd, COMPUTE_USAGE_KIND, now)
}

impl Store {
    /// Records the end of a dispatched turn in one transaction: for
    /// [`DispatchOutcome::Accepted`] (the turn succeeded) the exact consume of the ticket's wake
    /// (as [`Store::consume_wake`]: wake, agent, current endpoint, generation and consume token
    /// must all match), which takes the attempt from `dispatched` to `consumed`; for
    /// [`DispatchOutcome::Unknown`] the attempt becomes `delivery_unknown`. Either commits
    /// whole or not at all, so a failure leaves the attempt `dispatched` and the same call may
    /// be made again; an exact retry after success is a no-op (`state_changed` false). Returns
    /// the attempt as it now stands.
    ///
    /// # Errors
    ///
    /// The endpoint admission errors; [`Error::AttemptNotFound`] for an attempt not bound to
    /// this endpoint or not for the ticket's wake; [`Error::InvalidAttemptState`] for an attempt
    /// that can no longer take this outcome (e.g. already `delivery_unknown` when the turn is
    /// reported accepted); [`Error::ConsumeRefused`] naming the field that did not match;
    /// [`Error::InvalidInput`] for malformed ids or token; [`Error::MissingScope`].
    pub fn finish_turn(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        ticket: &DispatchTicket,
        outcome: DispatchOutcome,
    ) -> Result<Mutation<WakeAttempt>> {
        Ok(self
            .finish_turn_spending(caller, actor, ticket, outcome, None, TurnInbox::default())?
            .attempt)
    }

    /// [`finish_turn`](Self::finish_turn) with the turn's last compute spend and the deliveries
    /// it consumed in the same transaction: one commit where there were two or more. The spend
    /// is recorded as `report_usage` records compute (budget, `usage_reported` event,
    /// `insolvent` when it spends the last of the budget) — but only when this call changes the
    /// attempt, so that an exact retry of a finish that committed does not charge twice; the
    /// spend is kept on the attempt, and such a retry reports it
    /// ([`TurnEnd::earlier_spend_micro_usd`]) so the caller does not keep it owed either. A
    /// transfer that refuses the spend (no longer `active`) leaves the end recorded without it
    /// ([`TurnEnd::spend_refused`]). Each of `inbox.consumed` is consumed as
    /// [`consume_delivery`](Self::consume_delivery) consumes it (desired-state: a retry changes
    /// nothing), whatever the outcome — the turn said it handled them; then each of
    /// `inbox.read` still queued counts one more try, on the first record of the end only (an
    /// exact retry counts nothing again). A turn that consumed a delivery and left others
    /// queued with no open wake gets a new wake for them ([`TurnEnd::rewoken`]). Nothing is
    /// recorded when the transaction fails.
    ///
    /// # Errors
    ///
    /// As [`finish_turn`](Self::finish_turn); [`Error::InvalidInput`] (field `spend`) for an
    /// amount outside 1..=[`MAX_USAGE_REPORT_MICRO_USD`] or a malformed transfer id, and for
    /// more than [`MAX_TURN_CONSUMES`](super::bounds::MAX_TURN_CONSUMES) consumes or a malformed
    /// message id; [`Error::MessageNotFound`] for a consume of a message not delivered to the
    /// agent — each changing nothing.
    pub fn finish_turn_spending(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        ticket: &DispatchTicket,
        outcome: DispatchOutcome,
        spend: Option<&TurnSpend>,
        inbox: TurnInbox<'_>,
    ) -> Result<TurnEnd> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        check_attempt_id(&ticket.attempt.id)?;
        check_wake_id(&ticket.wake.id)?;
        check_consume_token(&ticket.consume_token)?;
        delivery::check_consumes(inbox.consumed)?;
        delivery::check_consumes(inbox.read)?;
        if let Some(spend) = spend {
            if spend.micro_usd == 0 || spend.micro_usd > MAX_USAGE_REPORT_MICRO_USD {
                return Err(Error::invalid(
                    "spend",
                    format!("must be 1 to {MAX_USAGE_REPORT_MICRO_USD} micro-USD"),
                ));
            }
            transfer::check_id(&spend.transfer).map_err(|e| Error::invalid("spend", e.to_string()))?;
        }
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            admission::admit(&tx, caller, actor, now)?;
            let a = load_attempt_for(&tx, &actor.endpoint, &ticket.attempt.id)?;
            delivery::consume_all_in(&tx, actor, inbox.consumed, now)?;
            let attempt = finish_in(&tx, actor, a, &ticket.wake.id, &ticket.consume_token, outcome, now)?;
            let mut rewoken = false;
            if attempt.state_changed {
                delivery::count_tries_in(&tx, actor, inbox.read)?;
                if let Some(since) = attempt.value.dispatched_at {
                    rewoken = super::wake::rewake_for_leftovers(&tx, &actor.agent, since, now)?;
                }
            }
            let (mut spent, mut refused, mut earlier) = (None, None, None);
            if let Some(spend) = spend.filter(|_| attempt.state_changed) {
                match charge_in(&tx, spend, now) {
                    Ok(report) => {
                        tx.prepare_cached("UPDATE wake_attempts SET turn_spend_micro_usd = ?2 WHERE id = ?1")?
                            .execute((&attempt.value.id, spend.micro_usd as i64))?;
                        spent = Some(report);
                    }
                    Err(crate::Error::Database(e)) => return Err(Error::Database(e)),
                    Err(e) => refused = Some(e.to_string()),
                }
            } else if !attempt.state_changed {
                let recorded: Option<i64> = tx
                    .prepare_cached("SELECT turn_spend_micro_usd FROM wake_attempts WHERE id = ?1")?
                    .query_row([&attempt.value.id], |r| r.get(0))?;
                earlier = recorded.and_then(|v| u64::try_from(v).ok());
            }
            tx.commit()?;
            #[cfg(any(test, feature = "testing"))]
            s.fault_point(crate::fault::FaultStep::FinishTurnAnswer)?;
            Ok(TurnEnd {
                attempt,
                spend: spent,
                spend_refused: refused,
                rewoken,
                earlier_spend_micro_usd: earlier,
            })
        })
    }

    /// Gives back a claim the carrier will not take to the dispatch fence: the attempt becomes
    /// `released` and its wake is pending again (audited as `wake_released`). Releasing an
    /// attempt already released is a no-op.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidAttemptState`] for an attempt past the fence (finish it instead);
    /// [`Error::AttemptNotFound`] for one not bound to this endpoint; the endpoint admission
    /// errors; [`Error::InvalidInput`]; [`Error::MissingScope`].
    #[cfg(any(test, feature = "testing"))]
    pub fn release_claim(
        &mut self,
        caller: &Caller,
        actor: &AgentActor,
        attempt: &str,
    ) -> Result<Mutation<WakeAttempt>> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        check_attempt_id(attempt)?;
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            admission::admit(&tx, caller, actor, now)?;
            let a = load_attempt_for(&tx, &actor.endpoint, attempt)?;
            match a.state {
                AttemptState::Released => Ok(Mutation::unchanged(a)),
                AttemptState::Claimed => {
                    attempt::release(&tx, &a.id, &a.wake_id, now)?;
                    let a = load_attempt(&tx, &a.id)?;
                    tx.commit()?;
                    Ok(Mutation::changed(a))
                }
                state => Err(Error::InvalidAttemptState {
                    attempt: a.id,
                    operation: "release",
                    state,
                }),
            }
        })
    }

    /// The carrier declares that no turn of the acting endpoint is running: every attempt
    /// through it past the dispatch fence and not consumed — dispatched, or accepted — becomes
    /// `delivery_unknown` (audited), exactly as reconciliation settles them; its wake is never
    /// redispatched. Returns the attempts settled (none: a no-op).
    ///
    /// # Errors
    ///
    /// The endpoint admission errors; [`Error::MissingScope`].
    pub fn settle_unconfirmed_attempts(&mut self, caller: &Caller, actor: &AgentActor) -> Result<Vec<WakeAttempt>> {
        caller.require(Scope::Manage)?;
        actor.validate()?;
        self.admitted(|s| {
            let (tx, now) = s.begin_immediate()?;
            admission::admit(&tx, caller, actor, now)?;
            let open = attempt::unconfirmed(&tx, &actor.endpoint)?;
            let mut settled = Vec::with_capacity(open.len());
            for a in open {
                attempt::mark_unknown(&tx, &a, now)?;
                settled.push(load_attempt(&tx, &a.id)?);
            }
            tx.commit()?;
            Ok(settled)
        })
    }

    /// Host-side: the attached, wake-capable endpoints whose agent has a wake not yet past the
    /// dispatch fence (pending, or claimed), as the actor each was registered for, ordered by
    /// endpoint id after the exclusive cursor `after`, at most `limit` — what a host carrying
    /// agents schedules on its periodic safety net, matching them against the carriers it holds.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed cursor or a limit outside
    /// 1..=[`MAX_READY_PAGE`]; [`Error::CorruptRow`] for a negative generation.
    #[cfg(any(test, feature = "testing"))]
    pub fn wake_ready_endpoints(&mut self, after: Option<&str>, limit: usize) -> Result<Vec<AgentActor>> {
        if limit == 0 || limit > MAX_READY_PAGE {
            return Err(Error::invalid("limit", format!("must be 1 to {MAX_READY_PAGE}")));
        }
        if let Some(a) = after {
            super::endpoint::check_id(a)?;
        }
        let tx = self.autocommit();
        let mut stmt = tx.prepare_cached(
            "SELECT e.id, e.agent_id, e.generation FROM agent_endpoints e
             WHERE e.state = 'attached' AND e.wake_capable = 1 AND e.id > ?1
               AND EXISTS (SELECT 1 FROM wakes w WHERE w.agent_id = e.agent_id AND w.state IN ('pending', 'claimed'))
             ORDER BY e.id LIMIT ?2",
        )?;
        let rows = stmt.query_map((after.unwrap_or(""), limit as i64), |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?))
        })?;
        rows.map(|r| {
            let (endpoint, agent, generation) = r?;
            let generation = u64::try_from(generation)
                .map_err(|_| Error::corrupt("agent_endpoints", format!("{endpoint}: generation")))?;
            Ok(AgentActor {
                agent,
                endpoint,
                generation,
            })
        })
        .collect()
    }
}
