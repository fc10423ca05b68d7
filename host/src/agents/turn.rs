//! One later turn of a transfer's sandbox, and what its outcome means for the transfer.
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
//!   `sandbox stopped: <what happened>`. A transfer that already left `active` is left as it is
//!   (`insolvent` when the turn spent the last of the budget; the reaper ends it after its
//!   grace). The check and the `terminate` happen under the database lock.

use ahp_store::{Transfer, TransferStatus};

use crate::sandbox::{self, Call, Sandboxes, TurnOutcome, TurnReport, bounded};

/// Runs one later turn of `transfer`'s sandbox (see the [module docs](self)).
///
/// # Errors
///
/// [`sandbox::Error::NoSandbox`] for a repeated `resume` without a live sandbox (or one whose
/// turn is running); [`sandbox::Error::NoTurns`] for a conversation turn of a 0.1.0 component;
/// the setup errors of [`Sandboxes::prepare`]; [`sandbox::Error::Store`] if the transfer can no
/// longer be read or terminated.
pub fn run_turn(sandboxes: &Sandboxes, transfer: &str, call: Call) -> Result<TurnReport, sandbox::Error> {
    let conversation = matches!(call, Call::Turn(_));
    let mut sandbox = match sandboxes.take(transfer) {
        Some(s) => s,
        None if conversation => {
            let t = sandboxes.db().transfer(transfer)?;
            sandboxes.prepare(&t)?
        }
        None => return Err(sandbox::Error::NoSandbox(transfer.to_owned())),
    };
    if conversation && !sandbox.takes_turns() {
        sandboxes.keep(sandbox);
        return Err(sandbox::Error::NoTurns(transfer.to_owned()));
    }
    let run = sandboxes.run(&mut sandbox, call);
    let keep = match &run.outcome {
        TurnOutcome::Resumed => true,
        TurnOutcome::ResumeFailed(_) => conversation,
        _ => false,
    };
    if keep {
        let t = sandboxes.db().transfer(transfer)?;
        sandboxes.keep(sandbox);
        return Ok(run.report(t));
    }
    let reason = run.outcome.failure_reason().unwrap_or_default();
    tracing::info!(%transfer, outcome = ?run.outcome, "dropping sandbox");
    drop(sandbox);
    let t = end_with_sandbox(sandboxes, transfer, &reason)?;
    Ok(run.report(t))
}

/// After a turn dropped the sandbox of `transfer`: terminates the transfer with
/// `sandbox stopped: <reason>` if it is still `active`, and returns it as it then stands.
fn end_with_sandbox(sandboxes: &Sandboxes, transfer: &str, reason: &str) -> Result<Transfer, sandbox::Error> {
    // One lock over the read and the terminate: no other writer of this host can make the
    // transfer insolvent (or end it) in between.
    let mut db = sandboxes.db();
    let t = db.transfer(transfer)?;
    if t.status != TransferStatus::Active {
        return Ok(t);
    }
    match db.terminate(transfer, &bounded(&format!("sandbox stopped: {reason}"))) {
        Ok(t) => Ok(t),
        // Another process (`ahp transfer terminate`) ended it meanwhile.
        Err(ahp_store::Error::InvalidTransition { .. }) => Ok(db.transfer(transfer)?),
        Err(e) => Err(e.into()),
    }
}
