//! The MCP App pull carrier: bind, refresh, restart, unbind, expiry and replacement, and a
//! View's acquire, prepare and finish through the shared claim and dispatch fence — each
//! refusal proven to change nothing, and no attempt ever crossing the fence twice.

use super::*;

const WINDOW: &str = "window-1";
const OTHER_WINDOW: &str = "window-2";

/// A View's fence: `n` as 32 hex digits.
fn fence(n: u32) -> String {
    format!("{APP_BINDING_PREFIX}{n:032x}")
}

fn view<'a>(binding: &'a str, window: Option<&'a str>) -> AppView<'a> {
    AppView { binding, window }
}

/// Alice, one agent with a live endpoint no carrier holds yet, a conversation with it.
fn setup() -> (World, Caller, Agent, AgentActor, Conversation) {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let k = w.key();
    let ep = w.store.attach_endpoint(&alice, &a.id, LEASE, &k).unwrap().value;
    let cv = w.conversation(&alice, &[&a]);
    (w, alice, a, AgentActor::of(&ep), cv)
}

fn hashes(w: &mut World, endpoint: &str) -> (Option<String>, Option<String>) {
    w.store
        .autocommit()
        .query_row(
            "SELECT app_binding_hash, app_window_hash FROM agent_endpoints WHERE id = ?1",
            [endpoint],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

fn attempt_state(w: &mut World, attempt: &str) -> String {
    w.store
        .autocommit()
        .query_row("SELECT state FROM wake_attempts WHERE id = ?1", [attempt], |r| r.get(0))
        .unwrap()
}

/// The View claims the pending wake and crosses the fence.
fn prepared(w: &mut World, alice: &Caller, actor: &AgentActor, v: &AppView<'_>) -> DispatchTicket {
    let AppAcquire::Claimed { claim } = w.store.acquire_app_wake(alice, actor, v, CLAIM).unwrap() else {
        panic!("nothing to acquire");
    };
    w.store
        .prepare_app_dispatch(alice, actor, v, &claim.attempt.id)
        .unwrap()
}

#[test]
fn a_bound_view_acquires_prepares_and_finishes_and_only_the_consume_ends_the_wake() {
    let (mut w, alice, _a, actor, cv) = setup();
    let f = fence(1);
    let v = view(&f, Some(WINDOW));
    let bound = w.store.bind_app_view(&alice, &actor, &v).unwrap();
    assert_eq!(bound.outcome, AppBindOutcome::Bound);
    assert!(bound.endpoint.wake_capable);
    assert_eq!(bound.endpoint.app_host_id.as_deref(), Some(w.store.host_id()));
    assert_eq!(
        w.store.acquire_app_wake(&alice, &actor, &v, CLAIM).unwrap(),
        AppAcquire::Idle
    );

    w.post(&alice, &cv, Acting::Human, "hello").unwrap();
    let ticket = prepared(&mut w, &alice, &actor, &v);
    assert_eq!(attempt_state(&mut w, &ticket.attempt.id), "dispatched");
    let carrier: String = w
        .store
        .autocommit()
        .query_row(
            "SELECT carrier FROM wake_attempts WHERE id = ?1",
            [&ticket.attempt.id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(carrier, "mcp_app");
    let accepted = w
        .store
        .finish_app_dispatch(&alice, &actor, &v, &ticket.attempt.id, DispatchOutcome::Accepted)
        .unwrap();
    assert_eq!(accepted.value.state, AttemptState::Accepted);
    // Accepted is not a turn: the wake is still dispatched, and the View acquires nothing new
    // while its attempt waits for the consume.
    let state = w.store.app_carrier_state(&alice, &actor, &v).unwrap();
    assert_eq!(state.holder, AppBindingHolder::ThisView);
    assert_eq!(state.attempt.as_ref().map(|a| a.state), Some(AttemptState::Accepted));
    w.post(&alice, &cv, Acting::Human, "again").unwrap();
    assert!(matches!(
        w.store.acquire_app_wake(&alice, &actor, &v, CLAIM).unwrap(),
        AppAcquire::Open { attempt } if attempt.id == ticket.attempt.id
    ));
    // The turn consumes exactly; a late accept after it is a no-op.
    let consumed = w
        .store
        .consume_wake(&alice, &actor, &ticket.wake.id, &ticket.consume_token)
        .unwrap();
    assert_eq!(consumed.value.state, WakeState::Consumed);
    let late = w
        .store
        .finish_app_dispatch(&alice, &actor, &v, &ticket.attempt.id, DispatchOutcome::Accepted)
        .unwrap();
    assert!(!late.state_changed);
    assert_eq!(late.value.state, AttemptState::Consumed);
    // Then the next wake.
    assert!(matches!(
        w.store.acquire_app_wake(&alice, &actor, &v, CLAIM).unwrap(),
        AppAcquire::Claimed { .. }
    ));
    assert!(w.violations().is_empty(), "{:?}", w.violations());
}

#[test]
fn an_attempt_crosses_the_fence_once_and_an_unknown_outcome_is_never_resent() {
    let (mut w, alice, _a, actor, cv) = setup();
    let f = fence(1);
    let v = view(&f, None);
    w.store.bind_app_view(&alice, &actor, &v).unwrap();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let ticket = prepared(&mut w, &alice, &actor, &v);
    // The prepare's answer was lost: a second prepare of the same attempt is refused.
    let before = w.bytes();
    assert!(matches!(
        w.store.prepare_app_dispatch(&alice, &actor, &v, &ticket.attempt.id),
        Err(Error::InvalidAttemptState { .. })
    ));
    assert!(w.bytes() == before);
    // The heartbeat shows the View its dispatched attempt: it finishes it as unknown.
    let state = w.store.app_carrier_state(&alice, &actor, &v).unwrap();
    assert_eq!(state.attempt.as_ref().map(|a| a.state), Some(AttemptState::Dispatched));
    let unknown = w
        .store
        .finish_app_dispatch(&alice, &actor, &v, &ticket.attempt.id, DispatchOutcome::Unknown)
        .unwrap();
    assert_eq!(unknown.value.state, AttemptState::DeliveryUnknown);
    let again = w
        .store
        .finish_app_dispatch(&alice, &actor, &v, &ticket.attempt.id, DispatchOutcome::Unknown)
        .unwrap();
    assert!(!again.state_changed);
    assert!(matches!(
        w.store
            .finish_app_dispatch(&alice, &actor, &v, &ticket.attempt.id, DispatchOutcome::Accepted),
        Err(Error::InvalidAttemptState { .. })
    ));
    // Never re-sent: nothing is pending until a new message makes a new wake.
    assert_eq!(
        w.store.acquire_app_wake(&alice, &actor, &v, CLAIM).unwrap(),
        AppAcquire::Idle
    );
    // A turn that did run may still consume it.
    let consumed = w
        .store
        .consume_wake(&alice, &actor, &ticket.wake.id, &ticket.consume_token)
        .unwrap();
    assert_eq!(consumed.value.state, WakeState::Consumed);
    let fenced: i64 = w.count(&format!(
        "SELECT count(*) FROM wake_attempts WHERE wake_id = '{}' AND consume_token_hash IS NOT NULL",
        ticket.wake.id
    ));
    assert_eq!(fenced, 1);
}

#[test]
fn another_window_cannot_bind_a_live_binding_and_a_refreshed_view_of_its_window_can() {
    let (mut w, alice, _a, actor, cv) = setup();
    let (f1, f2, f3) = (fence(1), fence(2), fence(3));
    let first = view(&f1, Some(WINDOW));
    w.store.bind_app_view(&alice, &actor, &first).unwrap();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let ticket = prepared(&mut w, &alice, &actor, &first);

    // Another window, and a View with no window at all: refused, nothing changed.
    let before = w.bytes();
    for intruder in [view(&f2, Some(OTHER_WINDOW)), view(&f2, None)] {
        assert!(matches!(
            w.store.bind_app_view(&alice, &actor, &intruder),
            Err(Error::AppViewConflict(_))
        ));
        assert!(matches!(
            w.store.acquire_app_wake(&alice, &actor, &intruder, CLAIM),
            Err(Error::AppViewNotBound(_))
        ));
        let seen = w.store.app_carrier_state(&alice, &actor, &intruder).unwrap();
        assert_eq!((seen.holder, seen.same_window), (AppBindingHolder::OtherView, false));
    }
    assert!(w.bytes() == before, "refusals changed nothing");

    // The same window's refreshed View takes over; the first View's dispatched attempt is
    // settled as delivery_unknown (never re-sent), its calls refused from now on.
    let refreshed = view(&f3, Some(WINDOW));
    let seen = w.store.app_carrier_state(&alice, &actor, &refreshed).unwrap();
    assert_eq!((seen.holder, seen.same_window), (AppBindingHolder::OtherView, true));
    let rebound = w.store.bind_app_view(&alice, &actor, &refreshed).unwrap();
    assert_eq!(rebound.outcome, AppBindOutcome::Rebound);
    assert_eq!(rebound.settled.len(), 1);
    assert_eq!(rebound.settled[0].state, AttemptState::DeliveryUnknown);
    assert!(matches!(
        w.store.acquire_app_wake(&alice, &actor, &first, CLAIM),
        Err(Error::AppViewNotBound(_))
    ));
    assert!(matches!(
        w.store
            .finish_app_dispatch(&alice, &actor, &first, &ticket.attempt.id, DispatchOutcome::Accepted),
        Err(Error::InvalidAttemptState { .. })
    ));
    // The new View cannot touch the old View's attempt.
    assert!(matches!(
        w.store
            .finish_app_dispatch(&alice, &actor, &refreshed, &ticket.attempt.id, DispatchOutcome::Unknown),
        Err(Error::AttemptNotFound(_))
    ));
    assert_eq!(
        w.store.acquire_app_wake(&alice, &actor, &refreshed, CLAIM).unwrap(),
        AppAcquire::Idle
    );
    // The turn the first View started may still prove it ran.
    w.store
        .consume_wake(&alice, &actor, &ticket.wake.id, &ticket.consume_token)
        .unwrap();
}

#[test]
fn the_same_view_binding_again_keeps_its_claim() {
    let (mut w, alice, _a, actor, cv) = setup();
    let f = fence(1);
    let v = view(&f, Some(WINDOW));
    w.store.bind_app_view(&alice, &actor, &v).unwrap();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let AppAcquire::Claimed { claim } = w.store.acquire_app_wake(&alice, &actor, &v, CLAIM).unwrap() else {
        panic!()
    };
    let again = w.store.bind_app_view(&alice, &actor, &v).unwrap();
    assert_eq!(again.outcome, AppBindOutcome::Renewed);
    assert!(again.settled.is_empty());
    assert_eq!(attempt_state(&mut w, &claim.attempt.id), "claimed");
    assert!(matches!(
        w.store.acquire_app_wake(&alice, &actor, &v, CLAIM).unwrap(),
        AppAcquire::Open { attempt } if attempt.id == claim.attempt.id
    ));
    w.store
        .prepare_app_dispatch(&alice, &actor, &v, &claim.attempt.id)
        .unwrap();
}

#[test]
fn a_restart_keeps_the_binding_for_its_view_or_window_to_take_up_again() {
    let (mut w, alice, _a, actor, cv) = setup();
    let (f1, f2) = (fence(1), fence(2));
    let v = view(&f1, Some(WINDOW));
    w.store.bind_app_view(&alice, &actor, &v).unwrap();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let ticket = prepared(&mut w, &alice, &actor, &v);

    w.store.reconcile_takeover().unwrap();
    // The carrier registry lived in the old process: not wake-capable, the dispatched attempt
    // settled; both hashes kept.
    let ep = w.store.get_endpoint(&alice, &actor.agent, &actor.endpoint).unwrap();
    assert!(!ep.wake_capable);
    assert_eq!(ep.app_host_id, None);
    assert_eq!(attempt_state(&mut w, &ticket.attempt.id), "delivery_unknown");
    let (binding, window) = hashes(&mut w, &actor.endpoint);
    assert!(binding.is_some() && window.is_some());
    // The View is told it still holds the binding, and cannot acquire before it binds again.
    let seen = w.store.app_carrier_state(&alice, &actor, &v).unwrap();
    assert_eq!(seen.holder, AppBindingHolder::ThisView);
    assert!(!seen.endpoint.wake_capable);
    assert!(matches!(
        w.store.acquire_app_wake(&alice, &actor, &v, CLAIM),
        Err(Error::AppViewNotBound(_))
    ));
    assert_eq!(
        w.store.bind_app_view(&alice, &actor, &v).unwrap().outcome,
        AppBindOutcome::Renewed
    );
    // After another restart, a refreshed View of the window takes it up instead.
    w.store.reconcile_takeover().unwrap();
    let refreshed = view(&f2, Some(WINDOW));
    assert_eq!(
        w.store.bind_app_view(&alice, &actor, &refreshed).unwrap().outcome,
        AppBindOutcome::Rebound
    );
    w.post(&alice, &cv, Acting::Human, "y").unwrap();
    prepared(&mut w, &alice, &actor, &refreshed);
}

#[test]
fn unbind_is_exact_releases_the_claim_and_keeps_the_window() {
    let (mut w, alice, _a, actor, cv) = setup();
    let (f1, f2, f3) = (fence(1), fence(2), fence(3));
    let v = view(&f1, Some(WINDOW));
    w.store.bind_app_view(&alice, &actor, &v).unwrap();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let AppAcquire::Claimed { claim } = w.store.acquire_app_wake(&alice, &actor, &v, CLAIM).unwrap() else {
        panic!()
    };
    // Another View's unbind is a no-op.
    let before = w.bytes();
    let other = w
        .store
        .unbind_app_view(&alice, &actor, &view(&f2, Some(WINDOW)))
        .unwrap();
    assert!(!other.state_changed);
    assert!(w.bytes() == before);
    let gone = w.store.unbind_app_view(&alice, &actor, &v).unwrap();
    assert!(gone.state_changed);
    assert!(!gone.value.wake_capable);
    assert_eq!(gone.value.app_host_id, None);
    assert_eq!(attempt_state(&mut w, &claim.attempt.id), "released");
    let (binding, window) = hashes(&mut w, &actor.endpoint);
    assert_eq!(binding, None);
    assert!(window.is_some());
    // Only a View of that window binds it now.
    assert!(matches!(
        w.store.bind_app_view(&alice, &actor, &view(&f3, Some(OTHER_WINDOW))),
        Err(Error::AppViewConflict(_))
    ));
    let again = w.store.bind_app_view(&alice, &actor, &view(&f3, Some(WINDOW))).unwrap();
    assert_eq!(again.outcome, AppBindOutcome::Bound);
    assert!(matches!(
        w.store
            .acquire_app_wake(&alice, &actor, &view(&f3, Some(WINDOW)), CLAIM)
            .unwrap(),
        AppAcquire::Claimed { claim: c } if c.wake.id == claim.wake.id
    ));
}

#[test]
fn an_expired_endpoint_is_replaced_once_for_its_window_and_a_retry_returns_the_same_successor() {
    let (mut w, alice, a, actor, _cv) = setup();
    let (f1, f2) = (fence(1), fence(2));
    let v = view(&f1, Some(WINDOW));
    w.store.bind_app_view(&alice, &actor, &v).unwrap();
    // Live: a no-op.
    let before = w.bytes();
    let live = w
        .store
        .replace_expired_app_endpoint(&alice, &a.id, &actor.endpoint, actor.generation, &v)
        .unwrap();
    assert!(matches!(live, EndpointRecovery::Live { .. }));
    assert!(w.bytes() == before);

    w.clock.advance(LEASE);
    assert!(matches!(
        w.store.acquire_app_wake(&alice, &actor, &v, CLAIM),
        Err(Error::EndpointExpired { .. })
    ));
    // The expiry cleared the fence's hash and kept the window's.
    let (binding, window) = hashes(&mut w, &actor.endpoint);
    assert_eq!(binding, None);
    assert!(window.is_some());

    // Without a window, from another window, with a wrong generation: refused, unchanged.
    let before = w.bytes();
    for (bad, generation) in [
        (view(&f2, None), actor.generation),
        (view(&f2, Some(OTHER_WINDOW)), actor.generation),
        (view(&f2, Some(WINDOW)), actor.generation + 1),
    ] {
        assert!(
            w.store
                .replace_expired_app_endpoint(&alice, &a.id, &actor.endpoint, generation, &bad)
                .is_err()
        );
    }
    // Bob sees no such agent.
    assert!(matches!(
        w.store
            .replace_expired_app_endpoint(&w.bob.clone(), &a.id, &actor.endpoint, actor.generation, &v),
        Err(Error::AgentNotFound(_))
    ));
    assert!(w.bytes() == before, "refusals changed nothing");

    // A refreshed View of the window replaces E1/g1 with E2/g2.
    let refreshed = view(&f2, Some(WINDOW));
    let EndpointRecovery::Replaced {
        expired,
        successor,
        replayed,
    } = w
        .store
        .replace_expired_app_endpoint(&alice, &a.id, &actor.endpoint, actor.generation, &refreshed)
        .unwrap()
    else {
        panic!("not replaced")
    };
    assert!(!replayed);
    assert_eq!(expired.state, EndpointState::Expired);
    assert_eq!(successor.generation, actor.generation + 1);
    assert_eq!(successor.state, EndpointState::Attached);
    assert!(!successor.wake_capable, "the successor is bound by the View, next");
    assert_eq!(hashes(&mut w, &actor.endpoint), (None, None));
    assert_eq!(hashes(&mut w, &successor.id).1, window);
    // The retry of a lost answer returns the same successor, and changes nothing.
    let before = w.bytes();
    let again = w
        .store
        .replace_expired_app_endpoint(&alice, &a.id, &actor.endpoint, actor.generation, &refreshed)
        .unwrap();
    assert!(matches!(&again, EndpointRecovery::Replaced { successor: s, replayed: true, .. } if s.id == successor.id));
    assert!(w.bytes() == before);
    // The View binds E2/g2 from its window.
    let e2 = AgentActor::of(&successor);
    assert_eq!(
        w.store.bind_app_view(&alice, &e2, &refreshed).unwrap().outcome,
        AppBindOutcome::Bound
    );

    // Once E2 itself expired and was replaced by E3, the old selector is stale.
    w.clock.advance(LEASE);
    let EndpointRecovery::Replaced { successor: e3, .. } = w
        .store
        .replace_expired_app_endpoint(&alice, &a.id, &e2.endpoint, e2.generation, &refreshed)
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(e3.generation, actor.generation + 2);
    assert!(matches!(
        w.store
            .replace_expired_app_endpoint(&alice, &a.id, &actor.endpoint, actor.generation, &refreshed),
        Err(Error::StaleGeneration { .. })
    ));
    assert_eq!(w.count("SELECT count(*) FROM app_endpoint_replacements"), 2);
}

#[test]
fn a_detached_or_replaced_endpoint_is_not_an_expired_one() {
    let (mut w, alice, a, actor, _cv) = setup();
    let f = fence(1);
    let v = view(&f, Some(WINDOW));
    w.store.bind_app_view(&alice, &actor, &v).unwrap();
    // Detach clears both hashes: no replacement.
    w.store.detach_endpoint(&alice, &a.id, &actor.endpoint).unwrap();
    assert_eq!(hashes(&mut w, &actor.endpoint), (None, None));
    assert!(matches!(
        w.store
            .replace_expired_app_endpoint(&alice, &a.id, &actor.endpoint, actor.generation, &v),
        Err(Error::EndpointNotCurrent { .. })
    ));
    // An ordinary replacement (a new attach) too.
    let k = w.key();
    let e2 = AgentActor::of(&w.store.attach_endpoint(&alice, &a.id, LEASE, &k).unwrap().value);
    w.store.bind_app_view(&alice, &e2, &v).unwrap();
    let k = w.key();
    w.store.attach_endpoint(&alice, &a.id, LEASE, &k).unwrap();
    assert_eq!(hashes(&mut w, &e2.endpoint), (None, None));
    assert!(matches!(
        w.store
            .replace_expired_app_endpoint(&alice, &a.id, &e2.endpoint, e2.generation, &v),
        Err(Error::EndpointNotCurrent { .. })
    ));
}

#[test]
fn a_host_held_endpoint_takes_no_view_and_a_push_carrier_clears_the_app_binding() {
    let (mut w, alice, a, actor, _cv) = setup();
    let f = fence(1);
    let v = view(&f, Some(WINDOW));
    w.store.bind_app_view(&alice, &actor, &v).unwrap();
    let ep = w
        .store
        .register_wake_carrier(&a.id, &actor.endpoint, actor.generation)
        .unwrap();
    assert_eq!(ep.app_host_id, None);
    assert_eq!(hashes(&mut w, &actor.endpoint), (None, None));
    assert!(matches!(
        w.store.acquire_app_wake(&alice, &actor, &v, CLAIM),
        Err(Error::AppViewNotBound(_))
    ));
}

#[test]
fn fences_windows_and_claim_leases_are_bounded_before_anything_is_read() {
    let (mut w, alice, _a, actor, _cv) = setup();
    let before = w.bytes();
    let long_window = "w".repeat(MAX_WINDOW_KEY_BYTES);
    let too_long = "w".repeat(MAX_WINDOW_KEY_BYTES + 1);
    let bad_fences = [
        format!("{APP_BINDING_PREFIX}{}", "a".repeat(31)),
        format!("{APP_BINDING_PREFIX}{}", "a".repeat(33)),
        format!("{APP_BINDING_PREFIX}{}", "A".repeat(32)),
        format!("wc_host_binding_{}", "a".repeat(32)),
        String::new(),
    ];
    for f in &bad_fences {
        assert!(
            matches!(
                w.store.bind_app_view(&alice, &actor, &view(f, None)),
                Err(Error::InvalidInput { field: "bindingId", .. })
            ),
            "{f}"
        );
    }
    let f = fence(1);
    for bad in [too_long.as_str(), "", "a\nb"] {
        assert!(matches!(
            w.store.bind_app_view(&alice, &actor, &view(&f, Some(bad))),
            Err(Error::InvalidInput { field: "window", .. })
        ));
    }
    assert!(w.bytes() == before);
    // At the limit: accepted.
    let v = view(&f, Some(&long_window));
    w.store.bind_app_view(&alice, &actor, &v).unwrap();
    assert!(matches!(
        w.store
            .acquire_app_wake(&alice, &actor, &v, MAX_CLAIM + Duration::from_secs(1)),
        Err(Error::InvalidInput {
            field: "claimLease",
            ..
        })
    ));
    w.store.acquire_app_wake(&alice, &actor, &v, MAX_CLAIM).unwrap();
}

#[test]
fn neither_the_fence_nor_the_window_nor_the_consume_token_reaches_the_audit_log() {
    let (mut w, alice, _a, actor, cv) = setup();
    let f = fence(0xabc);
    let v = view(&f, Some("window-secret"));
    w.store.bind_app_view(&alice, &actor, &v).unwrap();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let ticket = prepared(&mut w, &alice, &actor, &v);
    w.store.unbind_app_view(&alice, &actor, &v).unwrap();
    let events = w.store.communication_events(0, None, None, 100).unwrap();
    let kinds: Vec<AuditKind> = events.iter().map(|e| e.kind).collect();
    assert!(kinds.contains(&AuditKind::AppViewBound) && kinds.contains(&AuditKind::AppViewUnbound));
    let everything = format!("{events:?} {} {v:?}", serde_json::to_string(&events).unwrap());
    let (binding, window) = hashes(&mut w, &actor.endpoint);
    for secret in [f.as_str(), "window-secret", ticket.consume_token.as_str()]
        .into_iter()
        .chain(binding.as_deref())
        .chain(window.as_deref())
    {
        assert!(!everything.contains(secret), "the audit log shows {secret:?}");
    }
}

#[test]
fn an_accepted_turn_that_never_consumes_holds_the_agent_for_the_wait_only() {
    let (mut w, alice, _a, actor, cv) = setup();
    let f = fence(1);
    let v = view(&f, None);
    w.store.bind_app_view(&alice, &actor, &v).unwrap();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let ticket = prepared(&mut w, &alice, &actor, &v);
    w.store
        .finish_app_dispatch(&alice, &actor, &v, &ticket.attempt.id, DispatchOutcome::Accepted)
        .unwrap();
    w.post(&alice, &cv, Acting::Human, "y").unwrap();
    // Within the wait (renewing the lease as the heartbeat does): still the accepted attempt.
    w.clock.advance(MAX_ACCEPTED_WAIT - Duration::from_secs(1));
    w.store.bind_app_view(&alice, &actor, &v).unwrap();
    assert!(matches!(
        w.store.acquire_app_wake(&alice, &actor, &v, CLAIM).unwrap(),
        AppAcquire::Open { attempt } if attempt.id == ticket.attempt.id
    ));
    // At the wait: settled unknown, and the next wake is claimed; the first is never re-sent.
    w.clock.advance(Duration::from_secs(1));
    let AppAcquire::Claimed { claim } = w.store.acquire_app_wake(&alice, &actor, &v, CLAIM).unwrap() else {
        panic!("the next wake was not claimed")
    };
    assert_ne!(claim.wake.id, ticket.wake.id);
    assert_eq!(attempt_state(&mut w, &ticket.attempt.id), "delivery_unknown");
    // A late turn may still prove it ran.
    w.store
        .consume_wake(&alice, &actor, &ticket.wake.id, &ticket.consume_token)
        .unwrap();
}

#[test]
fn another_principals_endpoint_is_not_found_like_a_missing_one_and_nothing_changes() {
    let (mut w, alice, _a, actor, cv) = setup();
    let f = fence(1);
    let v = view(&f, Some(WINDOW));
    w.store.bind_app_view(&alice, &actor, &v).unwrap();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let AppAcquire::Claimed { claim } = w.store.acquire_app_wake(&alice, &actor, &v, CLAIM).unwrap() else {
        panic!()
    };
    let bob = w.bob.clone();
    let missing = AgentActor {
        agent: crate::id::new_id(AGENT_ID_PREFIX),
        ..actor.clone()
    };
    let before = w.bytes();
    for who in [&actor, &missing] {
        let refusals = [
            w.store.bind_app_view(&bob, who, &v).map(drop),
            w.store.app_carrier_state(&bob, who, &v).map(drop),
            w.store.acquire_app_wake(&bob, who, &v, CLAIM).map(drop),
            w.store.prepare_app_dispatch(&bob, who, &v, &claim.attempt.id).map(drop),
            w.store
                .finish_app_dispatch(&bob, who, &v, &claim.attempt.id, DispatchOutcome::Unknown)
                .map(drop),
            w.store.unbind_app_view(&bob, who, &v).map(drop),
            w.store
                .replace_expired_app_endpoint(&bob, &who.agent, &who.endpoint, who.generation, &v)
                .map(drop),
        ];
        for r in refusals {
            assert!(matches!(r, Err(Error::AgentNotFound(_))), "{r:?}");
        }
    }
    assert!(w.bytes() == before, "nothing changed");
}

#[test]
fn an_idle_heartbeat_is_answered_while_another_connection_holds_the_write_lock() {
    let db = crate::testing::TestDb::new();
    let mut w = world_over(db.open().unwrap());
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let k = w.key();
    let actor = AgentActor::of(&w.store.attach_endpoint(&alice, &a.id, LEASE, &k).unwrap().value);
    let f = fence(1);
    let v = view(&f, None);
    w.store.bind_app_view(&alice, &actor, &v).unwrap();
    // Another connection writes (and holds the lock) meanwhile.
    let mut other = db.open().unwrap();
    let (held, _) = other.begin_immediate().unwrap();
    held.execute("UPDATE agents SET updated_at = updated_at WHERE id = ?1", [&a.id])
        .unwrap();
    // The heartbeat and an idle acquire need no write: they are answered at once.
    let state = w.store.app_carrier_state(&alice, &actor, &v).unwrap();
    assert_eq!(state.holder, AppBindingHolder::ThisView);
    assert_eq!(
        w.store.acquire_app_wake(&alice, &actor, &v, CLAIM).unwrap(),
        AppAcquire::Idle
    );
    held.commit().unwrap();
}
