//! The transfer state machine, as data and one pure function.
//!
//! `staged → provisioned → pushed → active → insolvent → terminated`, plus
//! `staged|provisioned|pushed → expired` past the TTL and an explicit `terminate` from any live
//! state. Binding a transfer's agent ([`Operation::BindAgent`]) is allowed only while `active`
//! and changes no status. Activation happens in two steps because the sandbox runs the guest between them, so a
//! `pushed` transfer carries one more bit: whether an activation is in progress ([`Phase`]).
//!
//! [`transition`] is the only place the allowed edges are written down; every store operation
//! asks it before writing, and the tests walk it over every (phase, operation) pair.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where a transfer is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferStatus {
    /// Snapshot captured, no destination yet.
    Staged,
    /// Destination sized by a tier and budgeted; no data moved.
    Provisioned,
    /// Snapshot staged for the destination (an activation may be in progress).
    Pushed,
    /// The destination's guest confirmed it resumed from the snapshot.
    Active,
    /// Spend reached the allocated budget; the grace period is running.
    Insolvent,
    /// Torn down, after insolvency or for an explicit reason. Terminal.
    Terminated,
    /// Never activated within the TTL. Terminal.
    Expired,
}

impl TransferStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [TransferStatus; 7] = [
        Self::Staged,
        Self::Provisioned,
        Self::Pushed,
        Self::Active,
        Self::Insolvent,
        Self::Terminated,
        Self::Expired,
    ];

    /// The name stored in the database and shown to users.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Staged => "staged",
            Self::Provisioned => "provisioned",
            Self::Pushed => "pushed",
            Self::Active => "active",
            Self::Insolvent => "insolvent",
            Self::Terminated => "terminated",
            Self::Expired => "expired",
        }
    }

    /// Whether no operation can ever change this transfer again.
    pub const fn is_terminal(self) -> bool {
        matches!(self, Self::Terminated | Self::Expired)
    }
}

impl fmt::Display for TransferStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unrecognised status string (for example a row written by a newer build).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown transfer status {0:?}")]
pub struct UnknownStatus(pub String);

impl FromStr for TransferStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_owned()))
    }
}

/// A transfer's status plus whether an activation is in progress (only ever true when `pushed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    /// The stored status.
    pub status: TransferStatus,
    /// `begin_activation` succeeded and `end_activation` has not run.
    pub activating: bool,
}

impl Phase {
    /// A phase with no activation in progress.
    pub const fn settled(status: TransferStatus) -> Self {
        Self {
            status,
            activating: false,
        }
    }

    /// Every phase a transfer can be in.
    pub const ALL: [Phase; 8] = [
        Self::settled(TransferStatus::Staged),
        Self::settled(TransferStatus::Provisioned),
        Self::settled(TransferStatus::Pushed),
        Phase {
            status: TransferStatus::Pushed,
            activating: true,
        },
        Self::settled(TransferStatus::Active),
        Self::settled(TransferStatus::Insolvent),
        Self::settled(TransferStatus::Terminated),
        Self::settled(TransferStatus::Expired),
    ];
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.activating {
            write!(f, "{} (activation in progress)", self.status)
        } else {
            write!(f, "{}", self.status)
        }
    }
}

/// Something that may move a transfer between phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `provision_runtime`: size and budget a destination.
    Provision,
    /// `push_state`: stage the snapshot for the destination.
    Push,
    /// First half of `activate`: consume the token, mark the activation as started.
    BeginActivation,
    /// Second half of `activate`: the guest's `resume` returned Ok. `budget_exhausted` says
    /// whether spend recorded during the activation already reached the allocation.
    CompleteActivation {
        /// Spent ≥ allocated when the activation completes.
        budget_exhausted: bool,
    },
    /// The guest's `resume` failed, trapped or broke a ceiling.
    FailActivation,
    /// `report_usage`; `exhausts_budget` says whether spend reaches the allocation with it.
    ReportUsage {
        /// Spent ≥ allocated once this report is added.
        exhausts_budget: bool,
    },
    /// An explicit `terminate` by an operator (never an MCP tool).
    Terminate,
    /// The insolvency reaper: grace period over.
    ReapInsolvent,
    /// The expiry reaper: never activated within the TTL.
    Expire,
    /// The host binds the transfer to its Agent identity and attaches the agent's endpoint
    /// (first activation, and every re-bind after a host restart). Changes no status.
    BindAgent,
}

impl Operation {
    /// Every operation, for exhaustive tests.
    pub const ALL: [Operation; 12] = [
        Self::Provision,
        Self::Push,
        Self::BeginActivation,
        Self::CompleteActivation {
            budget_exhausted: false,
        },
        Self::CompleteActivation { budget_exhausted: true },
        Self::FailActivation,
        Self::ReportUsage { exhausts_budget: false },
        Self::ReportUsage { exhausts_budget: true },
        Self::Terminate,
        Self::ReapInsolvent,
        Self::Expire,
        Self::BindAgent,
    ];

