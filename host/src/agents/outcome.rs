//! One later run of a transfer's sandbox — a conversation turn, or (for tests and the
//! benches) a repeated `resume` — and what its outcome means for the transfer.
//!
//! The sandbox is taken out of the live map for the turn (so no lock is held while guest code
//! runs, and a second concurrent turn of the same transfer finds none), or set up fresh for a
//! conversation turn after a host restart (the agent resumes from its checkpoint). After the
//! turn:
//!
//! - it resumed (`ok`) → the sandbox is kept live;
//! - a conversation turn returned `err` → the sandbox is kept live too (the guest chose to
//!   fail this wake; the controller records `delivery_unknown`);
//! - otherwise — a repeated `resume` that failed, a trap, a broken ceiling, the budget spent —
//!   the sandbox is dropped and the transfer, if still `active`, is terminated with the reason
//!   `sandbox stopped: <what happened>`, once the consumes the turn held are recorded. A transfer that already left `active` is left as it is
//!   (`insolvent` when the turn spent the last of the budget; the reaper ends it after its
//!   grace). The check and the `terminate` are one transaction.
//!
//! A sandbox released while its turn ran ([`Sandboxes::drop_sandbox`], e.g. by the carrier
//! sweep or a release of its agent) is dropped when the turn ends rather than kept: see
//! [`Sandboxes::keep`].

use ahp_store::Transfer;

use super::Agents;
use super::recovery::retry;
use crate::interfaces::TurnCtx;
#[cfg(doc)]
use crate::sandbox::Sandboxes;
use crate::sandbox::{self, Call, Run, RunOutcome, RunReport, Sandbox, bounded};
use crate::shared_store::StoreLock;

/// The turn itself: its run, and — when the sandbox was dropped — the transfer as
/// [`Agents::end_with_sandbox`] left it (or why it could not).
type Ran = (Run, Option<Result<Transfer, sandbox::Error>>);

impl Agents {
    /// Runs one later turn of `transfer`'s sandbox (see the [module docs](self)).
    ///
    /// # Errors
    ///
    /// [`sandbox::Error::NoSandbox`] for a repeated `resume` without a live sandbox (or one whose
    /// turn is running); [`sandbox::Error::NoTurns`] for a conversation turn of a 0.1.0 component;
    /// the setup errors of [`Sandboxes::prepare`]; [`sandbox::Error::Store`] if the transfer can no
    /// longer be read or terminated.
    pub fn run_call(&self, transfer: &str, call: Call) -> Result<RunReport, sandbox::Error> {
        let (run, ended) =
            wasmtime_wasi::runtime::in_tokio(self.run_in_sandbox(transfer, call, None, std::future::pending()))?;
        let t = match ended {
            Some(t) => t?,
            None => self.store.locked().transfer(transfer)?,
        };
        Ok(run.report(t))
    }

    /// Runs the conversation turn `ctx` of `transfer` for the controller, which read the budget
    /// (`budget_read`, remaining micro-USD) before crossing the wake's dispatch fence (see
    /// [`Sandbox::read_budget_before`]). Once the guest ran, its run is returned whatever happened
    /// to the bookkeeping after it (a transfer that could not be terminated is logged: its next
    /// turn meets the same ceiling). `stop` cuts the turn short (see [`Sandboxes::run_async`]).
    ///
    /// # Errors
    ///
    /// As [`run_call`](Self::run_call), for a turn that could not start.
    pub(crate) async fn run_dispatched(
        &self,
        transfer: &str,
        ctx: TurnCtx,
        budget_read: u64,
        stop: impl std::future::Future<Output = String>,
    ) -> Result<Run, sandbox::Error> {
        let (run, ended) = self
            .run_in_sandbox(transfer, Call::Turn(Box::new(ctx)), Some(budget_read), stop)
            .await?;
        if let Some(Err(e)) = ended {
            tracing::error!(%transfer, error = %e, "the sandbox stopped, but its transfer could not be ended");
        }
        Ok(run)
    }

