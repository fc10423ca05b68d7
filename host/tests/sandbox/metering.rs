//! Fuel is metered while the guest runs and paid from its budget: a guest out of budget stops
//! within one quantum.

#[allow(unused_imports)]
use super::*;

#[test]
pub(super) fn cpu_burn() {
    let h = host();
    let work = json!({ "rounds": 200_000 });
    let a = h.pushed(&snapshot(0, work.clone()), Tier::Nano, 1_000_000, "cpu-burn");
    let b = h.pushed(&snapshot(0, work), Tier::Nano, 1_000_000, "cpu-burn");
    let (ra, rb) = (h.activate(&a), h.activate(&b));
    assert_eq!(ra.outcome, RunOutcome::Returned);
    assert_eq!(ra.fuel_consumed, rb.fuel_consumed, "fuel is bit-exact run to run");
    assert!(ra.fuel_consumed > 200_000 * 3, "every round costs fuel");
}

#[test]
pub(super) fn a_guest_out_of_budget_makes_the_transfer_insolvent_within_one_quantum() {
    let h = host();
    // Nano charges 20 micro-USD per CPU-second: 3 micro-USD buys 0.15 s, below the 0.25 s
    // per-turn ceiling, so the budget runs out first.
    let allocated = 3;
    let id = h.pushed(
        &snapshot(0, json!({ "resumeFirst": true })),
        Tier::Nano,
        allocated,
        "loop-forever",
    );
    let first = h.activate(&id);
    assert_eq!(first.outcome, RunOutcome::Returned);
    assert_eq!(first.transfer.status, TransferStatus::Active);
    let second = h.run_call(&id).unwrap();
    assert_eq!(second.outcome, RunOutcome::BudgetExhausted);
    assert_eq!(second.transfer.status, TransferStatus::Insolvent);
    let budget = h.db().get_status(&id).unwrap().budget.unwrap();
    assert!(budget.spent_micro_usd >= allocated);
    assert!(
        budget.spent_micro_usd <= allocated + 1,
        "spend {} passed the budget {allocated} by more than one metering quantum",
        budget.spent_micro_usd
    );
    assert_eq!(h.events(&id, EventKind::Insolvent).len(), 1);
    assert!(
        h.events(&id, EventKind::Terminated).is_empty(),
        "insolvent, not terminated: the reaper ends it after its grace"
    );
    assert_eq!(h.sandboxes.live_count(), 0, "an insolvent sandbox is dropped");
    h.assert_serves_a_forecaster();
}

#[test]
pub(super) fn metering_ticks_while_the_guest_runs() {
    let h = host();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "loop-forever");
    let report = h.activate(&id);
    assert_eq!(report.outcome, RunOutcome::CeilingExceeded(Ceiling::FuelPerTurn));
    let compute: Vec<u64> = h
        .events(&id, EventKind::UsageReported)
        .iter()
        .filter(|u| u["kind"] == "compute")
        .map(|u| u["amountMicroUsd"].as_u64().unwrap())
        .collect();
    // 0.25 CPU-s at 20 micro-USD per CPU-s is 5 micro-USD, charged by the host without the
    // guest reporting anything, at ticks as the loop runs: fuel is handed out an interval at
    // a time (`FUEL_FLUSH_INTERVAL`), so even a call-free loop's fuel reaches the meter.
    assert!(!compute.is_empty(), "{compute:?}");
    assert_eq!(compute.iter().sum::<u64>(), 5);
    assert_eq!(report.compute_micro_usd, 5);
    assert_eq!(h.db().budget(&id).unwrap().unwrap().spent_micro_usd, 5);
}
