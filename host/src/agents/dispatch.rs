//! One dispatch opportunity of an agent: the controller's loop of claim, fence, turn and the
//! turn's end (see the [module docs](super) and [`recovery`](super::recovery) for what a
//! failure at each step does).

use std::sync::Arc;
use std::time::Duration;

use ahp_store::TransferStatus;
use ahp_store::conversation::{ConversationError, DispatchOutcome, DispatchTicket, TurnSpend};

use super::recovery::{self, Failure, retry};
use super::{Agents, Carrier, Drive, MAX_TURNS_PER_OPPORTUNITY, TurnFailure};
use crate::interfaces::TurnCtx;
use crate::sandbox::{DeferredSpend, HeldInbox, RunOutcome};
use crate::shared_store::StoreLock;

/// How one turn of a dispatch opportunity ended.
enum Next {
    /// Another turn may follow.
    Again,
    /// Nothing more to do now.
    Idle,
}

impl Agents {
    /// One dispatch opportunity for `agent` (blocking): up to [`MAX_TURNS_PER_OPPORTUNITY`]
    /// turns, each for one claimed wake (see the [`agents`](super) docs). A step that fails
    /// transiently ends the opportunity with [`Drive::retry`] set and the carrier kept; only an
    /// endpoint that is gone releases it.
    ///
    /// # Errors
    ///
    /// A store refusal that retrying does not fix (a bug, a corrupt row); the carrier is kept
    /// and what was recorded before it stays recorded.
    pub fn drive(&self, agent: &str) -> Result<Drive, crate::sandbox::Error> {
        wasmtime_wasi::runtime::in_tokio(self.drive_async(agent))
    }

    /// [`drive`](Self::drive) as a future: what the controller's task for `agent` runs (see
    /// [`run_workers`](Self::run_workers)). Its turns hold a place of the
    /// [`Admission`](super::admission::Admission) while they run, and are cancelled when the
    /// host lease stops being fresh (see [`lease_fresh`](Self::lease_fresh)).
    ///
    /// # Errors
    ///
    /// As [`drive`](Self::drive).
    pub async fn drive_async(&self, agent: &str) -> Result<Drive, crate::sandbox::Error> {
        let mut drive = Drive::default();
        let mut admitted = None;
        for n in 0..MAX_TURNS_PER_OPPORTUNITY {
            // The carrier held, or, at the start, the one its rows say (a parked agent); one
            // released during the opportunity ends it.
            let carrier = if n == 0 {
                self.carrier_to_drive(agent)
            } else {
                Ok(self.carrier(agent))
            };
            let carrier = match carrier {
                Ok(Some(carrier)) => carrier,
                Ok(None) => break,
                Err(failure) => {
                    tracing::info!(%agent, ?failure, "cannot read the agent's carrier; rescheduling it");
                    drive.retry = true;
                    break;
                }
            };
            if self.is_leaving(agent) {
                // Between turns: no turn of it runs here now.
                self.hand_over(&carrier);
                break;
            }
            if !self.lease_fresh() {
                // Another host may claim this one's agents any moment: no turn may start.
                tracing::warn!(%agent, "the host lease is not fresh; dropping the carrier");
                self.fence(carrier);
                break;
            }
            if admitted.is_none() {
                // A place among the turns running at once, fair between owners: waited for
                // here, before the turn takes a sandbox (and its pool slot).
                admitted = Some(self.admission.admit(carrier.caller.principal().as_str()).await);
            }
            match self.turn(&carrier, &mut drive).await {
                Ok(Next::Again) => {}
                Ok(Next::Idle) => break,
                Err(Failure::Gone(why)) => {
                    tracing::info!(%agent, %why, "the endpoint is gone; dropping the carrier");
                    self.release_carrier(&carrier);
                    break;
                }
                Err(Failure::Transient(why)) => {
                    tracing::info!(%agent, %why, "transient failure; rescheduling the agent");
                    drive.retry = true;
                    break;
                }
                Err(Failure::Refused(why)) => {
                    return Err(crate::sandbox::Error::Store(ahp_store::Error::invalid("dispatch", why)));
                }
            }
        }
        Ok(drive)
    }

