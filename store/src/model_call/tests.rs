//! Reservations and settlements through the public `Store` methods: the cap lowered to the
//! budget, refusals that change nothing, exact charges, unknown outcomes charged in full,
//! concurrent reservations that never pass the allocation, and the takeover's settlement.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::*;

const PRICES: ModelPrices = ModelPrices {
    input: 400_000,
    output: 1_600_000,
    cache_read: 100_000,
    cache_write: 500_000,
};

/// A new `active` transfer with `budget` micro-USD in `store`.
fn active(store: &mut Store, key: &TokenKey, budget: u64) -> String {
    let t = store.snapshot_state(&crate::testing::bare_snapshot()).unwrap().id;
    let tok = issue_transfer_token(key, &t, TokenScope::ProvisionRuntime, store.now(), DEFAULT_TOKEN_TTL).unwrap();
    store
        .provision_runtime(&t, Tier::Nano, budget, "forecaster", &tok)
        .unwrap();
    store.push_state(&t, None).unwrap();
    let tok = issue_transfer_token(key, &t, TokenScope::Activate, store.now(), DEFAULT_TOKEN_TTL).unwrap();
    store.begin_activation(&t, &tok).unwrap();
    store.complete_activation(&t).unwrap();
    t
}

fn fixture(budget: u64) -> (Store, String) {
    let key = TokenKey::random();
    let mut store = crate::testing::store().unwrap().with_token_key(key.clone());
    let t = active(&mut store, &key, budget);
    (store, t)
}

fn request(input: u64, output: u32) -> ReservationRequest<'static> {
    ReservationRequest {
        model: "default",
        prices: PRICES,
        input_tokens_bound: input,
        max_output_tokens: output,
    }
}

fn granted(r: Reservation) -> ModelReservation {
    match r {
        Reservation::Granted(g) => g,
        other => panic!("not granted: {other:?}"),
    }
}

fn bytes(store: &mut Store) -> Vec<String> {
    crate::testing::dump(store)
}

#[test]
fn a_reservation_holds_the_worst_case_and_lowers_the_cap_to_the_budget() {
    // 1,000 input tokens at the highest input price (0.5 USD/MTok) = 500 micro-USD; 4,096
    // output tokens at 1.6 USD/MTok = 6,554 (rounded up).
    let (mut store, t) = fixture(1_000_000);
    let g = granted(store.reserve_model_call(&t, &request(1_000, 4_096)).unwrap());
    assert_eq!(g.plan.max_output_tokens, 4_096);
    assert_eq!(g.plan.reserved_micro_usd, 500 + 6_554);
    let b = store.budget(&t).unwrap().unwrap();
    assert_eq!(b.reserved_micro_usd, 7_054);
    assert_eq!(b.spent_micro_usd, 0);
    assert_eq!(b.remaining_micro_usd(), 1_000_000 - 7_054);

    // 2,000 micro-USD: 500 for the input leaves 1,500, which pays floor(1,500 / 1.6) = 937 tokens.
    let (mut store, t) = fixture(2_000);
    let g = granted(store.reserve_model_call(&t, &request(1_000, 4_096)).unwrap());
    assert_eq!(g.plan.max_output_tokens, 937);
    assert_eq!(g.plan.reserved_micro_usd, 500 + 1_500, "ceil(937 × 1.6) = 1,500");
    assert_eq!(store.budget(&t).unwrap().unwrap().remaining_micro_usd(), 0);
}

#[test]
fn a_call_the_budget_cannot_pay_is_refused_with_its_shortfall_and_changes_nothing() {
    // The input bound (500) and 16 output tokens (26) cost 526.
    let (mut store, t) = fixture(525);
    let before = bytes(&mut store);
    assert_eq!(
        store.reserve_model_call(&t, &request(1_000, 4_096)).unwrap(),
        Reservation::InsufficientBudget { shortfall_micro_usd: 1 }
    );
    assert_eq!(bytes(&mut store), before);
    // At the limit: exactly 526 pays for 16 output tokens.
    let (mut store, t) = fixture(526);
    let g = granted(store.reserve_model_call(&t, &request(1_000, 4_096)).unwrap());
    assert_eq!(g.plan.max_output_tokens, 16);
    assert_eq!(g.plan.reserved_micro_usd, 526);
    // A second call finds nothing left.
    assert_eq!(
        store.reserve_model_call(&t, &request(1_000, 4_096)).unwrap(),
        Reservation::InsufficientBudget {
            shortfall_micro_usd: 526
        }
    );
}

