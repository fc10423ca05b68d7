//! `activate`, the irreversible step, as the MCP tool and the CLI see it: the sandbox begins
//! the activation in the store (consuming the token), resumes the guest, and completes or fails
//! the activation. This function turns a guest that did not resume into an error a caller can
//! act on; the transfer is then back in `pushed` and a retry needs a fresh token.

use ahp_store::Transfer;

use crate::Error;
use crate::sandbox::Sandboxes;

/// Activates `transfer` with `token` in `sandboxes`. Returns the transfer, `active`, only when
/// the guest's `resume` returned Ok.
///
/// # Errors
///
/// [`Error::Sandbox`] if the store refused (bad token, wrong state — nothing changed) or the
/// sandbox could not be set up; [`Error::ResumeFailed`] if the guest failed, trapped, broke a
/// ceiling or ran out of budget (`activation_failed` is recorded, the token is spent).
pub fn activate(sandboxes: &Sandboxes, transfer: &str, token: &str) -> Result<Transfer, Error> {
    let report = sandboxes.activate(transfer, token)?;
    match report.outcome.failure_reason() {
        None => Ok(report.transfer),
        Some(reason) => Err(Error::ResumeFailed {
            transfer: transfer.to_owned(),
            reason,
        }),
    }
}