    /// One turn of `c`'s agent: settle what an earlier turn left, read the transfer and its
    /// budget, claim, cross the fence, run the turn, record its end.
    async fn turn(&self, c: &Carrier, drive: &mut Drive) -> Result<Next, Failure> {
        let agent = c.actor.agent.as_str();
        let (caller, actor) = (&c.caller, &c.actor);
        if self.unsettled.locked().contains(agent) {
            self.settle(c)?;
        }
        // Before anything is claimed: the transfer still runs, and what its budget holds. A
        // failed read here leaves the wake pending.
        let (tier, budget) = {
            let mut db = self.store.locked();
            let t = db.transfer(&c.transfer).map_err(|e| Failure::of_store(&e))?;
            if t.status != TransferStatus::Active {
                return Err(Failure::Gone(format!("transfer {} is {}", t.id, t.status)));
            }
            let budget = db.budget(&c.transfer).map_err(|e| Failure::of_store(&e))?;
            (t.tier, budget.map_or(0, |b| b.remaining_micro_usd()))
        };
        let lease = tier
            .map_or(Duration::from_secs(30), |tier| tier.limits().wall_clock_per_turn)
            .saturating_add(Duration::from_secs(30))
            .min(ahp_store::conversation::bounds::MAX_CLAIM_LEASE);
        // Claim and the durable dispatch fence in one commit: from here on this wake is never
        // dispatched again. A failure leaves it pending, unclaimed.
        let dispatched = self.store.locked().claim_and_dispatch(caller, actor, lease);
        let ticket = match dispatched {
            Ok(Some(ticket)) => ticket,
            Ok(None) => return Ok(Next::Idle),
            // An unresolved dispatch of this endpoint is in the way, and no turn of it runs
            // (this is the agent's only opportunity): an earlier turn's end was never recorded.
            Err(ConversationError::LimitReached { .. }) => {
                return if self.settle(c)? {
                    Ok(Next::Again)
                } else {
                    Err(Failure::Transient(
                        "the claim is refused by an unresolved dispatch".into(),
                    ))
                };
            }
            Err(e) => return Err(Failure::of(&e)),
        };
        let ctx = TurnCtx {
            caller: caller.clone(),
            actor: actor.clone(),
            queued: ticket.wake.delivery_count,
            wake: ticket.wake.clone(),
            replies: 0,
        };
        let (outcome, diagnosis, spend, inbox) =
            match self.run_dispatched(&c.transfer, ctx, budget, self.lease_lost()).await {
                Ok(run) => {
                    drive.fuel_consumed += run.fuel_consumed;
                    (run.outcome, run.diagnosis, run.deferred_spend, run.inbox)
                }
                Err(e) => {
                    tracing::warn!(%agent, error = %e, "the turn could not run");
                    (RunOutcome::Stopped(e.to_string()), None, None, HeldInbox::default())
                }
            };
        if let RunOutcome::Cancelled(why) = &outcome {
            // The lease is no longer fresh: nothing more is recorded for this agent here (its
            // dispatched wake is settled by whichever host carries it next).
            tracing::warn!(%agent, %why, "turn cancelled: dropping the carrier");
            self.fence(c.clone());
            return Ok(Next::Idle);
        }
        if outcome != RunOutcome::Returned {
            drive.failure = Some(TurnFailure {
                outcome: outcome.clone(),
                diagnosis,
            });
        }
        if outcome == RunOutcome::Returned
            && self.finish(c, &ticket, DispatchOutcome::Accepted, spend, &inbox)? == DispatchOutcome::Accepted
        {
            drive.consumed += 1;
            return Ok(Next::Again);
        }
        drive.unknown += 1;
        if outcome != RunOutcome::Returned {
            tracing::info!(%agent, wake = %ticket.wake.id, ?outcome, "turn did not succeed: delivery unknown");
            // A turn that ended its transfer also detached its endpoint, which settled the
            // attempt as `delivery_unknown` already: the endpoint is then gone.
            self.finish(c, &ticket, DispatchOutcome::Unknown, None, &inbox)?;
        }
        let status = self.store.locked().transfer(&c.transfer).map(|t| t.status);
        match status {
            // Another turn, if there is a wake to claim: its end may have left one for the
            // deliveries it did not get to (`TurnEnd::rewoken`), or a post made one meanwhile.
            Ok(TransferStatus::Active) => Ok(Next::Again),
            Ok(status) => Err(Failure::Gone(format!("transfer {} is {status}", c.transfer))),
            Err(e) => Err(Failure::of_store(&e)),
        }
    }

