//! What a guest's `resume` writes during an activation, recorded with the activation's end.
//!
//! An activation is two commits: [`Store::begin_activation`] and its end. Between them the
//! guest audits its credential resolutions, saves its checkpoint and reports spend, and the
//! host meters its fuel. The host holds those writes ([`ActivationWrites`]) and records them in
//! the commit that ends the activation ([`Store::complete_activation_with`],
//! [`Store::fail_activation_with`]), in the order they happened. When the guest does
//! something that reaches outside the sandbox before its end (a tool call, a model call, an
//! HTTP request), the host records what it holds first, in one commit
//! ([`Store::record_activation_writes`]), so that no audited read is undone by a crash after
//! the value could have left.
//!
//! Each write is checked as its own call would check it (an event as
//! [`Store::record_event`], the checkpoint as [`Store::save_checkpoint`], spend as
//! [`Store::report_usage`]), all before anything is written: a refused set changes nothing.

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

    /// [`complete_activation`](Self::complete_activation) with the activation's `writes`
    /// recorded first, in the same commit: the spend they carry counts toward the check for
    /// insolvency at completion.
    ///
    /// # Errors
    ///
    /// As [`record_activation_writes`](Self::record_activation_writes) and
    /// `complete_activation`; on any error nothing is written.
    pub fn complete_activation_with(&mut self, transfer: &str, writes: &ActivationWrites) -> Result<Transfer> {
        transfer::check_id(transfer)?;
        writes.check()?;
        let host = self.host_id.clone();
        self.write_at(|tx, now| writes.complete_in(tx, transfer, &host, now))
    }

    /// [`complete_activation_with`](Self::complete_activation_with) and, when the completion
    /// leaves the transfer `active` (not `insolvent`), what the host does next in the same
    /// commit: [`bind_transfer_agent`](Self::bind_transfer_agent) with `lease` and, when
    /// `wake_carrier` (the guest takes turns), [`register_wake_carrier`](Self::register_wake_carrier)
    /// for the endpoint just attached. Returns the transfer and its binding (`None` when not
    /// `active`), whose endpoint is then wake-capable. An activation is then two commits in all.
    ///
    /// # Errors
    ///
    /// As `complete_activation_with` and `bind_transfer_agent`; on any error nothing is
    /// written (the caller may complete and bind in two steps).
    pub fn complete_activation_and_bind(
        &mut self,
        transfer: &str,
        writes: &ActivationWrites,
        lease: Duration,
        wake_carrier: bool,
    ) -> Result<(Transfer, Option<AgentBinding>)> {
        transfer::check_id(transfer)?;
        bounds::lease("lease", lease, MIN_ENDPOINT_LEASE, MAX_ENDPOINT_LEASE)?;
        writes.check()?;
        let host = self.host_id.clone();
        self.write_at(|tx, now| {
            let t = writes.complete_in(tx, transfer, &host, now)?;
            if t.status != TransferStatus::Active {
                return Ok((t, None));
            }
            let mut binding = binding::bind_in(tx, &host, transfer, lease, now)?;
            if wake_carrier {
                binding.endpoint = endpoint::mark_wake_capable(tx, &binding.endpoint.id, now)?;
            }
            Ok((transfer::load(tx, transfer)?, Some(binding)))
        })
    }

    /// [`fail_activation`](Self::fail_activation) with the activation's `writes` recorded
    /// first, in the same commit.
    ///
    /// # Errors
    ///
    /// As [`record_activation_writes`](Self::record_activation_writes) and `fail_activation`;
    /// on any error nothing is written.
    pub fn fail_activation_with(
        &mut self,
        transfer: &str,
        reason: &str,
        writes: &ActivationWrites,
    ) -> Result<Transfer> {
        validate_reason(reason)?;
        transfer::check_id(transfer)?;
        writes.check()?;
        let host = self.host_id.clone();
        self.write_at(|tx, now| {
            check(&transfer::load(tx, transfer)?, Operation::FailActivation)?;
            writes.apply(tx, transfer, &host, now)?;
            let t = transfer::load(tx, transfer)?;
            let to = check(&t, Operation::FailActivation)?;
            fail_activation_in(tx, &t, to, reason, now)?;
            transfer::load(tx, transfer)
        })
    }
}
