//! `activate`, the irreversible step: begin in the store, resume the guest at the destination,
//! then complete or fail in the store.
//!
//! The store records `activation_started` (consuming the token) before the guest runs, and
//! `active` only after the destination reports that the guest's `resume` returned Ok; any
//! failure records `activation_failed` with its reason and leaves the transfer `pushed` for a
//! retry with a fresh token. A caller must see `active` before it stops the source loop.

use ahp_store::{Store, Transfer};

use crate::Error;

/// Where a transfer's guest runs: the wasmtime sandbox in production.
pub trait Destination: Send + Sync {
    /// Resumes the guest of `transfer`, whose activation has begun. Returns Ok only when the
    /// guest's `resume` returned Ok; otherwise the reason, in words an operator can act on.
    ///
    /// # Errors
    ///
    /// The guest failed, trapped, broke a ceiling, or could not be started.
    fn resume(&self, store: &mut Store, transfer: &Transfer) -> Result<(), String>;
}

/// A host built without a sandbox: every resume fails, saying so. No transfer can become
/// `active` through it.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSandbox;

impl Destination for NoSandbox {
    fn resume(&self, _: &mut Store, transfer: &Transfer) -> Result<(), String> {
        Err(format!("this host has no sandbox to resume {} in", transfer.id))
    }
}

/// Activates `transfer` with `token`: begin, resume at `destination`, complete or fail.
///
/// # Errors
///
/// [`Error::Store`] if the store refuses (bad token, wrong state, …) — nothing changed then;
/// [`Error::ResumeFailed`] if the guest did not resume — `activation_failed` is recorded and the
/// token is spent.
pub fn activate(
    store: &mut Store,
    destination: &dyn Destination,
    transfer: &str,
    token: &str,
) -> Result<Transfer, Error> {
    let begun = store.begin_activation(transfer, token)?;
    match destination.resume(store, &begun) {
        Ok(()) => Ok(store.complete_activation(transfer)?),
        Err(reason) => {
            let reason = bounded(&reason);
            store.fail_activation(transfer, &reason)?;
            Err(Error::ResumeFailed {
                transfer: transfer.to_owned(),
                reason,
            })
        }
    }
}

/// Clips a reason to what the audit log accepts, on a character boundary.
fn bounded(reason: &str) -> String {
    let max = ahp_store::lifecycle::MAX_REASON_BYTES;
    let reason = if reason.trim().is_empty() {
        "resume failed without a reason"
    } else {
        reason
    };
    if reason.len() <= max {
        return reason.to_owned();
    }
    let mut end = max - 3;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &reason[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_store::*;

    struct Resumes(Result<(), String>);
    impl Destination for Resumes {
        fn resume(&self, _: &mut Store, _: &Transfer) -> Result<(), String> {
            self.0.clone()
        }
    }

    fn pushed(store: &mut Store, key: &TokenKey) -> String {
        let snap = SnapshotInput {
            source_host: "h".into(),
            system_prompt: String::new(),
            message_history: vec![],
            tool_state: serde_json::json!({}),
            mcp_config: vec![],
        };
        let t = store.snapshot_state(&snap).unwrap().id;
        let tok = issue_transfer_token(key, &t, TokenScope::ProvisionRuntime, store.now(), DEFAULT_TOKEN_TTL).unwrap();
        store
            .provision_runtime(&t, Tier::Nano, 100, "forecaster", &tok)
            .unwrap();
        store.push_state(&t, None).unwrap();
        t
    }

    #[test]
    fn active_only_when_the_guest_resumed() {
        let key = TokenKey::random();
        let mut store = Store::open_in_memory().unwrap().with_token_key(key.clone());
        let t = pushed(&mut store, &key);
        let tok = issue_transfer_token(&key, &t, TokenScope::Activate, store.now(), DEFAULT_TOKEN_TTL).unwrap();
        let err = activate(&mut store, &Resumes(Err("x".repeat(5000))), &t, &tok).unwrap_err();
        assert!(matches!(err, crate::Error::ResumeFailed { .. }));
        assert_eq!(
            store.transfer(&t).unwrap().phase(),
            Phase::settled(TransferStatus::Pushed)
        );
        let tok = issue_transfer_token(&key, &t, TokenScope::Activate, store.now(), DEFAULT_TOKEN_TTL).unwrap();
        let err = activate(&mut store, &NoSandbox, &t, &tok).unwrap_err();
        assert!(err.to_string().contains("no sandbox"), "{err}");
        let tok = issue_transfer_token(&key, &t, TokenScope::Activate, store.now(), DEFAULT_TOKEN_TTL).unwrap();
        let active = activate(&mut store, &Resumes(Ok(())), &t, &tok).unwrap();
        assert_eq!(active.status, TransferStatus::Active);
        let kinds: Vec<_> = store.get_status(&t).unwrap().events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds.iter().filter(|k| **k == EventKind::ActivationFailed).count(), 2);
        assert_eq!(kinds.last(), Some(&EventKind::Activated));
    }
}