    /// The operation's user-facing name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Provision => "provision_runtime",
            Self::Push => "push_state",
            Self::BeginActivation => "activate",
            Self::CompleteActivation { .. } => "complete_activation",
            Self::FailActivation => "fail_activation",
            Self::ReportUsage { .. } => "report_usage",
            Self::Terminate => "terminate",
            Self::ReapInsolvent => "reap_insolvent",
            Self::Expire => "expire",
            Self::BindAgent => "bind_agent",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why [`transition`] refused an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The operation has no edge out of this phase.
    NotAllowed,
    /// `activate` while another activation of the same transfer is in progress.
    ActivationInProgress,
}

/// The phase a transfer moves to when `op` is applied in `from`, or why it cannot be.
///
/// Usage reported while an activation is in progress is recorded but does not change the
/// status; if it reached the allocation, the activation completes straight into `insolvent`
/// (the guest did resume, but nothing is left to run it on, so the grace period starts at
/// once). A guest that exhausts its budget *burning fuel* during `resume` is stopped by the
/// sandbox, which then ends the activation as failed.
pub fn transition(from: Phase, op: Operation) -> Result<Phase, Refusal> {
    use Operation as O;
    use TransferStatus as S;
    let to = |status| Ok(Phase::settled(status));
    match (from.status, from.activating, op) {
        (S::Staged, false, O::Provision) => to(S::Provisioned),
        (S::Provisioned, false, O::Push) => to(S::Pushed),
        (S::Pushed, false, O::BeginActivation) => Ok(Phase {
            status: S::Pushed,
            activating: true,
        }),
        (S::Pushed, true, O::BeginActivation) => Err(Refusal::ActivationInProgress),
        (
            S::Pushed,
            true,
            O::CompleteActivation {
                budget_exhausted: false,
            },
        ) => to(S::Active),
        (S::Pushed, true, O::CompleteActivation { budget_exhausted: true }) => to(S::Insolvent),
        (S::Pushed, true, O::FailActivation) => to(S::Pushed),
        (S::Pushed, true, O::ReportUsage { .. }) => Ok(from),
        (S::Active, false, O::ReportUsage { exhausts_budget: false }) => to(S::Active),
        (S::Active, false, O::ReportUsage { exhausts_budget: true }) => to(S::Insolvent),
        (S::Insolvent, false, O::ReportUsage { .. }) => to(S::Insolvent),
        (S::Insolvent, false, O::ReapInsolvent) => to(S::Terminated),
        (S::Active, false, O::BindAgent) => to(S::Active),
        (S::Staged | S::Provisioned | S::Pushed, _, O::Expire) => to(S::Expired),
        (S::Staged | S::Provisioned | S::Pushed | S::Active | S::Insolvent, _, O::Terminate) => to(S::Terminated),
        _ => Err(Refusal::NotAllowed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_round_trip_and_unknown_fails_closed() {
        for st in TransferStatus::ALL {
            assert_eq!(st.as_str().parse::<TransferStatus>(), Ok(st));
        }
        assert_eq!("ACTIVE".parse::<TransferStatus>(), Err(UnknownStatus("ACTIVE".into())));
    }

    #[test]
    fn terminal_statuses_have_no_way_out() {
        for phase in Phase::ALL.into_iter().filter(|p| p.status.is_terminal()) {
            for op in Operation::ALL {
                assert_eq!(transition(phase, op), Err(Refusal::NotAllowed), "{phase} {op}");
            }
        }
    }

    #[test]
    fn the_happy_path_is_the_seed_lifecycle() {
        let mut p = Phase::settled(TransferStatus::Staged);
        for op in [
            Operation::Provision,
            Operation::Push,
            Operation::BeginActivation,
            Operation::CompleteActivation {
                budget_exhausted: false,
            },
            Operation::ReportUsage { exhausts_budget: false },
            Operation::ReportUsage { exhausts_budget: true },
            Operation::ReapInsolvent,
        ] {
            p = transition(p, op).unwrap();
        }
        assert_eq!(p, Phase::settled(TransferStatus::Terminated));
    }

    #[test]
    fn exactly_the_documented_edges_are_allowed() {
        let allowed = Phase::ALL
            .into_iter()
            .flat_map(|p| Operation::ALL.into_iter().map(move |op| (p, op)))
            .filter(|&(p, op)| transition(p, op).is_ok())
            .count();
        // provision 1, push 1, begin 1, complete 2 (active or insolvent), fail 1, report 2
        // (activating) + 2 (active) + 2 (insolvent), reap 1, expire 4, terminate 6, bind 1.
        assert_eq!(allowed, 24);
    }

    #[test]
    fn an_activation_whose_budget_ran_out_completes_insolvent() {
        let activating = Phase {
            status: TransferStatus::Pushed,
            activating: true,
        };
        let spent = transition(activating, Operation::ReportUsage { exhausts_budget: true }).unwrap();
        assert_eq!(spent, activating, "spend alone never ends an activation");
        assert_eq!(
            transition(spent, Operation::CompleteActivation { budget_exhausted: true }),
            Ok(Phase::settled(TransferStatus::Insolvent))
        );
    }
}
