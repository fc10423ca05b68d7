//! A turn's end with its last compute spend and its consumes in one commit
//! (`finish_turn_spending`): the spend recorded with the state change and only with it, refused
//! by a transfer that left `active` without losing the end, bounded, and written not at all
//! when the end fails; the consumes recorded whatever the outcome, bounded, all or none.

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

/// `finish_turn_spending` of Alice's ticket with an accepted outcome.
fn accepted(
    w: &mut World,
    alice: &Caller,
    actor: &AgentActor,
    ticket: &DispatchTicket,
    spend: Option<&TurnSpend>,
    consumed: &[String],
) -> Result<TurnEnd> {
    w.store.finish_turn_spending(
        alice,
        actor,
        ticket,
        DispatchOutcome::Accepted,
        spend,
        TurnInbox { consumed, read: &[] },
    )
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
    let end = accepted(&mut w, &alice, &actor, &ticket, Some(&spend(&t, 7)), &[]).unwrap();
    assert_eq!(end.attempt.value.state, AttemptState::Consumed);
    assert_eq!(end.spend.map(|r| r.budget.spent_micro_usd), Some(7));
    assert_eq!(end.spend_refused, None);
    assert_eq!(spent(&mut w, &t), 7);
    let events = w.count("SELECT count(*) FROM usage_events WHERE type = 'usage_reported'");
    assert_eq!(events, 1, "audited as report_usage audits compute");
    // An exact retry (its first commit's answer lost, say) changes nothing and charges nothing.
    let again = accepted(&mut w, &alice, &actor, &ticket, Some(&spend(&t, 7)), &[]).unwrap();
    assert!(!again.attempt.state_changed);
    assert!(again.spend.is_none());
    assert_eq!(spent(&mut w, &t), 7);
    // It says what the earlier commit recorded: the host counts the spend as recorded, not owed.
    assert_eq!(again.earlier_spend_micro_usd, Some(7));
    assert_eq!(end.earlier_spend_micro_usd, None, "the first commit recorded it itself");
    // So does the fallback a host tries after an end whose answer was lost: the same ticket
    // finished as unknown (the wake was consumed already: nothing changes).
    let unknown = w
        .store
        .finish_turn_spending(
            &alice,
            &actor,
            &ticket,
            DispatchOutcome::Unknown,
            Some(&spend(&t, 7)),
            TurnInbox::default(),
        )
        .unwrap();
    assert!(!unknown.attempt.state_changed && unknown.spend.is_none());
    assert_eq!(unknown.earlier_spend_micro_usd, Some(7));
    assert_eq!(spent(&mut w, &t), 7);
}

#[test]
fn a_retried_end_that_recorded_no_spend_reports_none() {
    let (mut w, alice, actor, ticket, t) = setup();
    accepted(&mut w, &alice, &actor, &ticket, None, &[]).unwrap();
    let again = accepted(&mut w, &alice, &actor, &ticket, Some(&spend(&t, 7)), &[]).unwrap();
    assert!(!again.attempt.state_changed);
    assert_eq!((again.spend.is_none(), again.earlier_spend_micro_usd), (true, None));
    assert_eq!(spent(&mut w, &t), 0);
    // Nor one the transfer refused.
    let (mut w, alice, actor, ticket, t) = setup();
    w.store.terminate(&t, "ended meanwhile").unwrap();
    accepted(&mut w, &alice, &actor, &ticket, Some(&spend(&t, 7)), &[]).unwrap();
    let again = accepted(&mut w, &alice, &actor, &ticket, Some(&spend(&t, 7)), &[]).unwrap();
    assert_eq!(again.earlier_spend_micro_usd, None);
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
            TurnInbox::default(),
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
    let end = accepted(&mut w, &alice, &actor, &ticket, Some(&spend(&t, 7)), &[]).unwrap();
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
        let e = accepted(&mut w, &alice, &actor, &ticket, Some(&bad), &[]).unwrap_err();
        assert!(matches!(e, Error::InvalidInput { field: "spend", .. }), "{bad:?}: {e}");
    }
    assert!(w.bytes() == before, "refusals change nothing");
    let at_bound = spend(&t, crate::budget::MAX_USAGE_REPORT_MICRO_USD);
    let end = accepted(&mut w, &alice, &actor, &ticket, Some(&at_bound), &[]).unwrap();
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
    let e = accepted(&mut w, &alice, &actor, &ticket, Some(&spend(&t, 7)), &[]).unwrap_err();
    assert!(e.is_transient(), "{e}");
    assert!(w.bytes() == before, "neither the end nor the spend was written");
    let end = accepted(&mut w, &alice, &actor, &ticket, Some(&spend(&t, 7)), &[]).unwrap();
    assert_eq!(end.attempt.value.state, AttemptState::Consumed);
    assert_eq!(spent(&mut w, &t), 7, "the same call made again records both");
}

