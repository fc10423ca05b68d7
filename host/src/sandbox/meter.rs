//! Metering that ticks by itself: fuel in, micro-USD out.
//!
//! Before each turn the Store gets `min(fuel per turn, fuel the remaining budget can pay for)`.
//! While the guest runs, the meter is *settled* — the fuel burnt since the last settlement is
//! converted at the tier's rate and recorded through the store's `report_usage` (kind
//! `compute`) — whenever at least [`METER_QUANTUM_FUEL`] is unsettled at an epoch tick, at every
//! `metering` call, and at the end of the turn. After each settlement the fuel left is cut to
//! what the remaining budget still pays for, so spend reported by the guest mid-turn (model
//! tokens) shrinks its CPU allowance at once.
//!
//! **The end of a dispatched turn.** The controller's turns end with one more commit anyway
//! (the turn's outcome and consume, `finish_turn`), so the last settlement of a turn that
//! returned rides in it instead of committing on its own: the run hands the priced fuel out as
//! a [`DeferredSpend`] and the controller records it with `finish_turn_spending`. Until the
//! controller confirms it ([`DeferredSpend::recorded`]) the meter does not count it as charged,
//! so a turn end that could not be recorded leaves it owed, and the sandbox's next settlement
//! charges it (charges are cumulative, below). A host killed between the turn and its end
//! loses that last settlement — at most [`METER_QUANTUM_FUEL`] of fuel plus one
//! [`FUEL_FLUSH_INTERVAL`], the same bound the wall-clock trap has.
//!
//! **Call-free loops.** Cranelift keeps a function's fuel counter in a register and writes it
//! back to the Store only around calls (wasmtime 48, `func_environ.rs`): the epoch check is a
//! libcall that does not write it back, so an epoch tick inside a call-free loop sees no fuel
//! burnt — and a loop trapped there by the wall clock would lose the fuel it burnt since its
//! last call, running uncharged. So every Store runs with a fuel *yield interval* of
//! [`FUEL_FLUSH_INTERVAL`]: the guest's fuel is handed out that much at a time, and refilling it
//! is an out-of-gas libcall that does write the counter back. A tick, a settlement and the
//! wall-clock trap therefore see the fuel burnt to within one interval, call-free loop or not.
//! The budget bound below does not depend on ticks: fuel is granted only up to what the budget
//! pays for.
//!
//! Charges are computed on the *cumulative* fuel of the sandbox (`ceil(total × rate)` minus what
//! was already charged), so rounding never accumulates: compute spend exceeds the exact price
//! of the fuel burnt by less than one micro-USD, and because the guest never holds fuel its
//! budget cannot pay for, total spend never passes the allocation by more than that one
//! micro-USD — the metering quantum the tests bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ahp_store::{MAX_USAGE_REPORT_MICRO_USD, TierLimits};
use wasmtime::StoreContextMut;

use super::Sandbox;
use super::state::SandboxState;

/// Unsettled fuel that triggers a settlement at the next epoch tick: 0.1 CPU-second. Smaller
/// means fresher spend figures and more database writes (one fsync each).
pub const METER_QUANTUM_FUEL: u64 = 100_000_000;

/// Fuel handed to a running guest at a time (the Store's fuel yield interval): 0.01 CPU-second,
/// so what the meter sees lags what a call-free loop burnt by at most this (see the module
/// docs). Each refill is an out-of-gas libcall and an async yield, about a microsecond: smaller
/// intervals cost measurably more (10k fuel doubles a loop's run time), larger ones make the
/// fuel a wall-clock trap can leave uncharged larger.
pub const FUEL_FLUSH_INTERVAL: u64 = 10_000_000;

pub use crate::interfaces::metering::COMPUTE_KIND;

/// One sandbox's meter.
#[derive(Debug, Clone)]
pub(crate) struct Meter {
    /// The per-turn fuel ceiling.
    ceiling: u64,
    /// Fuel in the Store at the last settlement.
    level: u64,
    /// Fuel burnt in the current turn.
    pub(crate) turn_consumed: u64,
    /// Fuel burnt over the sandbox's life.
    pub(crate) total_consumed: u64,
    /// Compute spend recorded so far, micro-USD.
    pub(crate) charged_micro_usd: u64,
    /// Remaining budget after the last settlement.
    pub(crate) remaining_micro_usd: u64,
    /// Set when the store refused to record spend (the transfer was terminated meanwhile):
    /// the guest is stopped.
    pub(crate) refused: Option<String>,
    /// The remaining budget the controller read for this turn before its dispatch fence
    /// ([`Sandbox::read_budget_before`]): what the turn starts from if its own read fails.
    read_before: Option<u64>,
    /// Whether this turn's last settlement, if it returns, is handed to the controller
    /// ([`Sandbox::defer_last_settlement`]) instead of committed on its own.
    defer_last: bool,
    /// Spend of earlier [`DeferredSpend`]s the controller recorded, not yet counted in
    /// `charged_micro_usd` (folded in at the next settlement).
    recorded_elsewhere: Arc<AtomicU64>,
}

