//! `ahp:agent/metering`: the budget, and spend the guest reports.
//!
//! Linked by hand (`func_wrap`) rather than through a generated `Host` trait, because both
//! functions need the Store itself: they settle the CPU meter first ([`Metered`]) and then cut
//! the fuel left to what the budget still pays for. The same two functions are linked under
//! every version of the package (`@0.1.0`, `@0.2.0`, `@0.3.0`); only the generated types differ.
//! Both are counted per turn ([`MAX_REPORTS_PER_TURN`], [`MAX_BUDGET_CALLS_PER_TURN`]).

use ahp_store::{Error as StoreError, MAX_USAGE_REPORT_MICRO_USD};
use wasmtime::StoreContextMut;
use wasmtime::component::Linker;

use super::bindings::{v0_1, v0_2, v0_3};
use super::context::{AgentCtx, MAX_BUDGET_CALLS_PER_TURN, MAX_REPORTS_PER_TURN, Metered};

/// The usage kind compute spend is recorded under; reserved to the host.
pub const COMPUTE_KIND: &str = "compute";

/// A budget as the interface reports it (both versions share its shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Budget {
    allocated: u64,
    spent: u64,
    fuel_left: u64,
}

/// Why a report was refused (both versions share its shape).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refusal {
    InvalidKind(String),
    InvalidAmount,
    Insolvent,
}

macro_rules! link_version {
    ($linker:expr, $name:literal, $v:ident) => {{
        use $v::ahp::agent::metering::{BudgetState, Error};
        let to_budget = |b: Budget| BudgetState {
            allocated_micro_usd: b.allocated,
            spent_micro_usd: b.spent,
            remaining_micro_usd: b.allocated.saturating_sub(b.spent),
            fuel_left_this_turn: b.fuel_left,
        };
        let mut inst = $linker.instance($name)?;
        inst.func_wrap(
            "report",
            move |mut cx: StoreContextMut<'_, T>, (kind, micro_usd): (String, u64)| {
                let r = report(&mut cx, &kind, micro_usd)?.map(to_budget).map_err(|e| match e {
                    Refusal::InvalidKind(m) => Error::InvalidKind(m),
                    Refusal::InvalidAmount => Error::InvalidAmount,
                    Refusal::Insolvent => Error::Insolvent,
                });
                Ok((r,))
            },
        )?;
        inst.func_wrap("budget", move |mut cx: StoreContextMut<'_, T>, (): ()| {
            count_budget_call(&mut cx)?;
            T::settle(&mut cx)?;
            Ok((to_budget(budget(&mut cx)),))
        })?;
    }};
}

/// Links `metering` under both package versions.
pub(crate) fn add_to_linker<T: Metered>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    link_version!(linker, "ahp:agent/metering@0.3.0", v0_3);
    link_version!(linker, "ahp:agent/metering@0.2.0", v0_2);
    link_version!(linker, "ahp:agent/metering@0.1.0", v0_1);
    Ok(())
}

