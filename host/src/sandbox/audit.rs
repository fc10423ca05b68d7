//! The run's audit: the `ceiling_exceeded` events a run records in its transfer's log, and the
//! failure text of an outcome (the reason a failed activation or a terminate records), bounded.

use ahp_store::EventKind;
use serde_json::json;
use wasmtime::Trap;

use super::executor::{RunOutcome, Sandbox};
use super::{Ceiling, Sandboxes, host_resources};
use crate::shared_store::StoreLock;

/// Longest guest-supplied message kept in a failure reason, in bytes.
pub const MAX_GUEST_MESSAGE_BYTES: usize = 512;

impl RunOutcome {
    /// The reason a failed activation records, or `None` for [`RunOutcome::Returned`].
    pub fn failure_reason(&self) -> Option<String> {
        match self {
            Self::Returned => None,
            Self::GuestError(m) => Some(format!("resume returned an error: {m}")),
            Self::CeilingExceeded(c) => Some(format!("ceiling exceeded: {c}")),
            Self::BudgetExhausted => Some("budget exhausted: the guest used all the fuel its budget pays for".into()),
            Self::Trapped(m) => Some(format!("guest trapped: {m}")),
            Self::Stopped(m) => Some(format!("stopped by the host: {m}")),
            Self::Cancelled(m) => Some(format!("cancelled by the host: {m}")),
        }
    }
}

impl Sandboxes {
    pub(super) fn audit_ceiling(&self, sandbox: &Sandbox, outcome: &RunOutcome) {
        let st = sandbox.store.data();
        // The egress ceiling cuts a request or response off without trapping the guest: audit
        // the first breach whatever the run's outcome.
        if st.egress_meter.breached() && !sandbox.egress_audited.swap(true, std::sync::atomic::Ordering::Relaxed) {
            self.record_breach(sandbox, Ceiling::Egress);
        }
        let RunOutcome::CeilingExceeded(ceiling) = *outcome else {
            return;
        };
        self.record_breach(sandbox, ceiling);
    }

    fn record_breach(&self, sandbox: &Sandbox, ceiling: Ceiling) {
        let st = sandbox.store.data();
        let c = &st.ceilings;
        let limit = match ceiling {
            Ceiling::FuelPerTurn => json!(c.fuel_per_turn),
            Ceiling::Memory => json!(c.memory_bytes),
            Ceiling::TableElements => json!(c.table_elements),
            Ceiling::Instances => json!(c.instances),
            Ceiling::Tables => json!(c.tables),
            Ceiling::Memories => json!(c.memories),
            Ceiling::WallClock => json!(c.wall_clock_per_turn.as_millis() as u64),
            Ceiling::Stack => json!(null),
            Ceiling::Egress => json!(c.egress_bytes),
            Ceiling::HostResources => json!(host_resources::table_capacity(c)),
        };
        let mut detail = json!({ "ceiling": ceiling.as_str(), "tier": c.tier, "limit": limit });
        if ceiling == Ceiling::Egress {
            detail["usedBytes"] = json!(st.egress_meter.used());
        }
        if ceiling == Ceiling::HostResources {
            // The limit is in table entries; each may hold at most this many bytes.
            detail["entryBytes"] = json!(host_resources::MAX_ENTRY_BYTES);
        }
        // A count ceiling: how many the component creates (its static count, see `counts`).
        if let Some(count) = sandbox.counts.get(ceiling) {
            detail["componentCount"] = json!(count);
        }
        // During an activation, held for its end with the rest of its writes.
        if st.agent.journal.event(EventKind::CeilingExceeded, detail.clone()) {
            return;
        }
        if let Err(e) = self
            .store
            .locked()
            .record_event(st.transfer(), EventKind::CeilingExceeded, detail)
        {
            tracing::error!(transfer = %st.transfer(), error = %e, "could not audit a ceiling breach");
        }
    }
}

/// One line saying why a guest call failed, without wasmtime's multi-line wasm backtrace: the
/// trap (e.g. `wasm trap: wasm \`unreachable\` instruction executed`) if there is one, else the
/// innermost cause's first line.
pub(super) fn one_line(e: &wasmtime::Error) -> String {
    let line = match e.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => e.root_cause().to_string(),
    };
    let first = line.lines().next().unwrap_or("").trim();
    if first.is_empty() {
        "unknown failure".to_owned()
    } else {
        first.to_owned()
    }
}

pub(super) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A reason within the store's bound.
pub(crate) fn bounded(reason: &str) -> String {
    truncate(reason, ahp_store::lifecycle::MAX_REASON_BYTES - 4)
}
