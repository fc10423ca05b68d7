//! Wake intents, attempts, the dispatch fence, exact consume and reconciliation.

use super::*;

/// Alice, one agent with a live wake-capable endpoint, a conversation with it.
fn setup() -> (World, Caller, Agent, AgentActor, Conversation) {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    let cv = w.conversation(&alice, &[&a]);
    (w, alice, a, actor, cv)
}

fn attempt_states(w: &mut World, alice: &Caller, actor: &AgentActor, wake: &str) -> Vec<AttemptState> {
    w.store
        .wake_attempts(alice, actor, wake, bounds::MAX_PAGE_LIMIT)
        .unwrap()
        .into_iter()
        .map(|a| a.state)
        .collect()
}

#[test]
fn fifty_posts_make_one_pending_wake_with_count_fifty() {
    let (mut w, alice, _a, actor, cv) = setup();
    for i in 0..50 {
        w.post(&alice, &cv, Acting::Human, &format!("m{i}")).unwrap();
    }
    let wakes = w.store.list_wakes(&alice, &actor, 10).unwrap();
    assert_eq!(wakes.len(), 1);
    assert_eq!(wakes[0].state, WakeState::Pending);
    assert_eq!(wakes[0].delivery_count, 50);
    let inbox = w.store.read_inbox(&alice, &actor, 0, 100, true).unwrap();
    assert_eq!(inbox.len(), 50);
    assert_eq!(wakes[0].first_delivery_order, inbox[0].delivery_order);
    assert_eq!(wakes[0].high_water_order, inbox[49].delivery_order);
}

#[test]
fn claim_dispatch_consume_happy_path_and_exact_retry() {
    let (mut w, alice, _a, actor, cv) = setup();
    let m = w.post(&alice, &cv, Acting::Human, "wake up").unwrap();
    let claim = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    assert_eq!(claim.wake.state, WakeState::Claimed);
    assert_eq!(claim.attempt.state, AttemptState::Claimed);
    assert_eq!(claim.attempt.generation, 1);
    // Deliveries arriving while claimed (before the fence) still coalesce into it.
    w.post(&alice, &cv, Acting::Human, "and this").unwrap();
    let ticket = w.store.prepare_dispatch(&alice, &actor, &claim.attempt.id).unwrap();
    assert_eq!(ticket.wake.state, WakeState::Dispatched);
    assert_eq!(ticket.wake.delivery_count, 2);
    assert!(ticket.consume_token.starts_with("wct_"));
    let fin = w
        .store
        .finish_dispatch(&alice, &actor, &claim.attempt.id, DispatchOutcome::Accepted)
        .unwrap();
    assert_eq!(fin.value.state, AttemptState::Accepted);
    let consumed = w
        .store
        .consume_wake(&alice, &actor, &claim.wake.id, &ticket.consume_token)
        .unwrap();
    assert!(consumed.state_changed);
    assert_eq!(consumed.value.state, WakeState::Consumed);
    let again = w
        .store
        .consume_wake(&alice, &actor, &claim.wake.id, &ticket.consume_token)
        .unwrap();
    assert!(!again.state_changed);
    // Consuming the wake consumed no delivery.
    let queued = w.store.read_inbox(&alice, &actor, 0, 10, true).unwrap();
    assert_eq!(queued.len(), 2);
    assert_eq!(queued[0].message.id, m.id);
    assert_eq!(
        attempt_states(&mut w, &alice, &actor, &claim.wake.id),
        vec![AttemptState::Consumed]
    );
    // The token is stored only as a hash.
    let raw = w.count(&format!(
        "SELECT count(*) FROM wake_attempts WHERE consume_token_hash = '{}'",
        ticket.consume_token
    ));
    assert_eq!(raw, 0);
}

