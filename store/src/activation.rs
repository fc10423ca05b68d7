//! How an activation ends, in one store call whatever it carries: [`Store::end_activation`].
//!
//! An activation is two commits: [`Store::begin_activation`] (which consumes the token) and its
//! end. Between them the guest audits its credential resolutions, saves its checkpoint and
//! reports spend, and the host meters its fuel. The host holds those writes
//! ([`ActivationWrites`]) and the end records them, in the order they happened, in the commit
//! that completes the activation — binding the transfer's agent in that same commit when asked
//! ([`ActivationEnd::Completed`]) — or fails it ([`ActivationEnd::Failed`]). When the guest does
//! something that reaches outside the sandbox before its end (a tool call, a model call, an
//! HTTP request), the host records what it holds first, in one commit
//! ([`Store::record_activation_writes`]), so that no audited read is undone by a crash after
//! the value could have left. (Activations a crashed host left in progress are failed at its
//! restart: [`Store::fail_interrupted_activations`].)
//!
//! Each write is checked as its own call would check it (an event as
//! [`Store::record_event`], the checkpoint as [`Store::save_checkpoint`], spend as
//! [`Store::report_usage`]), all before anything is written: a refused end changes nothing.

use std::time::Duration;

use serde_json::Value;

use crate::binding::{self, AgentBinding};
use crate::budget::MAX_USAGE_REPORT_MICRO_USD;
use crate::checkpoint;
use crate::clock::Timestamp;
use crate::conversation::bounds::{self, MAX_ENDPOINT_LEASE, MIN_ENDPOINT_LEASE};
use crate::conversation::endpoint;
use crate::db::Store;
use crate::error::{Error, Result};
use crate::event::{self, EventKind};
use crate::lifecycle::{complete_activation_in, fail_activation_in, validate_reason};
use crate::spend::{add_spend, validate_usage_kind};
use crate::state::{Operation, TransferStatus};
use crate::transfer::{self, Transfer, check};

use ahp_store_sql::Tx;

/// Most events and spends one [`ActivationWrites`] may carry. The host's per-turn bounds keep
/// an honest activation well below it (64 resolutions, 256 reports); a holder that reaches it
/// records what it holds and starts again.
pub const MAX_ACTIVATION_WRITES: usize = 1024;

/// One write an activation made, in the order it made it.
#[derive(Debug, Clone, PartialEq)]
pub enum ActivationWrite {
    /// An event the host observed (a credential resolution or denial), as
    /// [`Store::record_event`] records it.
    Event {
        /// Its kind: never a transition's.
        kind: EventKind,
        /// Its detail: a JSON object.
        detail: Value,
    },
    /// Spend, as [`Store::report_usage`] records it.
    Spend {
        /// The usage kind.
        kind: String,
        /// Micro-USD, 1 to [`MAX_USAGE_REPORT_MICRO_USD`].
        micro_usd: u64,
    },
}

/// The writes of an activation not yet recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActivationWrites {
    /// Events and spend, oldest first.
    pub writes: Vec<ActivationWrite>,
    /// The last checkpoint the guest saved, if it saved one (a save replaces the one before).
    pub checkpoint: Option<Vec<u8>>,
}

/// How an activation ends ([`Store::end_activation`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActivationEnd {
    /// The guest resumed: the activation completes, its agent bound in the same commit with
    /// `bind` (when the transfer is then `active`).
    Completed {
        /// The binding to make with the completion, if any.
        bind: Option<Bind>,
    },
    /// The guest did not resume (it returned an error, trapped, broke a ceiling, or its
    /// sandbox could not be set up).
    Failed {
        /// Why, recorded in `activation_failed` (1 to 1024 bytes).
        reason: String,
    },
}

impl ActivationEnd {
    /// Completed, and the agent bound with a host-held endpoint of `lease`, wake-capable when
    /// `wake_carrier`.
    pub fn bound(lease: Duration, wake_carrier: bool) -> Self {
        Self::Completed {
            bind: Some(Bind { lease, wake_carrier }),
        }
    }
}

/// The binding an activation completes with: the host-held endpoint's lease, and whether the
/// guest takes turns (its endpoint is then registered as this host's wake carrier).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bind {
    /// The endpoint's lease.
    pub lease: Duration,
    /// Whether the endpoint becomes wake-capable.
    pub wake_carrier: bool,
}

