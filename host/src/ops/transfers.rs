//! The transfer operations of the Handoff Protocol, one method each, for every surface that
//! serves them (the MCP transfer tools; the CLI reads a status as the operator). Each passes
//! its caller to the store, which refuses another owner's transfer exactly as a missing one;
//! `provision` is authorized by its token instead. No operation here mints a token, terminates
//! a transfer or reports the host-reserved usage kind `compute` (the store refuses it).
//!
//! Activation is not a store call but a resume in a sandbox: it is the [`Host`]'s
//! ([`Host::activate_checked`]), which a surface calls off the async runtime.
//!
//! [`Host`]: crate::host::Host
//! [`Host::activate_checked`]: crate::host::Host::activate_checked

use ahp_store::{
    DEFAULT_USAGE_KIND, EventPage, Result, SnapshotInput, Tier, Transfer, TransferOwner, TransferStatusPage,
    UsageReport,
};

use super::Ops;

/// The transfer operations over a locked store ([`Ops::transfers`]).
pub struct Transfers<'a>(pub(super) Ops<'a>);

impl Transfers<'_> {
    /// `snapshot_state`: a new transfer (`staged`) from `input`, owned by `owner`.
    pub fn snapshot(&mut self, owner: &TransferOwner, input: &SnapshotInput) -> Result<Transfer> {
        self.0.store.snapshot_state_as(input, owner)
    }

    /// `provision_runtime`: the destination sized by `tier` with a budget of `budget_micro_usd`
    /// for `component`, authorized by the single-use `token`.
    pub fn provision(
        &mut self,
        transfer: &str,
        tier: Tier,
        budget_micro_usd: u64,
        component: &str,
        token: &str,
    ) -> Result<Transfer> {
        self.0
            .store
            .provision_runtime(transfer, tier, budget_micro_usd, component, token)
    }

    /// `push_state`: the snapshot staged for the destination, its checksum verified if given.
    pub fn push(&mut self, owner: &TransferOwner, transfer: &str, checksum: Option<&str>) -> Result<Transfer> {
        self.0.store.push_state_as(transfer, checksum, owner)
    }

    /// `report_usage`: spend of `kind` ([`DEFAULT_USAGE_KIND`] when none is named) added to the
    /// transfer's budget.
    pub fn report_usage(
        &mut self,
        owner: &TransferOwner,
        transfer: &str,
        micro_usd: u64,
        kind: Option<&str>,
    ) -> Result<UsageReport> {
        let kind = kind.unwrap_or(DEFAULT_USAGE_KIND);
        self.0.store.report_client_usage_as(transfer, micro_usd, kind, owner)
    }

    /// `get_status`: the transfer, its budget and one page of its audit log.
    pub fn status(&mut self, owner: &TransferOwner, transfer: &str, page: EventPage) -> Result<TransferStatusPage> {
        self.0.store.get_status_as(transfer, owner, page)
    }
}