#[test]
fn a_settlement_charges_the_usage_exactly_and_releases_the_rest() {
    let (mut store, t) = fixture(1_000_000);
    let g = granted(store.reserve_model_call(&t, &request(10_000, 1_000)).unwrap());
    let usage = ModelUsage {
        input_tokens: 1_200,
        cache_read_tokens: 3_000,
        cache_write_tokens: 700,
        output_tokens: 250,
    };
    // 1,200 × 0.4 + 3,000 × 0.1 + 700 × 0.5 + 250 × 1.6 = 480 + 300 + 350 + 400 = 1,530.
    let s = store
        .settle_model_call(&g.call_id, CallOutcome::Completed(usage), Duration::from_millis(42))
        .unwrap();
    assert_eq!(s.charged_micro_usd, 1_530);
    assert_eq!(s.budget.spent_micro_usd, 1_530);
    assert_eq!(s.budget.reserved_micro_usd, 0);
    assert_eq!(s.status, TransferStatus::Active);
    let events = store.get_status(&t).unwrap().events;
    let called = events.iter().rev().find(|e| e.kind == EventKind::ModelCalled).unwrap();
    assert_eq!(called.detail["chargedMicroUsd"], 1_530);
    assert_eq!(called.detail["reservedMicroUsd"], g.plan.reserved_micro_usd);
    assert_eq!(called.detail["cacheReadTokens"], 3_000);
    assert_eq!(called.detail["latencyMs"], 42);
    let report = events
        .iter()
        .rev()
        .find(|e| e.kind == EventKind::UsageReported)
        .unwrap();
    assert_eq!(report.detail["kind"], "model_tokens");
    // Settled once: a second settlement changes nothing.
    let before = bytes(&mut store);
    assert!(matches!(
        store.settle_model_call(&g.call_id, CallOutcome::Unknown, Duration::ZERO),
        Err(Error::InvalidInput { field, .. }) if field == "callId"
    ));
    assert_eq!(bytes(&mut store), before);
    let calls = store.model_calls(&t, 10).unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].usage, Some(usage));
    assert_eq!(calls[0].outcome.as_deref(), Some("completed"));
}

#[test]
fn an_unknown_outcome_is_charged_the_reservation_and_a_refusal_nothing() {
    let (mut store, t) = fixture(1_000_000);
    let a = granted(store.reserve_model_call(&t, &request(1_000, 100)).unwrap());
    let b = granted(store.reserve_model_call(&t, &request(1_000, 100)).unwrap());
    let s = store
        .settle_model_call(&a.call_id, CallOutcome::Unknown, Duration::ZERO)
        .unwrap();
    assert_eq!(s.charged_micro_usd, a.plan.reserved_micro_usd);
    let s = store
        .settle_model_call(&b.call_id, CallOutcome::Refused, Duration::ZERO)
        .unwrap();
    assert_eq!(s.charged_micro_usd, 0);
    assert_eq!(s.budget.spent_micro_usd, a.plan.reserved_micro_usd);
    assert_eq!(s.budget.reserved_micro_usd, 0);
}

#[test]
fn usage_past_the_reservation_is_charged_the_reservation() {
    let (mut store, t) = fixture(1_000_000);
    let g = granted(store.reserve_model_call(&t, &request(100, 16)).unwrap());
    let lying = ModelUsage {
        output_tokens: 1_000_000,
        ..ModelUsage::default()
    };
    let s = store
        .settle_model_call(&g.call_id, CallOutcome::Completed(lying), Duration::ZERO)
        .unwrap();
    assert_eq!(s.charged_micro_usd, g.plan.reserved_micro_usd);
}

#[test]
fn spend_reaching_the_allocation_makes_the_transfer_insolvent_and_stops_reservations() {
    let (mut store, t) = fixture(2_000);
    let g = granted(store.reserve_model_call(&t, &request(1_000, 4_096)).unwrap());
    let s = store
        .settle_model_call(&g.call_id, CallOutcome::Unknown, Duration::ZERO)
        .unwrap();
    assert_eq!(s.budget.spent_micro_usd, 2_000, "exactly the allocation, never past it");
    assert_eq!(s.status, TransferStatus::Insolvent);
    let before = bytes(&mut store);
    assert_eq!(
        store.reserve_model_call(&t, &request(1, 16)).unwrap(),
        Reservation::Insolvent
    );
    assert_eq!(bytes(&mut store), before);
}

/// Runs `call` until it is not refused as transient: a call whose every attempt met another
/// writer of the same budget changed nothing, and its caller runs it again (as the host does).
fn through_contention<T>(store: &mut Store, mut call: impl FnMut(&mut Store) -> Result<T>) -> T {
    loop {
        match call(store) {
            Err(e) if e.is_transient() => continue,
            other => return other.unwrap(),
        }
    }
}