impl ActivationWrites {
    /// Whether there is nothing to record.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.checkpoint.is_none()
    }

    /// Spend held, micro-USD.
    pub fn spend_micro_usd(&self) -> u64 {
        self.writes
            .iter()
            .map(|w| match w {
                ActivationWrite::Spend { micro_usd, .. } => *micro_usd,
                ActivationWrite::Event { .. } => 0,
            })
            .fold(0, u64::saturating_add)
    }

    /// Adds `micro_usd` of spend of `kind`: to the last write when that is spend of the same
    /// kind and the sum still fits one report (a meter settling at every tick makes one write,
    /// not hundreds), else as a new write.
    pub fn add_spend(&mut self, kind: &str, micro_usd: u64) {
        if let Some(ActivationWrite::Spend { kind: k, micro_usd: m }) = self.writes.last_mut()
            && k == kind
            && m.saturating_add(micro_usd) <= MAX_USAGE_REPORT_MICRO_USD
        {
            *m += micro_usd;
            return;
        }
        self.writes.push(ActivationWrite::Spend {
            kind: kind.to_owned(),
            micro_usd,
        });
    }

    /// Checks every write as its own call would, before anything is written.
    fn check(&self) -> Result<()> {
        if self.writes.len() > MAX_ACTIVATION_WRITES {
            return Err(Error::invalid(
                "writes",
                format!("{} writes; at most {MAX_ACTIVATION_WRITES}", self.writes.len()),
            ));
        }
        for w in &self.writes {
            match w {
                ActivationWrite::Event { kind, detail } => event::check_observation(*kind, detail)?,
                ActivationWrite::Spend { kind, micro_usd } => {
                    if *micro_usd == 0 || *micro_usd > MAX_USAGE_REPORT_MICRO_USD {
                        return Err(Error::invalid(
                            "amountMicroUsd",
                            format!("must be 1 to {MAX_USAGE_REPORT_MICRO_USD}"),
                        ));
                    }
                    validate_usage_kind(kind)?;
                }
            }
        }
        Ok(())
    }

    /// Records every write in `tx` and then completes the activation of `transfer` (refused,
    /// before anything is written, unless one is in progress).
    fn complete_in(&self, tx: &Tx<'_>, transfer: &str, host: &str, now: Timestamp) -> Result<Transfer> {
        let t = transfer::load(tx, transfer)?;
        check(
            &t,
            Operation::CompleteActivation {
                budget_exhausted: false,
            },
        )?;
        self.apply(tx, transfer, host, now)?;
        complete_activation_in(tx, transfer, now)
    }

    /// Records every write in `tx`, in order, the checkpoint last.
    fn apply(&self, tx: &Tx<'_>, transfer: &str, host: &str, now: Timestamp) -> Result<()> {
        for w in &self.writes {
            match w {
                ActivationWrite::Event { kind, detail } => event::append(tx, transfer, *kind, now, detail.clone())?,
                ActivationWrite::Spend { kind, micro_usd } => {
                    // Each spend moves the row (its `updated_at`): read it again.
                    let t = transfer::load(tx, transfer)?;
                    add_spend(tx, &t, *micro_usd, kind, now)?;
                }
            }
        }
        if let Some(state) = &self.checkpoint {
            let t = transfer::load(tx, transfer)?;
            checkpoint::check_size(&t, state)?;
            checkpoint::put(tx, transfer, host, state, now)?;
        }
        Ok(())
    }
}

impl Store {
    /// Records `writes` of the activation in progress of `transfer`, in one commit, without
    /// ending it: what the host holds, recorded before the guest reaches outside the sandbox.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a write its own call would refuse (nothing is written);
    /// [`Error::InvalidTransition`] unless an activation of `transfer` is in progress;
    /// [`Error::CarriedElsewhere`] for a checkpoint of a transfer another host carries now.
    pub fn record_activation_writes(&mut self, transfer: &str, writes: &ActivationWrites) -> Result<()> {
        transfer::check_id(transfer)?;
        writes.check()?;
        let host = self.host_id.clone();
        self.write_at(|tx, now| {
            // Only an activation in progress can end (fail) now: that is the check wanted.
            check(&transfer::load(tx, transfer)?, Operation::FailActivation)?;
            writes.apply(tx, transfer, &host, now)
        })
    }

