//! The carrier's side of wake delivery: a turn's end in one transaction, a claim given back,
//! unconfirmed attempts settled, accepted attempts settled by reconciliation, the endpoints
//! with a wake to claim — each refusal proven to change nothing.

use super::*;
use crate::fault::FaultStep;

/// Alice, one agent with a live wake-capable endpoint, a conversation with it.
fn setup() -> (World, Caller, Agent, AgentActor, Conversation) {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    let cv = w.conversation(&alice, &[&a]);
    (w, alice, a, actor, cv)
}

/// A wake of the agent past the fence, and its ticket.
fn dispatched(w: &mut World, alice: &Caller, actor: &AgentActor, cv: &Conversation) -> DispatchTicket {
    w.post(alice, cv, Acting::Human, "x").unwrap();
    let claim = w.store.claim_wake(alice, actor, CLAIM).unwrap().unwrap();
    w.store.prepare_dispatch(alice, actor, &claim.attempt.id).unwrap()
}

fn attempt_state(w: &mut World, attempt: &str) -> String {
    w.store
        .autocommit()
        .query_row("SELECT state FROM wake_attempts WHERE id = ?1", [attempt], |r| r.get(0))
        .unwrap()
}

fn wake_state(w: &mut World, wake: &str) -> String {
    w.store
        .autocommit()
        .query_row("SELECT state FROM wakes WHERE id = ?1", [wake], |r| r.get(0))
        .unwrap()
}

#[test]
fn an_accepted_turn_ends_consumed_in_one_transaction_and_a_retry_is_a_no_op() {
    let (mut w, alice, _a, actor, cv) = setup();
    let ticket = dispatched(&mut w, &alice, &actor, &cv);
    let done = w
        .store
        .finish_turn(&alice, &actor, &ticket, DispatchOutcome::Accepted)
        .unwrap();
    assert!(done.state_changed);
    assert_eq!(done.value.state, AttemptState::Consumed);
    assert_eq!(wake_state(&mut w, &ticket.wake.id), "consumed");
    let before = w.bytes();
    let again = w
        .store
        .finish_turn(&alice, &actor, &ticket, DispatchOutcome::Accepted)
        .unwrap();
    assert!(!again.state_changed);
    assert_eq!(again.value.state, AttemptState::Consumed);
    assert!(w.bytes() == before, "an exact retry changed nothing");
    // The next wake is claimable at once: nothing unresolved is left in the way.
    w.post(&alice, &cv, Acting::Human, "y").unwrap();
    assert!(w.store.claim_wake(&alice, &actor, CLAIM).unwrap().is_some());
}

#[test]
fn an_unknown_turn_ends_delivery_unknown_and_is_never_redispatched() {
    let (mut w, alice, _a, actor, cv) = setup();
    let ticket = dispatched(&mut w, &alice, &actor, &cv);
    let done = w
        .store
        .finish_turn(&alice, &actor, &ticket, DispatchOutcome::Unknown)
        .unwrap();
    assert_eq!(done.value.state, AttemptState::DeliveryUnknown);
    assert_eq!(wake_state(&mut w, &ticket.wake.id), "dispatched");
    assert_eq!(w.store.claim_wake(&alice, &actor, CLAIM).unwrap(), None);
}

#[test]
fn a_failed_turn_end_leaves_the_attempt_dispatched_and_changes_nothing() {
    if crate::testing::skip_on_postgres("the fault seam (SQL function and temp triggers) is SQLite's") {
        return;
    }
    let (mut w, alice, _a, actor, cv) = setup();
    let ticket = dispatched(&mut w, &alice, &actor, &cv);
    // Busy on every attempt the write path makes: the caller sees the transient error.
    w.store
        .inject_transient_fault(FaultStep::FinishTurn, 0, crate::MAX_WRITE_ATTEMPTS)
        .unwrap();
    let before = w.bytes();
    let e = w
        .store
        .finish_turn(&alice, &actor, &ticket, DispatchOutcome::Accepted)
        .unwrap_err();
    assert!(e.is_transient(), "{e}");
    assert!(w.bytes() == before, "neither the outcome nor the consume was written");
    assert_eq!(attempt_state(&mut w, &ticket.attempt.id), "dispatched");
    // The same call, made again, records both.
    let done = w
        .store
        .finish_turn(&alice, &actor, &ticket, DispatchOutcome::Accepted)
        .unwrap();
    assert_eq!(done.value.state, AttemptState::Consumed);
}