    async fn run_in_sandbox(
        &self,
        transfer: &str,
        call: Call,
        budget_read: Option<u64>,
        stop: impl std::future::Future<Output = String>,
    ) -> Result<Ran, sandbox::Error> {
        let sandboxes = &self.sandboxes;
        let conversation = matches!(call, Call::Turn(_));
        let mut sandbox = match sandboxes.take(transfer) {
            Some(s) => s,
            None if conversation => self.fresh(transfer)?,
            None => return Err(sandbox::Error::NoSandbox(transfer.to_owned())),
        };
        if conversation && !sandbox.takes_turns() {
            sandboxes.keep(sandbox);
            return Err(sandbox::Error::NoTurns(transfer.to_owned()));
        }
        if let Some(remaining) = budget_read {
            // A dispatched turn: its end is recorded by the controller, with its last spend.
            sandbox.read_budget_before(remaining);
            sandbox.defer_last_settlement();
        }
        // Whom a turn acts as: to record its consumes before its transfer ends (below).
        let acting = match &call {
            Call::Turn(t) => Some((t.caller.clone(), t.actor.clone())),
            Call::Resume => None,
        };
        let out = OutForRun {
            sandboxes,
            transfer,
            armed: true,
        };
        let mut run = sandboxes.run_async(&mut sandbox, call, stop).await;
        out.disarm();
        let keep = match &run.outcome {
            RunOutcome::Returned => true,
            RunOutcome::GuestError(_) => conversation,
            _ => false,
        };
        if keep {
            sandboxes.keep(sandbox);
            return Ok((run, None));
        }
        if let RunOutcome::Cancelled(why) = &run.outcome {
            // This host may no longer act for the agent: nothing more is written for it here.
            tracing::warn!(%transfer, %why, "turn cancelled; dropping its sandbox");
            drop(sandbox);
            sandboxes.end_run(transfer);
            return Ok((run, None));
        }
        // Ending the transfer detaches the agent's endpoint, after which the turn's end (which
        // records the consumes it held) is refused: the guest said it handled them, so they are
        // recorded first.
        if let Some((caller, actor)) = acting.filter(|_| !run.inbox.consumed.is_empty()) {
            match retry(|| {
                self.store
                    .locked()
                    .consume_deliveries(&caller, &actor, &run.inbox.consumed)
            }) {
                Ok(_) => run.inbox.consumed.clear(),
                Err(e) => tracing::warn!(%transfer, error = %e, "a stopped turn's consumes are not recorded"),
            }
        }
        let reason = run.outcome.failure_reason().unwrap_or_default();
        tracing::info!(%transfer, outcome = ?run.outcome, "dropping sandbox");
        drop(sandbox);
        sandboxes.end_run(transfer);
        let ended = self.end_with_sandbox(transfer, &reason);
        Ok((run, Some(ended)))
    }

    /// A sandbox set up fresh for a conversation turn of `transfer` (none is live: a host restart,
    /// or a sandbox dropped by a failed binding), marked as out for its turn.
    fn fresh(&self, transfer: &str) -> Result<Sandbox, sandbox::Error> {
        let sandboxes = &self.sandboxes;
        if !sandboxes.reserve(transfer) {
            // Another turn of it is running.
            return Err(sandbox::Error::NoSandbox(transfer.to_owned()));
        }
        // The transfer is read in a statement of its own: `prepare` takes the database lock too.
        let read = self.store.locked().transfer(transfer);
        let prepared = read.map_err(sandbox::Error::from).and_then(|t| sandboxes.prepare(&t));
        if prepared.is_err() {
            sandboxes.end_run(transfer);
        }
        prepared
    }

    /// After a turn dropped the sandbox of `transfer`: terminates the transfer with
    /// `sandbox stopped: <reason>` if it is still `active`, and returns it as it then stands.
    fn end_with_sandbox(&self, transfer: &str, reason: &str) -> Result<Transfer, sandbox::Error> {
        // One transaction over the check and the terminate: a writer that made the transfer
        // insolvent (or ended it) meanwhile is left alone.
        let reason = bounded(&format!("sandbox stopped: {reason}"));
        Ok(self.store.locked().terminate_if_active(transfer, &reason)?)
    }
}

/// A sandbox out for a turn whose future may be dropped mid-run (the controller's task aborted
/// at shutdown): dropped armed, it ends the run, so a later turn of the transfer can set up a
/// sandbox again (the sandbox itself is dropped with the future).
struct OutForRun<'a> {
    sandboxes: &'a sandbox::Sandboxes,
    transfer: &'a str,
    armed: bool,
}

impl OutForRun<'_> {
    /// The run ended: its caller keeps or ends it.
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for OutForRun<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.sandboxes.end_run(self.transfer);
        }
    }
}