#[test]
fn concurrent_reservations_never_pass_the_allocation() {
    let db = Arc::new(crate::testing::TestDb::new());
    let key = TokenKey::random();
    let t = {
        let mut store = db.open().unwrap().with_token_key(key.clone());
        active(&mut store, &key, 100_000)
    };
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (db, t) = (db.clone(), t.clone());
            std::thread::spawn(move || {
                let mut store = db.open().unwrap();
                let mut held = 0u64;
                loop {
                    match through_contention(&mut store, |s| s.reserve_model_call(&t, &request(1_000, 4_096))) {
                        Reservation::Granted(g) => {
                            held += g.plan.reserved_micro_usd;
                            let s = through_contention(&mut store, |s| {
                                s.settle_model_call(&g.call_id, CallOutcome::Unknown, Duration::ZERO)
                            });
                            assert_eq!(s.charged_micro_usd, g.plan.reserved_micro_usd);
                        }
                        _ => return held,
                    }
                }
            })
        })
        .collect();
    let charged: u64 = threads.into_iter().map(|h| h.join().unwrap()).sum();
    let mut store = db.open().unwrap();
    let b = store.budget(&t).unwrap().unwrap();
    assert_eq!(b.spent_micro_usd, charged);
    assert!(b.spent_micro_usd <= b.allocated_micro_usd, "{b:?}");
    assert!(
        b.allocated_micro_usd - b.spent_micro_usd < 526,
        "ran until the smallest call did not fit: {b:?}"
    );
}

#[test]
fn a_takeover_charges_open_reservations_in_full() {
    let clock = ManualClock::new(Timestamp::from_micros(1_796_039_139_000_000));
    let key = TokenKey::random();
    let mut store = crate::testing::store()
        .unwrap()
        .with_clock(Arc::new(clock.clone()))
        .with_token_key(key.clone());
    let t = active(&mut store, &key, 1_000_000);
    let g = granted(store.reserve_model_call(&t, &request(1_000, 100)).unwrap());
    let done = granted(store.reserve_model_call(&t, &request(1_000, 100)).unwrap());
    store
        .settle_model_call(&done.call_id, CallOutcome::Refused, Duration::ZERO)
        .unwrap();
    clock.advance(Duration::from_secs(3));
    assert_eq!(
        store.settle_interrupted_model_calls().unwrap(),
        std::slice::from_ref(&g.call_id)
    );
    let b = store.budget(&t).unwrap().unwrap();
    assert_eq!(
        (b.spent_micro_usd, b.reserved_micro_usd),
        (g.plan.reserved_micro_usd, 0)
    );
    let calls = store.model_calls(&t, 10).unwrap();
    let c = calls.iter().find(|c| c.id == g.call_id).unwrap();
    assert_eq!(c.outcome.as_deref(), Some("interrupted"));
    assert_eq!(c.latency_ms, Some(3_000));
    assert!(store.settle_interrupted_model_calls().unwrap().is_empty());
}

#[test]
fn the_bounds_hold_at_the_limit_and_one_past() {
    let (mut store, t) = fixture(MAX_BUDGET_MICRO_USD);
    let at = ReservationRequest {
        prices: ModelPrices {
            input: MAX_PRICE_MICRO_USD_PER_MTOK,
            ..PRICES
        },
        ..request(1_000, 16)
    };
    assert!(matches!(
        store.reserve_model_call(&t, &at).unwrap(),
        Reservation::Granted(_)
    ));
    assert!(matches!(
        store.reserve_model_call(&t, &request(MAX_CALL_TOKENS, 16)).unwrap(),
        Reservation::Granted(_)
    ));
    let before = bytes(&mut store);
    for past in [
        ReservationRequest {
            prices: ModelPrices {
                output: MAX_PRICE_MICRO_USD_PER_MTOK + 1,
                ..PRICES
            },
            ..request(1, 16)
        },
        request(MAX_CALL_TOKENS + 1, 16),
        request(1, 0),
        ReservationRequest {
            model: "",
            ..request(1, 16)
        },
        ReservationRequest {
            model: &"m".repeat(MAX_MODEL_ID_BYTES + 1),
            ..request(1, 16)
        },
    ] {
        assert!(
            matches!(store.reserve_model_call(&t, &past), Err(Error::InvalidInput { .. })),
            "{past:?}"
        );
    }
    assert_eq!(bytes(&mut store), before, "refusals change nothing");
    assert!(matches!(
        store.reserve_model_call(
            &t,
            &ReservationRequest {
                model: &"m".repeat(MAX_MODEL_ID_BYTES),
                ..request(1, 16)
            }
        ),
        Ok(Reservation::Granted(_))
    ));
    assert!(matches!(
        store.model_calls(&t, MAX_MODEL_CALL_LIST + 1),
        Err(Error::InvalidInput { .. })
    ));
    assert_eq!(store.model_calls(&t, MAX_MODEL_CALL_LIST).unwrap().len(), 3);
}