#[test]
fn a_turn_end_that_meets_a_busy_database_once_is_run_again_by_the_write_path() {
    if crate::testing::skip_on_postgres("the fault seam (SQL function and temp triggers) is SQLite's") {
        return;
    }
    let (mut w, alice, _a, actor, cv) = setup();
    let ticket = dispatched(&mut w, &alice, &actor, &cv);
    w.store.inject_transient_fault(FaultStep::FinishTurn, 0, 1).unwrap();
    let done = w
        .store
        .finish_turn(&alice, &actor, &ticket, DispatchOutcome::Accepted)
        .unwrap();
    assert_eq!(done.value.state, AttemptState::Consumed);
    assert_eq!(
        w.store.faults_fired(FaultStep::FinishTurn),
        1,
        "the fault was met, and ridden out"
    );
}

#[test]
fn a_turn_end_with_any_field_wrong_is_refused_and_changes_nothing() {
    let (mut w, alice, a, actor, cv) = setup();
    let ticket = dispatched(&mut w, &alice, &actor, &cv);
    let before = w.bytes();
    let wrong_token = DispatchTicket {
        consume_token: format!("wct_{}", "0".repeat(64)),
        ..ticket.clone()
    };
    assert!(matches!(
        w.store
            .finish_turn(&alice, &actor, &wrong_token, DispatchOutcome::Accepted),
        Err(Error::ConsumeRefused { .. })
    ));
    let mut wrong_wake = ticket.clone();
    wrong_wake.wake.id = "wk_000000000000000000000000".into();
    assert!(matches!(
        w.store
            .finish_turn(&alice, &actor, &wrong_wake, DispatchOutcome::Accepted),
        Err(Error::AttemptNotFound(_))
    ));
    let stale = AgentActor {
        generation: actor.generation + 1,
        ..actor.clone()
    };
    assert!(matches!(
        w.store.finish_turn(&alice, &stale, &ticket, DispatchOutcome::Accepted),
        Err(Error::StaleGeneration { .. })
    ));
    let bob = w.bob.clone();
    assert!(matches!(
        w.store.finish_turn(&bob, &actor, &ticket, DispatchOutcome::Accepted),
        Err(Error::AgentNotFound(id)) if id == a.id
    ));
    let malformed = DispatchTicket {
        consume_token: "nope".into(),
        ..ticket.clone()
    };
    assert!(matches!(
        w.store
            .finish_turn(&alice, &actor, &malformed, DispatchOutcome::Accepted),
        Err(Error::InvalidInput {
            field: "consumeToken",
            ..
        })
    ));
    assert!(w.bytes() == before);
    // Unknown first, then an accepted report for the same attempt: the exact token still
    // proves the turn ran.
    w.store
        .finish_turn(&alice, &actor, &ticket, DispatchOutcome::Unknown)
        .unwrap();
    let late = w
        .store
        .finish_turn(&alice, &actor, &ticket, DispatchOutcome::Accepted)
        .unwrap();
    assert_eq!(late.value.state, AttemptState::Consumed);
}