impl Meter {
    pub(crate) fn new(ceiling: u64) -> Self {
        Self {
            ceiling,
            level: 0,
            turn_consumed: 0,
            total_consumed: 0,
            charged_micro_usd: 0,
            remaining_micro_usd: 0,
            refused: None,
            read_before: None,
            defer_last: false,
            recorded_elsewhere: Arc::default(),
        }
    }

    /// Counts the deferred spend the controller recorded since the last settlement as charged.
    fn fold_recorded(&mut self) {
        self.charged_micro_usd += self.recorded_elsewhere.swap(0, Ordering::AcqRel);
    }

    /// Adds the fuel burnt down to `fuel` (the Store's level now) to the turn's and the
    /// sandbox's totals, and returns the compute spend owed for it and any earlier fuel not yet
    /// charged, micro-USD.
    fn burn_down_to(&mut self, fuel: u64, limits: &TierLimits) -> u64 {
        self.fold_recorded();
        let burnt = self.level.saturating_sub(fuel);
        self.turn_consumed += burnt;
        self.total_consumed += burnt;
        self.level = fuel;
        self.owed(limits)
    }

    /// Compute spend of the fuel already burnt that is not charged yet, micro-USD: a deferred
    /// spend whose turn end was not recorded (the next settlement charges it).
    fn owed(&self, limits: &TierLimits) -> u64 {
        limits
            .compute_cost_micro_usd(self.total_consumed)
            .saturating_sub(self.charged_micro_usd)
    }

    /// Whether this turn's fuel ran out on the per-turn ceiling (rather than on the budget).
    pub(crate) fn hit_ceiling(&self) -> bool {
        self.turn_consumed >= self.ceiling
    }

    /// Fuel left in this turn's allowance: the ceiling minus what the turn burnt.
    fn turn_left(&self) -> u64 {
        self.ceiling.saturating_sub(self.turn_consumed)
    }
}

impl Sandbox {
    /// Records the remaining budget the controller read for the next turn before crossing its
    /// dispatch fence — the read that decides whether the turn is dispatched at all, so a failed
    /// read there leaves the wake pending. The turn still reads the budget itself when it starts
    /// (the freshest figure); only if that read fails (a busy database) does it start from this
    /// one, read moments before, instead of from nothing.
    pub(crate) fn read_budget_before(&mut self, remaining_micro_usd: u64) {
        self.store.data_mut().meter.read_before = Some(remaining_micro_usd);
    }

    /// Hands the next turn's last settlement, if the turn returns, to the caller as
    /// [`Run::deferred_spend`](crate::sandbox::Run::deferred_spend), to be recorded with the
    /// turn's end (see the [module docs](self)).
    pub(crate) fn defer_last_settlement(&mut self) {
        self.store.data_mut().meter.defer_last = true;
    }
}

/// A turn's last compute spend, not yet recorded: the controller records it with the turn's end
/// and then calls [`recorded`](Self::recorded); dropped unrecorded, it stays owed and the
/// sandbox's next settlement charges it.
#[derive(Debug, Clone)]
pub struct DeferredSpend {
    /// Micro-USD owed, 1 to [`MAX_USAGE_REPORT_MICRO_USD`].
    pub micro_usd: u64,
    /// The meter's count of recorded deferred spend.
    recorded: Arc<AtomicU64>,
}

impl DeferredSpend {
    /// Tells the sandbox's meter that this spend was recorded: its next settlement counts it as
    /// charged instead of charging it again.
    pub fn recorded(self) {
        self.recorded.fetch_add(self.micro_usd, Ordering::AcqRel);
    }
}

/// Starts a turn: reads the budget and fuels the Store with what the turn may burn — what the
/// remaining budget pays for once the spend still owed from an earlier turn (an end that could
/// not be recorded) is paid, so that spend never lets a turn pass the allocation.
///
/// A budget that cannot be read is not an exhausted one: the turn starts from the figure the
/// controller read before the dispatch fence ([`Sandbox::read_budget_before`]), and without one
/// (an activation) the turn fails with the read's error — never `BudgetExhausted`, which would
/// end a solvent transfer.
pub(crate) fn start_turn(cx: &mut StoreContextMut<'_, SandboxState>) -> wasmtime::Result<u64> {
    let st = cx.data_mut();
    st.meter.fold_recorded();
    st.meter.turn_consumed = 0;
    st.turn_started = std::time::Instant::now();
    let read_before = st.meter.read_before.take();
    let remaining = match (st.agent.db(|db| db.budget(&st.agent.transfer)), read_before) {
        (Ok(budget), _) => budget.map_or(0, |b| b.remaining_micro_usd()),
        (Err(e), Some(before)) => {
            tracing::warn!(transfer = %st.agent.transfer, error = %e, "cannot read the budget; starting the turn from the controller's read");
            before
        }
        (Err(e), None) => return Err(wasmtime::format_err!("the budget could not be read: {e}")),
    };
    // Spend still owed (a turn end that could not be recorded with its last settlement) is
    // charged at this turn's first settlement: the budget it can burn is what is left after it.
    let owed = st.meter.owed(st.limits);
    let remaining = remaining.saturating_sub(owed);
    st.meter.remaining_micro_usd = remaining;
    let fuel = st.limits.fuel_affordable(remaining).min(st.meter.turn_left());
    st.meter.level = fuel;
    cx.set_fuel(fuel)?;
    Ok(fuel)
}