/// The ids of the deliveries queued in `actor`'s inbox, oldest first.
fn queued(w: &mut World, alice: &Caller, actor: &AgentActor) -> Vec<String> {
    let inbox = w.store.read_inbox(alice, actor, 0, 50, true).unwrap();
    inbox.into_iter().map(|d| d.message.id).collect()
}

fn consumed_events(w: &mut World) -> i64 {
    w.store
        .autocommit()
        .query_row(
            "SELECT count(*) FROM communication_events WHERE kind = 'delivery_consumed'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn a_turn_end_records_the_deliveries_the_turn_consumed_in_its_commit() {
    let (mut w, alice, actor, ticket, t) = setup();
    let held = queued(&mut w, &alice, &actor);
    assert_eq!(held.len(), 1);
    let end = accepted(&mut w, &alice, &actor, &ticket, Some(&spend(&t, 7)), &held).unwrap();
    assert_eq!(end.attempt.value.state, AttemptState::Consumed);
    assert!(queued(&mut w, &alice, &actor).is_empty(), "the delivery is consumed");
    assert_eq!(consumed_events(&mut w), 1, "and audited as a consume is");
    // An exact retry changes nothing: the consume is desired state.
    let again = accepted(&mut w, &alice, &actor, &ticket, Some(&spend(&t, 7)), &held).unwrap();
    assert!(!again.attempt.state_changed);
    assert_eq!(consumed_events(&mut w), 1);
}

#[test]
fn a_failed_turn_s_end_records_its_consumes_too() {
    let (mut w, alice, actor, ticket, _) = setup();
    let held = queued(&mut w, &alice, &actor);
    let end = w
        .store
        .finish_turn_spending(
            &alice,
            &actor,
            &ticket,
            DispatchOutcome::Unknown,
            None,
            TurnInbox {
                consumed: &held,
                read: &[],
            },
        )
        .unwrap();
    assert_eq!(end.attempt.value.state, AttemptState::DeliveryUnknown);
    assert!(queued(&mut w, &alice, &actor).is_empty(), "the turn said it handled it");
}

#[test]
fn consumes_out_of_bounds_or_not_delivered_are_refused_and_change_nothing() {
    let (mut w, alice, actor, ticket, _) = setup();
    let held = queued(&mut w, &alice, &actor);
    // Bob's message in a conversation Alice's agent is not part of: not in its inbox.
    let bob = w.bob.clone();
    let other = w.agent(&bob);
    let cv = w.conversation(&bob, &[&other]);
    let foreign = w.post(&bob, &cv, Acting::Human, "not yours").unwrap().id;
    let before = w.bytes();
    let too_many = vec![held[0].clone(); bounds::MAX_TURN_CONSUMES + 1];
    let cases: [(&[String], &str); 3] = [
        (&too_many, "one past the bound"),
        (&["msg_nope".to_owned()], "a malformed id"),
        (&[held[0].clone(), foreign.clone()], "a message delivered elsewhere"),
    ];
    for (consumed, what) in cases {
        let e = accepted(&mut w, &alice, &actor, &ticket, None, consumed).unwrap_err();
        assert!(
            matches!(e, Error::InvalidInput { .. } | Error::MessageNotFound(_)),
            "{what}: {e}"
        );
        let e = w.store.consume_deliveries(&alice, &actor, consumed).unwrap_err();
        assert!(
            matches!(e, Error::InvalidInput { .. } | Error::MessageNotFound(_)),
            "{what}: {e}"
        );
    }
    assert!(w.bytes() == before, "refusals change nothing");
    // At the bound (the same id repeated is one consume) both are accepted.
    let at_bound = vec![held[0].clone(); bounds::MAX_TURN_CONSUMES];
    assert_eq!(w.store.consume_deliveries(&alice, &actor, &at_bound).unwrap(), 1);
    let end = accepted(&mut w, &alice, &actor, &ticket, None, &at_bound).unwrap();
    assert_eq!(end.attempt.value.state, AttemptState::Consumed);
    assert_eq!(consumed_events(&mut w), 1);
}