#[test]
fn a_claim_given_back_is_pending_again_and_a_fenced_one_is_refused() {
    let (mut w, alice, _a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let claim = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    let released = w.store.release_claim(&alice, &actor, &claim.attempt.id).unwrap();
    assert!(released.state_changed);
    assert_eq!(released.value.state, AttemptState::Released);
    assert_eq!(wake_state(&mut w, &claim.wake.id), "pending");
    let before = w.bytes();
    assert!(
        !w.store
            .release_claim(&alice, &actor, &claim.attempt.id)
            .unwrap()
            .state_changed
    );
    assert!(w.bytes() == before);
    // Claimed again at once, then fenced: no longer given back.
    let again = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    assert_eq!(again.wake.id, claim.wake.id);
    w.store.prepare_dispatch(&alice, &actor, &again.attempt.id).unwrap();
    let before = w.bytes();
    assert!(matches!(
        w.store.release_claim(&alice, &actor, &again.attempt.id),
        Err(Error::InvalidAttemptState {
            state: AttemptState::Dispatched,
            ..
        })
    ));
    assert!(matches!(
        w.store.release_claim(&alice, &actor, "wka_000000000000000000000000"),
        Err(Error::AttemptNotFound(_))
    ));
    assert!(w.bytes() == before);
}

#[test]
fn the_carrier_settles_dispatched_and_accepted_attempts_no_turn_runs_for() {
    let (mut w, alice, a, actor, cv) = setup();
    // An accepted attempt never consumed (reported through `finish_dispatch`) blocks the
    // agent's next fence crossing.
    let t1 = dispatched(&mut w, &alice, &actor, &cv);
    w.store
        .finish_dispatch(&alice, &actor, &t1.attempt.id, DispatchOutcome::Accepted)
        .unwrap();
    w.post(&alice, &cv, Acting::Human, "y").unwrap();
    assert!(matches!(
        w.store.claim_wake(&alice, &actor, CLAIM),
        Err(Error::LimitReached { .. })
    ));
    let settled = w.store.settle_unconfirmed_attempts(&alice, &actor).unwrap();
    assert_eq!(settled.len(), 1);
    assert_eq!(settled[0].state, AttemptState::DeliveryUnknown);
    assert_eq!(attempt_state(&mut w, &t1.attempt.id), "delivery_unknown");
    let audited = w.count(&format!(
        "SELECT count(*) FROM communication_events WHERE kind = 'wake_delivery_unknown' AND agent_id = '{}'",
        a.id
    ));
    assert_eq!(audited, 1);
    // Now the next wake goes through; settling again is a no-op.
    let claim = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    w.store.prepare_dispatch(&alice, &actor, &claim.attempt.id).unwrap();
    assert_eq!(
        w.store.settle_unconfirmed_attempts(&alice, &actor).unwrap().len(),
        1,
        "the dispatched one"
    );
    let before = w.bytes();
    assert!(w.store.settle_unconfirmed_attempts(&alice, &actor).unwrap().is_empty());
    assert!(w.bytes() == before);
    // A carrier of another principal settles nothing of this agent.
    let bob = w.bob.clone();
    assert!(matches!(
        w.store.settle_unconfirmed_attempts(&bob, &actor),
        Err(Error::AgentNotFound(_))
    ));
    assert!(w.bytes() == before);
}

#[test]
fn reconciliation_settles_accepted_attempts_never_consumed() {
    let (mut w, alice, _a, actor, cv) = setup();
    let t = dispatched(&mut w, &alice, &actor, &cv);
    w.store
        .finish_dispatch(&alice, &actor, &t.attempt.id, DispatchOutcome::Accepted)
        .unwrap();
    let report = w.store.reconcile_takeover().unwrap();
    assert_eq!(report.marked_unknown, 1);
    assert_eq!(attempt_state(&mut w, &t.attempt.id), "delivery_unknown");
    // So does retiring the endpoint.
    let (mut w, alice, a, actor, cv) = setup();
    let t = dispatched(&mut w, &alice, &actor, &cv);
    w.store
        .finish_dispatch(&alice, &actor, &t.attempt.id, DispatchOutcome::Accepted)
        .unwrap();
    w.store.detach_endpoint(&alice, &a.id, &actor.endpoint).unwrap();
    assert_eq!(attempt_state(&mut w, &t.attempt.id), "delivery_unknown");
    // A reported outcome is still final for the carrier: accepted is not turned unknown by a
    // report.
    let (mut w, alice, _a, actor, cv) = setup();
    let t = dispatched(&mut w, &alice, &actor, &cv);
    w.store
        .finish_dispatch(&alice, &actor, &t.attempt.id, DispatchOutcome::Accepted)
        .unwrap();
    let before = w.bytes();
    assert!(matches!(
        w.store
            .finish_dispatch(&alice, &actor, &t.attempt.id, DispatchOutcome::Unknown),
        Err(Error::InvalidAttemptState {
            state: AttemptState::Accepted,
            ..
        })
    ));
    assert!(w.bytes() == before);
}

#[test]
fn wake_ready_endpoints_lists_only_wake_capable_endpoints_with_work_paged() {
    let mut w = world();
    let alice = w.alice.clone();
    let mut actors = Vec::new();
    for _ in 0..5 {
        let a = w.agent(&alice);
        actors.push((a.clone(), w.attach(&alice, &a)));
    }
    let quiet = w.agent(&alice);
    let quiet_actor = w.attach(&alice, &quiet);
    let all: Vec<&Agent> = actors.iter().map(|(a, _)| a).collect();
    let cv = w.conversation(&alice, &all);
    w.post(&alice, &cv, Acting::Human, "everyone").unwrap();
    // One claimed (still not past the fence), one past it and consumed.
    let claimed = actors[1].1.clone();
    w.store.claim_wake(&alice, &claimed, CLAIM).unwrap().unwrap();
    let done = actors[2].1.clone();
    let c = w.store.claim_wake(&alice, &done, CLAIM).unwrap().unwrap();
    let t = w.store.prepare_dispatch(&alice, &done, &c.attempt.id).unwrap();
    w.store
        .finish_turn(&alice, &done, &t, DispatchOutcome::Accepted)
        .unwrap();
    // One not wake-capable (a takeover cleared it, nobody registered since).
    let unregistered = actors[3].1.clone();
    w.store
        .autocommit()
        .execute(
            "UPDATE agent_endpoints SET wake_capable = 0 WHERE id = ?1",
            [&unregistered.endpoint],
        )
        .unwrap();
    let mut want: Vec<AgentActor> = vec![actors[0].1.clone(), claimed, actors[4].1.clone()];
    want.sort_by(|a, b| a.endpoint.cmp(&b.endpoint));
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = w.store.wake_ready_endpoints(after.as_deref(), 2).unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = Some(last.endpoint.clone());
        seen.extend(page);
    }
    assert_eq!(seen, want);
    assert!(!seen.contains(&quiet_actor));
    for limit in [0, crate::conversation::carrier::MAX_READY_PAGE + 1] {
        assert!(matches!(
            w.store.wake_ready_endpoints(None, limit),
            Err(Error::InvalidInput { field: "limit", .. })
        ));
    }
    assert!(matches!(
        w.store.wake_ready_endpoints(Some("agt_x"), 2),
        Err(Error::InvalidInput { .. })
    ));
}