    /// Records the end of a dispatched turn (one store transaction, retried in place), with the
    /// turn's last compute spend, the deliveries it consumed and the tries of those it read
    /// and left queued, and returns the outcome
    /// recorded. An accepted turn whose end cannot be recorded becomes `delivery_unknown`
    /// instead; if even that cannot be recorded, the agent's next opportunity settles it (see
    /// [`recovery`]) and the consumes are recorded on their own. A spend not recorded with
    /// either stays owed in the sandbox's meter, which charges it at its next settlement.
    fn finish(
        &self,
        c: &Carrier,
        ticket: &DispatchTicket,
        outcome: DispatchOutcome,
        spend: Option<DeferredSpend>,
        inbox: &HeldInbox,
    ) -> Result<DispatchOutcome, Failure> {
        let (caller, actor) = (&c.caller, &c.actor);
        let agent = &actor.agent;
        let turn_spend = spend.as_ref().map(|s| TurnSpend {
            transfer: c.transfer.clone(),
            micro_usd: s.micro_usd,
        });
        let end = |outcome| {
            let ended = retry(|| {
                self.store.locked().finish_turn_spending(
                    caller,
                    actor,
                    ticket,
                    outcome,
                    turn_spend.as_ref(),
                    inbox.as_turn_inbox(),
                )
            })?;
            if let Some(why) = &ended.spend_refused {
                tracing::warn!(%agent, transfer = %c.transfer, %why, "the turn's last compute spend was refused");
            }
            // Recorded by this commit, or by an earlier one of this same end whose answer was
            // lost (this call an exact retry): either way not owed any more.
            if let Some(spend) = &spend
                && (ended.spend.is_some() || ended.earlier_spend_micro_usd == Some(spend.micro_usd))
            {
                spend.clone().recorded();
            }
            Ok::<_, ConversationError>(())
        };
        let failure = match end(outcome) {
            Ok(()) => return Ok(outcome),
            Err(e) => Failure::of(&e),
        };
        if failure.is_gone() {
            return Err(failure);
        }
        tracing::warn!(%agent, wake = %ticket.wake.id, ?failure, "cannot record the end of the turn");
        if outcome == DispatchOutcome::Accepted {
            match end(DispatchOutcome::Unknown) {
                Ok(()) => {
                    tracing::info!(%agent, wake = %ticket.wake.id, "the turn's end is recorded as delivery unknown");
                    return Ok(DispatchOutcome::Unknown);
                }
                Err(e) if Failure::of(&e).is_gone() => return Err(Failure::of(&e)),
                Err(_) => {}
            }
        }
        // The turn said it handled these: not lost with its end (a no-op where they are in).
        if let Err(e) = retry(|| self.store.locked().consume_deliveries(caller, actor, &inbox.consumed)) {
            tracing::warn!(%agent, error = %e, "the turn's consumes are not recorded: its deliveries stay queued");
        }
        self.unsettled.locked().insert(agent.clone());
        Err(Failure::Transient(format!(
            "the end of wake {} is not recorded yet",
            ticket.wake.id
        )))
    }

    /// Settles the post-fence attempts of `c`'s endpoint no turn is running for: they become
    /// `delivery_unknown`. Returns whether there were any.
    fn settle(&self, c: &Carrier) -> Result<bool, Failure> {
        let settled = retry(|| self.store.locked().settle_unconfirmed_attempts(&c.caller, &c.actor))
            .map_err(|e| Failure::of(&e))?;
        self.unsettled.locked().remove(&c.actor.agent);
        for a in &settled {
            tracing::info!(agent = %c.actor.agent, wake = %a.wake_id, "settled an unrecorded turn as delivery unknown");
        }
        Ok(!settled.is_empty())
    }

    /// Schedules `agent` again after a transient failure, later by the backoff of
    /// [`recovery`]; past [`MAX_RESCHEDULES`](recovery::MAX_RESCHEDULES) in a row it is left
    /// to the reaper tick. The delay is a timer task: no worker waits, nothing is held.
    pub(super) fn reschedule_later(self: &Arc<Self>, agent: &str) {
        let n = {
            let mut retries = self.retries.locked();
            let n = retries.entry(agent.to_owned()).or_insert(0);
            *n += 1;
            *n
        };
        let Some(delay) = recovery::reschedule_delay(n) else {
            tracing::warn!(%agent, retries = n - 1, "still failing; leaving the agent to the next tick");
            self.retries.locked().remove(agent);
            return;
        };
        let me = self.clone();
        let agent = agent.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            me.schedule(&agent);
        });
    }
}