    /// Ends the activation in progress of `transfer` in one commit, whatever it carries: the
    /// `writes` its `resume` held are recorded first, in order (the spend they carry counts
    /// toward the check for insolvency at completion), then the activation ends as `end` says:
    ///
    /// - [`ActivationEnd::Completed`]: the transfer is `active` — or `insolvent` at once when
    ///   the activation's spend reached the allocation (events `activated` then `insolvent`) —
    ///   and, with a [`Bind`] and an `active` transfer, its agent is bound in the same commit
    ///   ([`bind_transfer_agent`](Self::bind_transfer_agent) with the bind's lease, and its
    ///   endpoint made wake-capable when the guest takes turns). Returns the binding, `None`
    ///   without a bind or when the transfer is not `active`.
    /// - [`ActivationEnd::Failed`]: `activation_failed` with the reason, and the transfer is
    ///   `pushed` again, ready for a retry with a new token.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a write its own call would refuse, an empty or over-long
    /// reason or a lease out of bounds; [`Error::InvalidTransition`] unless an activation of
    /// `transfer` is in progress (it may have been terminated or expired meanwhile);
    /// [`Error::CarriedElsewhere`] for a checkpoint of a transfer another host carries now; the
    /// binding's refusals. On any error nothing is written: the caller may end it again without
    /// the bind, or with the writes recorded one by one.
    pub fn end_activation(
        &mut self,
        transfer: &str,
        end: &ActivationEnd,
        writes: &ActivationWrites,
    ) -> Result<(Transfer, Option<AgentBinding>)> {
        transfer::check_id(transfer)?;
        match end {
            ActivationEnd::Completed { bind: Some(b) } => {
                bounds::lease("lease", b.lease, MIN_ENDPOINT_LEASE, MAX_ENDPOINT_LEASE)?;
            }
            ActivationEnd::Completed { bind: None } => {}
            ActivationEnd::Failed { reason } => validate_reason(reason)?,
        }
        writes.check()?;
        let host = self.host_id.clone();
        self.write_at(|tx, now| match end {
            ActivationEnd::Completed { bind } => {
                let t = writes.complete_in(tx, transfer, &host, now)?;
                let Some(b) = bind.filter(|_| t.status == TransferStatus::Active) else {
                    return Ok((t, None));
                };
                let mut binding = binding::bind_in(tx, &host, transfer, b.lease, now)?;
                if b.wake_carrier {
                    binding.endpoint = endpoint::mark_wake_capable(tx, &binding.endpoint.id, now)?;
                }
                Ok((transfer::load(tx, transfer)?, Some(binding)))
            }
            ActivationEnd::Failed { reason } => {
                check(&transfer::load(tx, transfer)?, Operation::FailActivation)?;
                writes.apply(tx, transfer, &host, now)?;
                let t = transfer::load(tx, transfer)?;
                let to = check(&t, Operation::FailActivation)?;
                fail_activation_in(tx, &t, to, reason, now)?;
                Ok((transfer::load(tx, transfer)?, None))
            }
        })
    }

    /// Test shortcut: [`end_activation`](Self::end_activation) completed, with nothing held and
    /// no bind.
    ///
    /// # Errors
    ///
    /// As `end_activation`.
    #[cfg(any(test, feature = "testing"))]
    pub fn complete_activation(&mut self, transfer: &str) -> Result<Transfer> {
        let end = ActivationEnd::Completed { bind: None };
        Ok(self.end_activation(transfer, &end, &ActivationWrites::default())?.0)
    }

    /// Test shortcut: [`end_activation`](Self::end_activation) failed for `reason`, with
    /// nothing held.
    ///
    /// # Errors
    ///
    /// As `end_activation`.
    #[cfg(any(test, feature = "testing"))]
    pub fn fail_activation(&mut self, transfer: &str, reason: &str) -> Result<Transfer> {
        let end = ActivationEnd::Failed {
            reason: reason.to_owned(),
        };
        Ok(self.end_activation(transfer, &end, &ActivationWrites::default())?.0)
    }
}