/// Fuel burnt since the last settlement.
pub(crate) fn unsettled(cx: &StoreContextMut<'_, SandboxState>) -> u64 {
    let fuel = cx.get_fuel().unwrap_or(0);
    cx.data().meter.level.saturating_sub(fuel)
}

/// Charges the fuel burnt since the last settlement and cuts the fuel left to what the
/// remaining budget pays for. Returns the remaining budget.
pub(crate) fn settle(cx: &mut StoreContextMut<'_, SandboxState>) -> wasmtime::Result<u64> {
    // Without fuel (only the raw-wasmtime benchmark baseline) there is nothing to settle.
    let Ok(fuel) = cx.get_fuel() else {
        return Ok(cx.data().meter.remaining_micro_usd);
    };
    let st = cx.data_mut();
    let owed = st.meter.burn_down_to(fuel, st.limits);
    if owed > 0 && owed <= MAX_USAGE_REPORT_MICRO_USD && st.agent.journal.spend(COMPUTE_KIND, owed) {
        // An activation's: held for its end (see `Journal`), and spent already.
        st.meter.charged_micro_usd += owed;
        st.meter.remaining_micro_usd = st.meter.remaining_micro_usd.saturating_sub(owed);
    } else if owed > 0 {
        match st
            .agent
            .db(|db| db.report_usage(&st.agent.transfer, owed, COMPUTE_KIND))
        {
            Ok(r) => {
                st.meter.charged_micro_usd += owed;
                st.meter.remaining_micro_usd = r.budget.remaining_micro_usd();
            }
            Err(e) => {
                tracing::warn!(transfer = %st.agent.transfer, error = %e, "compute spend refused; stopping the guest");
                if matches!(e, ahp_store::Error::CarriedElsewhere { .. }) {
                    st.agent.lost = Some(e.to_string());
                }
                st.meter.refused = Some(e.to_string());
                st.meter.remaining_micro_usd = 0;
            }
        }
    }
    let allowed = st
        .limits
        .fuel_affordable(st.meter.remaining_micro_usd)
        .min(st.meter.turn_left());
    let level = fuel.min(allowed);
    st.meter.level = level;
    let remaining = st.meter.remaining_micro_usd;
    cx.set_fuel(level)?;
    Ok(remaining)
}

/// Whether this run's last settlement was asked to be deferred
/// ([`Sandbox::defer_last_settlement`]); clears the request, which holds for one run.
pub(crate) fn take_defer(cx: &mut StoreContextMut<'_, SandboxState>) -> bool {
    std::mem::take(&mut cx.data_mut().meter.defer_last)
}

/// Ends a turn's metering: the last settlement, or — when `defer` (a turn that returned after
/// [`Sandbox::defer_last_settlement`]) — the spend that settlement would record, handed out to
/// be recorded with the turn's end (a spend past what one report may carry is settled here).
pub(crate) fn end_turn(
    cx: &mut StoreContextMut<'_, SandboxState>,
    defer: bool,
) -> wasmtime::Result<Option<DeferredSpend>> {
    let fuel = match cx.get_fuel() {
        Ok(fuel) if defer => fuel,
        _ => return settle(cx).map(|_| None),
    };
    let st = cx.data_mut();
    let owed = st.meter.burn_down_to(fuel, st.limits);
    if owed > MAX_USAGE_REPORT_MICRO_USD {
        return settle(cx).map(|_| None);
    }
    Ok((owed > 0).then(|| DeferredSpend {
        micro_usd: owed,
        recorded: st.meter.recorded_elsewhere.clone(),
    }))
}

/// Records spend the guest reported (or the host observed) and cuts the fuel left to match.
pub(crate) fn external_spend(cx: &mut StoreContextMut<'_, SandboxState>, remaining: u64) -> wasmtime::Result<()> {
    let Ok(fuel) = cx.get_fuel() else {
        return Ok(());
    };
    let st = cx.data_mut();
    st.meter.remaining_micro_usd = remaining;
    let level = fuel.min(st.limits.fuel_affordable(remaining).min(st.meter.turn_left()));
    st.meter.level = level;
    cx.set_fuel(level)
}