#[test]
fn claim_and_dispatch_crosses_the_fence_in_one_commit_and_audits_both_steps() {
    let (mut w, alice, a, actor, cv) = setup();
    assert!(
        w.store.claim_and_dispatch(&alice, &actor, CLAIM).unwrap().is_none(),
        "nothing pending"
    );
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let ticket = w.store.claim_and_dispatch(&alice, &actor, CLAIM).unwrap().unwrap();
    assert_eq!(ticket.attempt.state, AttemptState::Dispatched);
    assert_eq!(ticket.wake.state, WakeState::Dispatched);
    assert_eq!(wake_state(&mut w, &ticket.wake.id), "dispatched");
    let events = w
        .store
        .communication_events(0, None, None, bounds::MAX_PAGE_LIMIT)
        .unwrap();
    let kinds: Vec<AuditKind> = events.iter().rev().take(2).map(|e| e.kind).collect();
    assert_eq!(kinds, [AuditKind::WakeDispatched, AuditKind::WakeClaimed]);
    // Past the fence: nothing more to claim, and the ticket ends the turn as the two calls' did.
    assert!(w.store.claim_and_dispatch(&alice, &actor, CLAIM).unwrap().is_none());
    let done = w
        .store
        .finish_turn(&alice, &actor, &ticket, DispatchOutcome::Accepted)
        .unwrap();
    assert_eq!(done.value.state, AttemptState::Consumed);
    // A stale generation is refused and changes nothing.
    w.post(&alice, &cv, Acting::Human, "y").unwrap();
    let newer = w.attach(&alice, &a);
    let before = w.bytes();
    assert!(w.store.claim_and_dispatch(&alice, &actor, CLAIM).is_err());
    assert!(w.bytes() == before, "a refused claim changed nothing");
    assert!(w.store.claim_and_dispatch(&alice, &newer, CLAIM).unwrap().is_some());
}

#[test]
fn a_failed_fence_in_claim_and_dispatch_leaves_the_wake_pending_and_unclaimed() {
    if crate::testing::skip_on_postgres("the fault seam (SQL function and temp triggers) is SQLite's") {
        return;
    }
    let (mut w, alice, _a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    w.store
        .inject_transient_fault(FaultStep::Dispatch, 0, crate::MAX_WRITE_ATTEMPTS)
        .unwrap();
    let before = w.bytes();
    let e = w.store.claim_and_dispatch(&alice, &actor, CLAIM).unwrap_err();
    assert!(e.is_transient(), "{e}");
    assert!(w.bytes() == before, "neither the claim nor the fence was written");
    let attempts: i64 = w
        .store
        .autocommit()
        .query_row("SELECT count(*) FROM wake_attempts", [], |r| r.get(0))
        .unwrap();
    assert_eq!(attempts, 0);
    // The same call, made again, claims and dispatches it.
    let ticket = w.store.claim_and_dispatch(&alice, &actor, CLAIM).unwrap().unwrap();
    assert_eq!(ticket.attempt.state, AttemptState::Dispatched);
}
