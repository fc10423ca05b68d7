//! The plan of injected faults a test armed on one connection ([`crate::fault`], the seam):
//! which steps fail, after how many passes, and how often they fired. A leaf: the store's
//! handle holds a plan without knowing the seam that arms it.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// A step of the store's work a test can make fail (see the [module docs](self)).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultStep {
    /// `claim_wake` inserting its attempt.
    ClaimWake,
    /// `prepare_dispatch`: an attempt crossing the dispatch fence.
    Dispatch,
    /// A message authored by an agent (an agent's reply inside a turn) being appended.
    AgentReply,
    /// The end of a turn being recorded: an attempt becoming `accepted` or `consumed`.
    FinishTurn,
    /// An attempt becoming `delivery_unknown` (a reported or settled unknown outcome).
    MarkUnknown,
    /// An attached endpoint's lease being extended (`renew_carrier_lease`, `renew_endpoint`).
    RenewLease,
    /// A transfer's budget being read (`Store::budget`).
    BudgetRead,
    /// A new endpoint being attached (`bind_transfer_agent`, `attach_endpoint`).
    AttachEndpoint,
    /// An endpoint being registered as wake-capable (`register_wake_carrier`).
    RegisterCarrier,
    /// The answer of a turn end that committed (`finish_turn_spending`): the end is recorded,
    /// and its caller is told the database was busy — a commit whose outcome the caller cannot
    /// know, as when PostgreSQL's connection drops at `COMMIT`. Checked after the commit, so
    /// unlike every other step it fails a call that changed something.
    FinishTurnAnswer,
}

impl FaultStep {
    /// Every step.
    pub const ALL: &'static [FaultStep] = &[
        Self::ClaimWake,
        Self::Dispatch,
        Self::AgentReply,
        Self::FinishTurn,
        Self::MarkUnknown,
        Self::RenewLease,
        Self::BudgetRead,
        Self::AttachEndpoint,
        Self::RegisterCarrier,
        Self::FinishTurnAnswer,
    ];

    /// The step's name (the `ahp_fault` argument, and its trigger's suffix).
    pub const fn name(self) -> &'static str {
        match self {
            Self::ClaimWake => "claim_wake",
            Self::Dispatch => "dispatch",
            Self::AgentReply => "agent_reply",
            Self::FinishTurn => "finish_turn",
            Self::MarkUnknown => "mark_unknown",
            Self::RenewLease => "renew_lease",
            Self::BudgetRead => "budget_read",
            Self::AttachEndpoint => "attach_endpoint",
            Self::RegisterCarrier => "register_carrier",
            Self::FinishTurnAnswer => "finish_turn_answer",
        }
    }

    /// The `TEMP` trigger that raises the fault inside the step's write, or `None` for a read
    /// step (checked by the read itself).
    pub(crate) fn trigger(self) -> Option<&'static str> {
        Some(match self {
            Self::ClaimWake => "BEFORE INSERT ON main.wake_attempts",
            Self::Dispatch => "BEFORE UPDATE ON main.wake_attempts WHEN NEW.state = 'dispatched'",
            Self::AgentReply => "BEFORE INSERT ON main.messages WHEN NEW.author_kind = 'agent'",
            Self::FinishTurn => "BEFORE UPDATE ON main.wake_attempts WHEN NEW.state IN ('accepted', 'consumed')",
            Self::MarkUnknown => "BEFORE UPDATE ON main.wake_attempts WHEN NEW.state = 'delivery_unknown'",
            Self::RenewLease => {
                "BEFORE UPDATE OF lease_expires_at ON main.agent_endpoints
                 WHEN NEW.state = 'attached' AND NEW.lease_expires_at <> OLD.lease_expires_at"
            }
            Self::AttachEndpoint => "BEFORE INSERT ON main.agent_endpoints",
            Self::RegisterCarrier => "BEFORE UPDATE OF wake_capable ON main.agent_endpoints WHEN NEW.wake_capable = 1",
            Self::BudgetRead | Self::FinishTurnAnswer => return None,
        })
    }

    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| s.name() == name)
    }
}

/// How one armed step behaves.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Arm {
    pub(crate) pass: u32,
    pub(crate) fail: u32,
    pub(crate) fired: u32,
}

/// The armed steps of one connection.
#[derive(Debug, Default)]
pub(crate) struct FaultPlan(pub(crate) Mutex<HashMap<FaultStep, Arm>>);

impl FaultPlan {
    /// Whether `step` fails now (counting the call).
    pub(crate) fn hit(&self, step: FaultStep) -> bool {
        let mut arms = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(arm) = arms.get_mut(&step) else {
            return false;
        };
        if arm.pass > 0 {
            arm.pass -= 1;
            return false;
        }
        if arm.fail > 0 {
            arm.fail -= 1;
            arm.fired += 1;
            return true;
        }
        false
    }
}
