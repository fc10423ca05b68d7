//! The writes of an activation's `resume`, held for the commit that ends the activation
//! ([`ahp_store::activation`]): its credential audit, its checkpoint, its spend and the
//! fuel the meter settles. An activation is then two commits, begin and end, instead of one
//! per write.
//!
//! **Durability.** A held write is recorded with the activation's end, or earlier, in one
//! commit ([`Journal::flush`]), before the guest reaches outside the sandbox: a tool call, a
//! model call, an HTTP request. Nothing else a resuming guest can do leaves the host
//! (conversations and delegation need a turn, which a `resume` is not), so a credential value
//! handed to the guest can have left only after its `credential_resolved` row is durable. A
//! host that dies mid-activation loses the held rows, and with them the guest that read the
//! value: the restart fails the activation (`fail_interrupted_activations`), and the spend of
//! a guest that never got to act is not charged.
//!
//! A set the store refuses as a whole (the transfer ended meanwhile) is recorded one write at a
//! time ([`record_one_by_one`]), as each would have been without the journal: audit events are
//! kept whatever the transfer's state.

use std::sync::Mutex;

use ahp_store::{ActivationWrite, ActivationWrites, EventKind, MAX_ACTIVATION_WRITES};
use serde_json::Value;

use crate::shared_store::{SharedStore, StoreLock};

/// A sandbox's holder of activation writes: holding only between [`hold`](Self::hold) and
/// [`take`](Self::take), i.e. during an activation's `resume`.
pub struct Journal {
    held: Mutex<Option<ActivationWrites>>,
    db: SharedStore,
    transfer: String,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("transfer", &self.transfer)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// A journal of `transfer`'s activation writes, not holding.
    pub fn new(db: SharedStore, transfer: String) -> Self {
        Self {
            held: Mutex::new(None),
            db,
            transfer,
        }
    }

    /// Starts holding writes (an activation's `resume` is about to run).
    pub fn hold(&self) {
        *self.held.locked() = Some(ActivationWrites::default());
    }

    /// Stops holding and hands out what is held, for the activation's end to record; `None`
    /// if it was not holding.
    pub fn take(&self) -> Option<ActivationWrites> {
        self.held.locked().take()
    }

    /// Whether writes are held now.
    pub fn holding(&self) -> bool {
        self.held.locked().is_some()
    }

    /// Applies `f` to the held writes if holding, first recording them when they reached the
    /// store's bound; `None` when not holding (the caller writes on its own).
    fn with<R>(&self, f: impl FnOnce(&mut ActivationWrites) -> R) -> Option<R> {
        let full = self
            .held
            .locked()
            .as_ref()
            .is_some_and(|w| w.writes.len() >= MAX_ACTIVATION_WRITES);
        if full && let Err(e) = self.flush() {
            tracing::error!(transfer = %self.transfer, error = %e, "could not record an activation's held writes");
        }
        self.held.locked().as_mut().map(f)
    }

    /// Holds an event the host observed; `false` when not holding.
    pub fn event(&self, kind: EventKind, detail: Value) -> bool {
        self.with(|w| w.writes.push(ActivationWrite::Event { kind, detail }))
            .is_some()
    }

    /// Holds `micro_usd` of spend of `kind`; `false` when not holding.
    pub fn spend(&self, kind: &str, micro_usd: u64) -> bool {
        self.with(|w| w.add_spend(kind, micro_usd)).is_some()
    }

    /// Holds `state` as the checkpoint, replacing one held before; gives it back when not
    /// holding.
    pub fn save(&self, state: Vec<u8>) -> Result<(), Vec<u8>> {
        match self.held.locked().as_mut() {
            Some(w) => {
                w.checkpoint = Some(state);
                Ok(())
            }
            None => Err(state),
        }
    }

    /// The checkpoint held, if one was saved while holding.
    pub fn checkpoint(&self) -> Option<Vec<u8>> {
        self.held.locked().as_ref().and_then(|w| w.checkpoint.clone())
    }

    /// Spend held and not yet recorded, micro-USD: what the budget the guest is shown must
    /// already count.
    pub fn held_spend(&self) -> u64 {
        self.held.locked().as_ref().map_or(0, ActivationWrites::spend_micro_usd)
    }

    /// Records what is held now in one commit and goes on holding (nothing when not holding or
    /// holding nothing). Called before the guest reaches outside the sandbox.
    ///
    /// # Errors
    ///
    /// When an audit event could not be recorded: the caller must not let the guest's call
    /// go out.
    pub fn flush(&self) -> Result<(), ahp_store::Error> {
        let writes = match self.held.locked().as_mut() {
            Some(w) if !w.is_empty() => std::mem::take(w),
            _ => return Ok(()),
        };
        let recorded = self.db.locked().record_activation_writes(&self.transfer, &writes);
        match recorded {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::warn!(transfer = %self.transfer, error = %e, "held activation writes refused together; recording them one by one");
                record_one_by_one(&self.db, &self.transfer, &writes).map(|_| ())
            }
        }
    }
}

