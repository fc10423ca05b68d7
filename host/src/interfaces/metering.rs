//! `ahp:agent/metering`: the budget, and spend the guest reports.
//!
//! Linked by hand (`func_wrap`) rather than through a generated `Host` trait, because both
//! functions need the Store itself: they settle the CPU meter first and then cut the fuel left
//! to what the budget still pays for.

use ahp_store::{Error as StoreError, MAX_USAGE_REPORT_MICRO_USD};
use wasmtime::StoreContextMut;
use wasmtime::component::Linker;

use crate::sandbox::bindings::ahp::agent::metering::{BudgetState, Error};
use crate::sandbox::meter::{self, COMPUTE_KIND};
use crate::sandbox::state::{MAX_REPORTS_PER_TURN, SandboxState};

pub(crate) fn add_to_linker(linker: &mut Linker<SandboxState>) -> wasmtime::Result<()> {
    let mut inst = linker.instance("ahp:agent/metering@0.1.0")?;
    inst.func_wrap(
        "report",
        |mut cx: StoreContextMut<'_, SandboxState>, (kind, micro_usd): (String, u64)| {
            Ok((report(&mut cx, &kind, micro_usd)?,))
        },
    )?;
    inst.func_wrap("budget", |mut cx: StoreContextMut<'_, SandboxState>, (): ()| {
        meter::settle(&mut cx)?;
        Ok((budget(&mut cx),))
    })?;
    Ok(())
}

fn report(
    cx: &mut StoreContextMut<'_, SandboxState>,
    kind: &str,
    micro_usd: u64,
) -> wasmtime::Result<Result<BudgetState, Error>> {
    if kind == COMPUTE_KIND {
        return Ok(Err(Error::InvalidKind("`compute` is metered by the host".into())));
    }
    if micro_usd == 0 || micro_usd > MAX_USAGE_REPORT_MICRO_USD {
        return Ok(Err(Error::InvalidAmount));
    }
    let st = cx.data_mut();
    st.calls.reports += 1;
    if st.calls.reports > MAX_REPORTS_PER_TURN {
        return Ok(Err(Error::InvalidKind(format!(
            "more than {MAX_REPORTS_PER_TURN} reports in one turn"
        ))));
    }
    meter::settle(cx)?;
    let st = cx.data_mut();
    let result = st.db(|db| db.report_usage(&st.transfer, micro_usd, kind));
    match result {
        Ok(r) => {
            let remaining = r.budget.remaining_micro_usd();
            meter::external_spend(cx, remaining)?;
            if remaining == 0 {
                return Ok(Err(Error::Insolvent));
            }
            Ok(Ok(budget(cx)))
        }
        Err(StoreError::InvalidInput { field, reason }) if field == "kind" => Ok(Err(Error::InvalidKind(reason))),
        Err(StoreError::InvalidInput { .. }) => Ok(Err(Error::InvalidAmount)),
        Err(e) => {
            // The transfer can no longer take spend (terminated meanwhile): stop the guest.
            meter::external_spend(cx, 0)?;
            tracing::warn!(error = %e, "guest spend refused");
            Ok(Err(Error::Insolvent))
        }
    }
}

fn budget(cx: &mut StoreContextMut<'_, SandboxState>) -> BudgetState {
    let fuel_left = cx.get_fuel().unwrap_or(0);
    let st = cx.data();
    let b = st.db(|db| db.budget(&st.transfer)).ok().flatten();
    let (allocated, spent) = b.map_or((0, 0), |b| (b.allocated_micro_usd, b.spent_micro_usd));
    BudgetState {
        allocated_micro_usd: allocated,
        spent_micro_usd: spent,
        remaining_micro_usd: allocated.saturating_sub(spent),
        fuel_left_this_turn: fuel_left,
    }
}
