//! `activate`, the irreversible step, from token to live agent: the store begins the
//! activation (consuming the token), a fresh sandbox resumes the guest under its tier's
//! ceilings, and the store completes the activation only if the guest resumed — otherwise it
//! fails it with the reason, the transfer is back in `pushed` and a retry needs a fresh token.
//!
//! A resumed sandbox is kept live for the agent's later turns, and the caller ([`Host`]) then
//! binds the transfer to its agent (see `agents`); if that bind fails, the host drops the
//! sandbox and the reaper tick's repair binds the transfer later (nothing here is undone: the
//! transfer stays `active`). The sandbox itself ([`Sandboxes::run`]) knows nothing of this
//! lifecycle.
//!
//! [`Host`]: crate::host::Host

use crate::sandbox::{self, Call, RunReport, Sandboxes, bounded};
use crate::shared_store::{SharedStore, StoreLock};

/// Begins the activation of `transfer` with `token` in `store`, resumes its guest in a fresh
/// sandbox of `sandboxes` and completes or fails the activation. A guest failure is not an `Err`: it is reported in
/// [`RunReport::outcome`], with the transfer back in `pushed`.
///
/// # Errors
///
/// [`sandbox::Error::Store`] if `begin_activation` refuses (token, state; nothing changed);
/// after it, setup failures ([`sandbox::Error::UnknownComponent`],
/// [`sandbox::Error::InvalidComponent`], …) are recorded with `fail_activation` and returned.
pub fn activate(
    store: &SharedStore,
    sandboxes: &Sandboxes,
    transfer: &str,
    token: &str,
) -> Result<RunReport, sandbox::Error> {
    let t = store.locked().begin_activation(transfer, token)?;
    let mut sandbox = match sandboxes.prepare(&t) {
        Ok(s) => s,
        Err(e) => {
            store
                .locked()
                .fail_activation(transfer, &bounded(&format!("sandbox setup failed: {e}")))?;
            return Err(e);
        }
    };
    let run = sandboxes.run(&mut sandbox, Call::Resume);
    let t = match run.outcome.failure_reason() {
        None => store.locked().complete_activation(transfer),
        Some(reason) => store.locked().fail_activation(transfer, &bounded(&reason)),
    };
    // Err: the transfer moved under us (terminated or expired mid-activation).
    let report = run.report(t?);
    if report.outcome.failure_reason().is_none() {
        sandboxes.keep(sandbox);
    }
    Ok(report)
}