/// Records `writes` one at a time, each as its own call would (events, spend, then the
/// checkpoint): for a set the store refused as a whole. Spend and a checkpoint the transfer
/// can no longer take are dropped with a log line, as their own calls would have been refused.
///
/// Returns whether the checkpoint, if any, was saved.
///
/// # Errors
///
/// The first audit event that could not be recorded.
pub fn record_one_by_one(
    db: &SharedStore,
    transfer: &str,
    writes: &ActivationWrites,
) -> Result<bool, ahp_store::Error> {
    let mut db = db.locked();
    let mut unaudited = None;
    for w in &writes.writes {
        match w {
            ActivationWrite::Event { kind, detail } => {
                if let Err(e) = db.record_event(transfer, *kind, detail.clone()) {
                    tracing::error!(transfer, error = %e, "could not audit an activation's event");
                    unaudited.get_or_insert(e);
                }
            }
            ActivationWrite::Spend { kind, micro_usd } => {
                if let Err(e) = db.report_usage(transfer, *micro_usd, kind) {
                    tracing::warn!(transfer, error = %e, "an activation's spend refused");
                }
            }
        }
    }
    let saved = match &writes.checkpoint {
        None => true,
        Some(state) => db
            .save_checkpoint(transfer, state)
            .inspect_err(|e| tracing::warn!(transfer, error = %e, "an activation's checkpoint refused"))
            .is_ok(),
    };
    unaudited.map_or(Ok(saved), Err)
}

impl crate::egress::Durable for Journal {
    fn flush(&self) -> Result<(), ahp_store::Error> {
        Journal::flush(self)
    }
}

#[cfg(test)]
mod tests {
    use ahp_store::{EventKind, Tier};

    use crate::interfaces::bindings::v0_3::ahp::agent::checkpoint::Host as _;
    use crate::interfaces::bindings::v0_3::ahp::agent::credentials::Host as _;
    use crate::interfaces::context::test_support::activating;
    use crate::shared_store::StoreLock;

    fn resolved(st: &crate::interfaces::AgentCtx) -> usize {
        let events = st.db.locked().get_status(&st.transfer).unwrap().events;
        events
            .iter()
            .filter(|e| e.kind == EventKind::CredentialResolved)
            .count()
    }

    #[test]
    fn held_writes_stay_out_of_the_database_until_flushed_and_land_once() {
        let (mut st, dir) = activating(Tier::Nano);
        std::fs::write(dir.path().join("vault/inventory-api"), b"sk").unwrap();
        st.journal.hold();
        assert_eq!(st.resolve("inventory-api".into()).unwrap().value, b"sk");
        st.save(b"memory".to_vec()).unwrap();
        assert_eq!(
            st.load().unwrap().unwrap(),
            b"memory",
            "a held save is what a load sees"
        );
        assert!(st.journal.spend("model_tokens", 7));
        assert_eq!(st.journal.held_spend(), 7);
        assert_eq!(resolved(&st), 0, "held, not yet written");
        assert!(st.db.locked().load_checkpoint(&st.transfer).unwrap().is_none());

        st.journal.flush().unwrap();
        assert_eq!(resolved(&st), 1);
        let budget = st.db.locked().budget(&st.transfer).unwrap().unwrap();
        assert_eq!(budget.spent_micro_usd, 7);
        assert_eq!(
            st.db.locked().load_checkpoint(&st.transfer).unwrap().unwrap().state,
            b"memory"
        );
        assert_eq!(st.journal.held_spend(), 0);
        // Flushed once: a second flush and the end record nothing again.
        st.journal.flush().unwrap();
        assert_eq!(resolved(&st), 1);
        let rest = st.journal.take().unwrap();
        assert!(rest.is_empty(), "{rest:?}");
        assert!(!st.journal.holding());
        // Not holding: writes go straight to the database, as in a turn.
        assert!(!st.journal.spend("model_tokens", 1));
        assert_eq!(st.resolve("inventory-api".into()).unwrap().value, b"sk");
        assert_eq!(resolved(&st), 2);
    }

    #[test]
    fn a_holder_at_the_store_s_bound_records_what_it_holds_first() {
        let (st, _dir) = activating(Tier::Nano);
        st.journal.hold();
        for _ in 0..ahp_store::MAX_ACTIVATION_WRITES + 1 {
            assert!(st.journal.event(EventKind::CredentialDenied, serde_json::json!({})));
        }
        let held = st.journal.take().unwrap();
        assert_eq!(
            held.writes.len(),
            1,
            "the first {} were recorded",
            ahp_store::MAX_ACTIVATION_WRITES
        );
        let events = st.db.locked().get_status(&st.transfer).unwrap().events;
        let denied = events.iter().filter(|e| e.kind == EventKind::CredentialDenied).count();
        assert_eq!(denied, ahp_store::MAX_ACTIVATION_WRITES);
    }

    #[test]
    fn a_set_the_store_refuses_together_is_recorded_one_by_one_and_its_audit_kept() {
        let (st, _dir) = activating(Tier::Nano);
        st.journal.hold();
        assert!(st.journal.event(
            EventKind::CredentialResolved,
            serde_json::json!({ "credRef": "inventory-api" })
        ));
        assert!(st.journal.spend("model_tokens", 3));
        // The transfer ends mid-activation: the set is refused as a whole, its audit is kept
        // and its spend refused, as each call would have been.
        st.db.locked().terminate(&st.transfer, "operator request").unwrap();
        st.journal.flush().unwrap();
        assert_eq!(resolved(&st), 1);
        assert_eq!(st.db.locked().budget(&st.transfer).unwrap().unwrap().spent_micro_usd, 0);
    }
}
