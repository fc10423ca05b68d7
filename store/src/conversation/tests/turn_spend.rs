//! A turn's end with its last compute spend in one commit (`finish_turn_spending`): recorded
//! with the state change and only with it, refused by a transfer that left `active` without
//! losing the end, bounded, and written not at all when the end fails.

use super::*;
use crate::fault::FaultStep;
use crate::{DEFAULT_TOKEN_TTL, Tier, TokenKey, TokenScope, TransferStatus, issue_transfer_token};

const BUDGET: u64 = 1_000;

/// Alice's agent with a wake past the fence, and an active transfer with [`BUDGET`] to pay.
fn setup() -> (World, Caller, AgentActor, DispatchTicket, String) {
    let key = TokenKey::random();
    let mut w = world_over(crate::testing::store().unwrap().with_token_key(key.clone()));
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    let cv = w.conversation(&alice, &[&a]);
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let claim = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    let ticket = w.store.prepare_dispatch(&alice, &actor, &claim.attempt.id).unwrap();
    let now = crate::clock::Clock::now(&w.clock);
    let s = &mut w.store;
    let t = s.snapshot_state(&crate::testing::bare_snapshot()).unwrap().id;
    let token = |scope| issue_transfer_token(&key, &t, scope, now, DEFAULT_TOKEN_TTL).unwrap();
    s.provision_runtime(&t, Tier::Nano, BUDGET, "c", &token(TokenScope::ProvisionRuntime))
        .unwrap();
    s.push_state(&t, None).unwrap();
    s.begin_activation(&t, &token(TokenScope::Activate)).unwrap();
    s.complete_activation(&t).unwrap();
    (w, alice, actor, ticket, t)
}

fn spent(w: &mut World, t: &str) -> u64 {
    w.store.budget(t).unwrap().unwrap().spent_micro_usd
}

fn spend(t: &str, micro_usd: u64) -> TurnSpend {
    TurnSpend {
        transfer: t.to_owned(),
        micro_usd,
    }
}

#[test]
fn a_turn_end_records_its_spend_in_the_same_commit_and_a_retry_charges_nothing() {
    let (mut w, alice, actor, ticket, t) = setup();
    let end = w
        .store
        .finish_turn_spending(&alice, &actor, &ticket, DispatchOutcome::Accepted, Some(&spend(&t, 7)))
        .unwrap();
    assert_eq!(end.attempt.value.state, AttemptState::Consumed);
    assert_eq!(end.spend.map(|r| r.budget.spent_micro_usd), Some(7));
    assert_eq!(end.spend_refused, None);
    assert_eq!(spent(&mut w, &t), 7);
    let events = w.count("SELECT count(*) FROM usage_events WHERE type = 'usage_reported'");
    assert_eq!(events, 1, "audited as report_usage audits compute");
    // An exact retry (its first commit's answer lost, say) changes nothing and charges nothing.
    let again = w
        .store
        .finish_turn_spending(&alice, &actor, &ticket, DispatchOutcome::Accepted, Some(&spend(&t, 7)))
        .unwrap();
    assert!(!again.attempt.state_changed);
    assert!(again.spend.is_none());
    assert_eq!(spent(&mut w, &t), 7);
}

#[test]
fn a_spend_that_uses_up_the_budget_makes_the_transfer_insolvent_with_the_turn_end() {
    let (mut w, alice, actor, ticket, t) = setup();
    let end = w
        .store
        .finish_turn_spending(
            &alice,
            &actor,
            &ticket,
            DispatchOutcome::Unknown,
            Some(&spend(&t, BUDGET)),
        )
        .unwrap();
    assert_eq!(end.attempt.value.state, AttemptState::DeliveryUnknown);
    assert_eq!(w.store.transfer(&t).unwrap().status, TransferStatus::Insolvent);
    assert_eq!(spent(&mut w, &t), BUDGET);
}

#[test]
fn a_spend_the_transfer_refuses_leaves_the_turn_end_recorded_without_it() {
    let (mut w, alice, actor, ticket, t) = setup();
    w.store.terminate(&t, "ended meanwhile").unwrap();
    let end = w
        .store
        .finish_turn_spending(&alice, &actor, &ticket, DispatchOutcome::Accepted, Some(&spend(&t, 7)))
        .unwrap();
    assert_eq!(end.attempt.value.state, AttemptState::Consumed);
    assert!(end.spend.is_none());
    assert!(end.spend_refused.is_some());
    assert_eq!(spent(&mut w, &t), 0);
}

#[test]
fn a_spend_out_of_bounds_is_refused_and_changes_nothing() {
    let (mut w, alice, actor, ticket, t) = setup();
    let before = w.bytes();
    for bad in [
        spend(&t, 0),
        spend(&t, crate::budget::MAX_USAGE_REPORT_MICRO_USD + 1),
        spend("not-a-transfer", 7),
    ] {
        let e = w
            .store
            .finish_turn_spending(&alice, &actor, &ticket, DispatchOutcome::Accepted, Some(&bad))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidInput { field: "spend", .. }), "{bad:?}: {e}");
    }
    assert!(w.bytes() == before, "refusals change nothing");
    let at_bound = spend(&t, crate::budget::MAX_USAGE_REPORT_MICRO_USD);
    let end = w
        .store
        .finish_turn_spending(&alice, &actor, &ticket, DispatchOutcome::Accepted, Some(&at_bound))
        .unwrap();
    assert_eq!(
        end.attempt.value.state,
        AttemptState::Consumed,
        "the bound itself is accepted"
    );
}

#[test]
fn a_failed_turn_end_records_no_spend() {
    if crate::testing::skip_on_postgres("the fault seam (SQL function and temp triggers) is SQLite's") {
        return;
    }
    let (mut w, alice, actor, ticket, t) = setup();
    w.store
        .inject_transient_fault(FaultStep::FinishTurn, 0, crate::MAX_WRITE_ATTEMPTS)
        .unwrap();
    let before = w.bytes();
    let e = w
        .store
        .finish_turn_spending(&alice, &actor, &ticket, DispatchOutcome::Accepted, Some(&spend(&t, 7)))
        .unwrap_err();
    assert!(e.is_transient(), "{e}");
    assert!(w.bytes() == before, "neither the end nor the spend was written");
    let end = w
        .store
        .finish_turn_spending(&alice, &actor, &ticket, DispatchOutcome::Accepted, Some(&spend(&t, 7)))
        .unwrap();
    assert_eq!(end.attempt.value.state, AttemptState::Consumed);
    assert_eq!(spent(&mut w, &t), 7, "the same call made again records both");
}
