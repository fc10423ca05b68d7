//! Bootstrap and explicit activation of a pending wake by an already-running turn.

use super::*;

fn setup() -> (World, Caller, Agent, AgentActor, Conversation) {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    // Not wake-capable: explicit activation needs no carrier.
    let k = w.key();
    let ep = w.store.attach_endpoint(&alice, &a.id, LEASE, &k).unwrap().value;
    let cv = w.conversation(&alice, &[&a]);
    (w, alice, a, AgentActor::of(&ep), cv)
}

#[test]
fn activation_crosses_the_fence_and_an_exact_retry_recovers_the_same_token() {
    let (mut w, alice, _a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "one").unwrap();
    w.post(&alice, &cv, Acting::Human, "two").unwrap();
    let boot = w.store.bootstrap(&alice, &actor, Some(&cv.id), None).unwrap();
    assert_eq!(boot.queued_count, 2);
    assert_eq!(boot.conversation.as_ref().unwrap().message_count, 2);
    let wake = boot.wake.clone().unwrap();
    assert_eq!((wake.state, wake.delivery_count), (WakeState::Pending, 2));
    assert!(!boot.endpoint.wake_capable);

    let first = w.store.activate_wake(&alice, &actor, &wake.id, "act-1").unwrap();
    assert!(first.state_changed && !first.replayed);
    assert_eq!(first.value.wake.state, WakeState::Dispatched);
    let before = w.bytes();
    let again = w.store.activate_wake(&alice, &actor, &wake.id, "act-1").unwrap();
    assert!(again.replayed && !again.state_changed);
    assert_eq!(again.value.attempt.id, first.value.attempt.id);
    assert_eq!(again.value.consume_token, first.value.consume_token);
    assert!(w.bytes() == before, "an exact retry changed the database");
    // The endpoint did not become wake-capable.
    assert!(
        !w.store
            .get_endpoint(&alice, &actor.agent, &actor.endpoint)
            .unwrap()
            .wake_capable
    );

    // The woken turn replies under the wake's identity, then consumes the wake.
    let reply = NewMessage {
        conversation: cv.id.clone(),
        acting: Acting::Agent(actor.clone()),
        body: "done".into(),
        reply_to: None,
        idempotency: IdempotencyKey::WakeReply {
            wake: wake.id.clone(),
            index: 0,
        },
    };
    assert_eq!(w.store.post_message(&alice, &reply).unwrap().value.seq, 3);
    let consumed = w
        .store
        .consume_wake(&alice, &actor, &wake.id, &first.value.consume_token)
        .unwrap();
    assert_eq!(consumed.value.state, WakeState::Consumed);
    // Deliveries were not consumed by consuming the wake.
    assert_eq!(w.store.read_inbox(&alice, &actor, 0, 10, true).unwrap().len(), 2);
}

#[test]
fn changed_reuse_of_an_activation_key_fails_closed() {
    let (mut w, alice, a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "one").unwrap();
    let wake = w.store.list_wakes(&alice, &actor, 1).unwrap().remove(0);
    let t = w.store.activate_wake(&alice, &actor, &wake.id, "act").unwrap().value;
    w.store
        .consume_wake(&alice, &actor, &wake.id, &t.consume_token)
        .unwrap();
    // Wakes list newest first by creation time (ties by id): the second is a moment later.
    w.clock.advance(std::time::Duration::from_micros(1));
    w.post(&alice, &cv, Acting::Human, "two").unwrap();
    let second = w.store.list_wakes(&alice, &actor, 1).unwrap().remove(0);
    assert_ne!(second.id, wake.id);
    let before = w.bytes();
    // The same key for another wake.
    assert!(matches!(
        w.store.activate_wake(&alice, &actor, &second.id, "act"),
        Err(Error::IdempotencyConflict { .. })
    ));
    // The same key through a replacement endpoint.
    assert!(w.bytes() == before);
    let replacement = w.attach(&alice, &a);
    assert!(matches!(
        w.store.activate_wake(&alice, &replacement, &wake.id, "act"),
        Err(Error::IdempotencyConflict { .. })
    ));
}

#[test]
fn only_a_pending_wake_can_be_activated_and_only_one_turn_at_a_time() {
    let (mut w, alice, a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "one").unwrap();
    let wake = w.store.list_wakes(&alice, &actor, 1).unwrap().remove(0);
    w.store.activate_wake(&alice, &actor, &wake.id, "a1").unwrap();
    // Already dispatched: a second activation under another key is refused.
    assert!(matches!(
        w.store.activate_wake(&alice, &actor, &wake.id, "a2"),
        Err(Error::InvalidWakeState { .. })
    ));
    // A newer pending wake cannot start a second concurrent turn.
    w.post(&alice, &cv, Acting::Human, "two").unwrap();
    let newer = w.store.list_wakes(&alice, &actor, 1).unwrap().remove(0);
    let before = w.bytes();
    assert!(matches!(
        w.store.activate_wake(&alice, &actor, &newer.id, "a3"),
        Err(Error::LimitReached { limit: 1, .. })
    ));
    assert!(w.bytes() == before);
    // Another principal's wake id is not found, exactly like a missing one.
    let bob = w.bob.clone();
    let b = w.agent(&bob);
    let bob_actor = w.attach(&bob, &b);
    let foreign = w.store.activate_wake(&bob, &bob_actor, &newer.id, "b").unwrap_err();
    let missing = crate::id::new_id(WAKE_ID_PREFIX);
    let none = w.store.activate_wake(&bob, &bob_actor, &missing, "b").unwrap_err();
    assert_eq!(
        foreign.to_string().replace(&newer.id, "ID"),
        none.to_string().replace(&missing, "ID")
    );
    let _ = a;
}