#[test]
fn claim_with_a_stale_generation_is_refused() {
    let (mut w, alice, a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let newer = w.attach(&alice, &a);
    let err = w.store.claim_wake(&alice, &actor, CLAIM).unwrap_err();
    assert!(
        matches!(
            err,
            Error::EndpointNotCurrent {
                state: EndpointState::Replaced,
                ..
            }
        ),
        "{err}"
    );
    let mut stale = newer.clone();
    stale.generation = 1;
    let err = w.store.claim_wake(&alice, &stale, CLAIM).unwrap_err();
    assert!(
        matches!(
            err,
            Error::StaleGeneration {
                given: 1,
                current: 2,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(w.count("SELECT count(*) FROM wake_attempts"), 0);
    assert!(w.store.claim_wake(&alice, &newer, CLAIM).unwrap().is_some());
}

#[test]
fn an_expired_pre_fence_claim_returns_the_same_wake_to_pending() {
    let (mut w, alice, _a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let c1 = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    // While claimed, nobody else gets it.
    assert_eq!(w.store.claim_wake(&alice, &actor, CLAIM).unwrap(), None);
    w.clock.advance(CLAIM);
    let err = w.store.prepare_dispatch(&alice, &actor, &c1.attempt.id).unwrap_err();
    assert!(matches!(err, Error::ClaimExpired(_)), "{err}");
    let wakes = w.store.list_wakes(&alice, &actor, 10).unwrap();
    assert_eq!(wakes.len(), 1);
    assert_eq!(wakes[0].id, c1.wake.id);
    assert_eq!(wakes[0].state, WakeState::Pending);
    let c2 = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    assert_eq!(c2.wake.id, c1.wake.id, "the same logical wake");
    assert_ne!(c2.attempt.id, c1.attempt.id);
    // A lapsed claim is also released by the next claim, or by the host's sweep.
    w.clock.advance(CLAIM);
    assert_eq!(w.store.release_expired_claims().unwrap(), 1);
    assert_eq!(
        attempt_states(&mut w, &alice, &actor, &c1.wake.id),
        vec![AttemptState::Released, AttemptState::Released]
    );
}

#[test]
fn post_fence_failure_is_delivery_unknown_and_never_redispatched() {
    let (mut w, alice, _a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let c = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    let t = w.store.prepare_dispatch(&alice, &actor, &c.attempt.id).unwrap();
    // A retried prepare after the fence is refused: no second token, no second dispatch.
    assert!(matches!(
        w.store.prepare_dispatch(&alice, &actor, &c.attempt.id),
        Err(Error::InvalidAttemptState {
            state: AttemptState::Dispatched,
            ..
        })
    ));
    let f = w
        .store
        .finish_dispatch(&alice, &actor, &c.attempt.id, DispatchOutcome::Unknown)
        .unwrap();
    assert_eq!(f.value.state, AttemptState::DeliveryUnknown);
    assert!(matches!(
        w.store
            .finish_dispatch(&alice, &actor, &c.attempt.id, DispatchOutcome::Accepted),
        Err(Error::InvalidAttemptState {
            state: AttemptState::DeliveryUnknown,
            ..
        })
    ));
    w.clock.advance(CLAIM * 2);
    assert_eq!(
        w.store.claim_wake(&alice, &actor, CLAIM).unwrap(),
        None,
        "not redispatched"
    );
    // The turn may still have run: the exact token still consumes it.
    let consumed = w
        .store
        .consume_wake(&alice, &actor, &c.wake.id, &t.consume_token)
        .unwrap();
    assert_eq!(consumed.value.state, WakeState::Consumed);
    // New deliveries make a new wake.
    w.post(&alice, &cv, Acting::Human, "y").unwrap();
    let next = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    assert_ne!(next.wake.id, c.wake.id);
    assert_eq!(next.wake.delivery_count, 1);
}

#[test]
fn consume_with_any_one_field_wrong_is_refused() {
    let (mut w, alice, a, actor, cv) = setup();
    let bob = w.bob.clone();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let pending_before = w.store.list_wakes(&alice, &actor, 1).unwrap()[0].clone();
    let fake_token = format!("wct_{}", "0".repeat(64));
    // Not yet past the fence.
    assert!(matches!(
        w.store.consume_wake(&alice, &actor, &pending_before.id, &fake_token),
        Err(Error::InvalidWakeState {
            state: WakeState::Pending,
            ..
        })
    ));
    let c = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    let t = w.store.prepare_dispatch(&alice, &actor, &c.attempt.id).unwrap();
    // Wrong token.
    let err = w
        .store
        .consume_wake(&alice, &actor, &c.wake.id, &fake_token)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::ConsumeRefused {
                reason: "the consume token does not match",
                ..
            }
        ),
        "{err}"
    );
    // Wrong wake id (well-formed, nonexistent).
    let other_wake = crate::id::new_id(WAKE_ID_PREFIX);
    assert!(matches!(
        w.store.consume_wake(&alice, &actor, &other_wake, &t.consume_token),
        Err(Error::WakeNotFound(_))
    ));
    // Wrong target agent: another agent of the same principal cannot consume it.
    let other = w.agent(&alice);
    let other_actor = w.attach(&alice, &other);
    assert!(matches!(
        w.store.consume_wake(&alice, &other_actor, &c.wake.id, &t.consume_token),
        Err(Error::WakeNotFound(_))
    ));
    // Wrong generation.
    let mut stale = actor.clone();
    stale.generation = 7;
    assert!(matches!(
        w.store.consume_wake(&alice, &stale, &c.wake.id, &t.consume_token),
        Err(Error::StaleGeneration { .. })
    ));
    // Wrong principal.
    assert!(matches!(
        w.store.consume_wake(&bob, &actor, &c.wake.id, &t.consume_token),
        Err(Error::AgentNotFound(_))
    ));
    // Wrong (replacement) endpoint: the new endpoint did not receive this dispatch.
    let newer = w.attach(&alice, &a);
    let err = w
        .store
        .consume_wake(&alice, &newer, &c.wake.id, &t.consume_token)
        .unwrap_err();
    assert!(matches!(err, Error::ConsumeRefused { .. }), "{err}");
    // The old endpoint is no longer current.
    assert!(matches!(
        w.store.consume_wake(&alice, &actor, &c.wake.id, &t.consume_token),
        Err(Error::EndpointNotCurrent { .. })
    ));
    assert_eq!(w.count("SELECT count(*) FROM wakes WHERE state = 'consumed'"), 0);
    assert_eq!(
        attempt_states(&mut w, &alice, &newer, &c.wake.id),
        vec![AttemptState::DeliveryUnknown]
    );
}

#[test]
fn detach_reconciles_claims_and_dispatches() {
    let (mut w, alice, a, actor, cv) = setup();
    let b = w.agent(&alice);
    let actor_b = w.attach(&alice, &b);
    w.store.add_agent_participant(&alice, &cv.id, &b.id).unwrap();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let ca = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    let cb = w.store.claim_wake(&alice, &actor_b, CLAIM).unwrap().unwrap();
    w.store.prepare_dispatch(&alice, &actor_b, &cb.attempt.id).unwrap();
    w.store.detach_endpoint(&alice, &a.id, &actor.endpoint).unwrap();
    w.store.detach_endpoint(&alice, &b.id, &actor_b.endpoint).unwrap();
    let a2 = w.attach(&alice, &a);
    let b2 = w.attach(&alice, &b);
    assert_eq!(
        attempt_states(&mut w, &alice, &a2, &ca.wake.id),
        vec![AttemptState::Released]
    );
    assert_eq!(w.store.list_wakes(&alice, &a2, 1).unwrap()[0].state, WakeState::Pending);
    assert_eq!(
        attempt_states(&mut w, &alice, &b2, &cb.wake.id),
        vec![AttemptState::DeliveryUnknown]
    );
    assert_eq!(
        w.store.list_wakes(&alice, &b2, 1).unwrap()[0].state,
        WakeState::Dispatched
    );
    // A's wake goes out again through the new endpoint; B's does not.
    assert_eq!(
        w.store.claim_wake(&alice, &a2, CLAIM).unwrap().unwrap().wake.id,
        ca.wake.id
    );
    assert_eq!(w.store.claim_wake(&alice, &b2, CLAIM).unwrap(), None);
}

#[test]
fn takeover_reconciliation_releases_claims_and_marks_dispatches_unknown() {
    let (mut w, alice, a, actor, cv) = setup();
    let b = w.agent(&alice);
    let actor_b = w.attach(&alice, &b);
    w.store.add_agent_participant(&alice, &cv.id, &b.id).unwrap();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let ca = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    let cb = w.store.claim_wake(&alice, &actor_b, CLAIM).unwrap().unwrap();
    w.store.prepare_dispatch(&alice, &actor_b, &cb.attempt.id).unwrap();
    let report = w.store.reconcile_takeover().unwrap();
    assert_eq!(
        report,
        ReconcileReport {
            released_claims: 1,
            marked_unknown: 1,
            expired_endpoints: 0,
            wake_carriers_cleared: 2,
        }
    );
    assert_eq!(
        attempt_states(&mut w, &alice, &actor, &ca.wake.id),
        vec![AttemptState::Released]
    );
    assert_eq!(
        attempt_states(&mut w, &alice, &actor_b, &cb.wake.id),
        vec![AttemptState::DeliveryUnknown]
    );
    // The successor must re-register its carriers before claiming.
    assert!(matches!(
        w.store.claim_wake(&alice, &actor, CLAIM),
        Err(Error::NotWakeCapable(_))
    ));
    w.store
        .register_wake_carrier(&a.id, &actor.endpoint, actor.generation)
        .unwrap();
    assert_eq!(
        w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap().wake.id,
        ca.wake.id
    );
    // Running it again finds only the new claim.
    assert_eq!(w.store.reconcile_takeover().unwrap().released_claims, 1);
}

#[test]
fn wake_reply_identity_needs_the_fence_and_replays_across_replacement() {
    let (mut w, alice, a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "question").unwrap();
    let wake = w.store.list_wakes(&alice, &actor, 1).unwrap()[0].clone();
    let reply = |actor: &AgentActor, index: u32, body: &str| NewMessage {
        conversation: cv.id.clone(),
        acting: Acting::Agent(actor.clone()),
        body: body.into(),
        reply_to: None,
        idempotency: IdempotencyKey::WakeReply {
            wake: wake.id.clone(),
            index,
        },
    };
    // A pending wake cannot mint a reply identity.
    assert!(matches!(
        w.store.post_message(&alice, &reply(&actor, 0, "answer")),
        Err(Error::InvalidWakeState {
            state: WakeState::Pending,
            ..
        })
    ));
    let c = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    w.store.prepare_dispatch(&alice, &actor, &c.attempt.id).unwrap();
    let first = w.store.post_message(&alice, &reply(&actor, 0, "answer")).unwrap();
    assert!(first.state_changed);
    // An exact retry recovers it, even through a replacement endpoint.
    let newer = w.attach(&alice, &a);
    let again = w.store.post_message(&alice, &reply(&newer, 0, "answer")).unwrap();
    assert!(again.replayed);
    assert_eq!(again.value.id, first.value.id);
    // A changed retry at an occupied index conflicts; another index is another reply.
    assert!(matches!(
        w.store.post_message(&alice, &reply(&newer, 0, "different")),
        Err(Error::IdempotencyConflict { .. })
    ));
    let second = w.store.post_message(&alice, &reply(&newer, 1, "follow-up")).unwrap();
    assert!(second.state_changed);
    assert_eq!(second.value.seq, 3);
    // Only the agent that was woken can use the wake's identity.
    let other = w.agent(&alice);
    w.store.add_agent_participant(&alice, &cv.id, &other.id).unwrap();
    let other_actor = w.attach(&alice, &other);
    assert!(matches!(
        w.store.post_message(&alice, &reply(&other_actor, 5, "not mine")),
        Err(Error::WakeNotFound(_))
    ));
}

#[test]
fn expiry_materialized_at_admission_reconciles_the_endpoints_attempts() {
    let (mut w, alice, a, actor, cv) = setup();
    let b = w.agent(&alice);
    let actor_b = w.attach(&alice, &b);
    w.store.add_agent_participant(&alice, &cv.id, &b.id).unwrap();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let ca = w.store.claim_wake(&alice, &actor, MAX_CLAIM).unwrap().unwrap();
    let cb = w.store.claim_wake(&alice, &actor_b, MAX_CLAIM).unwrap().unwrap();
    w.store.prepare_dispatch(&alice, &actor_b, &cb.attempt.id).unwrap();
    // Both leases run out; each endpoint's expiry is recorded the next time it is used.
    w.clock.advance(LEASE);
    for (agent, act) in [(&a, &actor), (&b, &actor_b)] {
        let err = w.store.list_wakes(&alice, act, 10).unwrap_err();
        assert!(matches!(err, Error::EndpointExpired { .. }), "{err}");
        let ep = w.store.get_endpoint(&alice, &agent.id, &act.endpoint).unwrap();
        assert_eq!(ep.state, EndpointState::Expired);
    }
    let a2 = w.attach(&alice, &a);
    let b2 = w.attach(&alice, &b);
    assert_eq!(
        attempt_states(&mut w, &alice, &a2, &ca.wake.id),
        vec![AttemptState::Released]
    );
    assert_eq!(
        attempt_states(&mut w, &alice, &b2, &cb.wake.id),
        vec![AttemptState::DeliveryUnknown]
    );
}

#[test]
fn an_unknown_attempt_state_fails_closed() {
    let (mut w, alice, _a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let c = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    w.store
        .autocommit()
        .execute("UPDATE wake_attempts SET state = 'teleported'", [])
        .unwrap();
    let err = w.store.prepare_dispatch(&alice, &actor, &c.attempt.id).unwrap_err();
    assert!(
        matches!(
            err,
            Error::CorruptRow {
                table: "wake_attempts",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("unknown wake attempt state \"teleported\""));
    assert_eq!(w.count("SELECT count(*) FROM wakes WHERE state = 'dispatched'"), 0);
}

#[test]
fn a_late_finish_after_the_agent_consumed_changes_nothing() {
    let (mut w, alice, _a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    let c = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    let t = w.store.prepare_dispatch(&alice, &actor, &c.attempt.id).unwrap();
    w.store
        .consume_wake(&alice, &actor, &c.wake.id, &t.consume_token)
        .unwrap();
    let late = w
        .store
        .finish_dispatch(&alice, &actor, &c.attempt.id, DispatchOutcome::Unknown)
        .unwrap();
    assert!(!late.state_changed);
    assert_eq!(late.value.state, AttemptState::Consumed);
}