fn report<T: Metered>(
    cx: &mut StoreContextMut<'_, T>,
    kind: &str,
    micro_usd: u64,
) -> wasmtime::Result<Result<Budget, Refusal>> {
    if ahp_store::HOST_METERED_USAGE_KINDS.contains(&kind) {
        return Ok(Err(Refusal::InvalidKind(format!(
            "`{kind}` is metered by the host ({})",
            match kind {
                COMPUTE_KIND => "fuel",
                ahp_store::MODEL_TOKENS_USAGE_KIND => "the model gateway",
                _ => "the MCP tools",
            }
        ))));
    }
    if micro_usd == 0 || micro_usd > MAX_USAGE_REPORT_MICRO_USD {
        return Ok(Err(Refusal::InvalidAmount));
    }
    let st = cx.data_mut().agent();
    st.calls.reports += 1;
    if st.calls.reports > MAX_REPORTS_PER_TURN {
        return Ok(Err(Refusal::InvalidKind(format!(
            "more than {MAX_REPORTS_PER_TURN} reports in one turn"
        ))));
    }
    T::settle(cx)?;
    let st = cx.data_mut().agent();
    let result = match held_report(st, kind, micro_usd) {
        Some(held) => held,
        None => st
            .db(|db| db.report_usage(&st.transfer, micro_usd, kind))
            .map(|r| r.budget),
    };
    match result {
        Ok(after) => {
            let remaining = after.remaining_micro_usd();
            T::external_spend(cx, remaining)?;
            if remaining == 0 {
                return Ok(Err(Refusal::Insolvent));
            }
            Ok(Ok(budget(cx)))
        }
        Err(StoreError::InvalidInput { field, reason }) if field == "kind" => Ok(Err(Refusal::InvalidKind(reason))),
        Err(StoreError::InvalidInput { .. }) => Ok(Err(Refusal::InvalidAmount)),
        Err(e @ StoreError::CarriedElsewhere { .. }) => {
            // Another host carries the agent now: this one stops the guest and records nothing
            // more for it (the run ends `cancelled`).
            tracing::warn!(error = %e, "guest spend refused: the agent is carried elsewhere");
            cx.data_mut().agent().lost = Some(e.to_string());
            Err(wasmtime::format_err!("the host stopped the guest: {e}"))
        }
        Err(e) => {
            // The transfer can no longer take spend (terminated meanwhile): stop the guest.
            T::external_spend(cx, 0)?;
            tracing::warn!(error = %e, "guest spend refused");
            Ok(Err(Refusal::Insolvent))
        }
    }
}

/// A report during an activation, held for its end (see
/// [`Journal`](crate::interfaces::Journal)): checked as the store would check it, and answered
/// with the budget the store would then hold (an activation's spend changes no state, see
/// `report_usage`). `None` when nothing is held (a turn): the store records it at once.
fn held_report(st: &AgentCtx, kind: &str, micro_usd: u64) -> Option<Result<ahp_store::Budget, StoreError>> {
    if !st.journal.holding() {
        return None;
    }
    Some((|| {
        ahp_store::spend::validate_usage_kind(kind)?;
        let stored = st
            .db(|db| db.budget(&st.transfer))?
            .ok_or_else(|| StoreError::CorruptRow {
                table: "budgets",
                reason: format!("{} is activating but has no budget", st.transfer),
            })?;
        st.journal.spend(kind, micro_usd);
        Ok(ahp_store::Budget {
            spent_micro_usd: stored.spent_micro_usd.saturating_add(st.journal.held_spend()),
            ..stored
        })
    })())
}

/// Counts one `budget` call against [`MAX_BUDGET_CALLS_PER_TURN`]. `budget` has no error to
/// return (its WIT signature is infallible), so a call past the bound is a limit breach: it
/// traps, and the turn ends as trapped.
fn count_budget_call<T: Metered>(cx: &mut StoreContextMut<'_, T>) -> wasmtime::Result<()> {
    let st = cx.data_mut().agent();
    st.calls.budgets += 1;
    if st.calls.budgets > MAX_BUDGET_CALLS_PER_TURN {
        return Err(wasmtime::format_err!(
            "more than {MAX_BUDGET_CALLS_PER_TURN} metering.budget calls in one turn"
        ));
    }
    Ok(())
}

fn budget<T: Metered>(cx: &mut StoreContextMut<'_, T>) -> Budget {
    let fuel_left = cx.get_fuel().unwrap_or(0);
    let st = cx.data_mut().agent();
    let b = st.db(|db| db.budget(&st.transfer)).ok().flatten();
    // Spend an activation holds for its end is spent already.
    let held = st.journal.held_spend();
    let (allocated, spent) = b.map_or((0, 0), |b| {
        (b.allocated_micro_usd, b.spent_micro_usd.saturating_add(held))
    });
    Budget {
        allocated,
        spent,
        fuel_left,
    }
}
