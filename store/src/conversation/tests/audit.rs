//! The audit log: one event per change, in the change's transaction, and never a message
//! body, description, specialty label, idempotency key or consume token — in events or in
//! `Debug` output.

use super::*;

const BODY: &str = "the-secret-body-text";
const DESCRIPTION: &str = "a-private-description";
const SPECIALTY: &str = "covert-specialty";
const KEY: &str = "idem-key-that-must-not-leak";

#[test]
fn the_whole_flow_is_audited_without_content() {
    let mut w = world();
    let alice = w.alice.clone();
    let mut c = card("audited");
    c.description = DESCRIPTION.into();
    c.specialties = vec![SPECIALTY.into()];
    let a = w.store.create_agent(&alice, &c, KEY).unwrap().value;
    let mut c2 = c.clone();
    c2.display_name = "Renamed".into();
    w.store.update_agent(&alice, &a.id, 1, &c2).unwrap();
    let actor = w.attach(&alice, &a);
    let cv = w.conversation(&alice, &[&a]);
    let post = NewMessage {
        conversation: cv.id.clone(),
        acting: Acting::Human,
        body: BODY.into(),
        reply_to: None,
        idempotency: IdempotencyKey::Key(format!("{KEY}-post")),
    };
    let m = w.store.post_message(&alice, &post).unwrap().value;
    w.store.consume_delivery(&alice, &actor, &m.id).unwrap();
    let claim = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    let ticket = w.store.prepare_dispatch(&alice, &actor, &claim.attempt.id).unwrap();
    w.store
        .consume_wake(&alice, &actor, &ticket.wake.id, &ticket.consume_token)
        .unwrap();
    w.store.detach_endpoint(&alice, &a.id, &actor.endpoint).unwrap();
    w.store.close_conversation(&alice, &cv.id).unwrap();

    let events = w
        .store
        .communication_events(0, None, None, bounds::MAX_PAGE_LIMIT)
        .unwrap();
    let kinds: Vec<AuditKind> = events.iter().map(|e| e.kind).collect();
    use AuditKind as K;
    assert_eq!(
        kinds,
        [
            K::AgentCreated,
            K::AgentUpdated,
            K::EndpointAttached,
            K::ConversationCreated,
            K::WakeCreated,
            K::MessagePosted,
            K::DeliveryConsumed,
            K::WakeClaimed,
            K::WakeDispatched,
            K::WakeConsumed,
            K::EndpointDetached,
            K::ConversationClosed,
        ]
    );
    let posted = &events[5];
    assert_eq!(posted.detail["messageId"], m.id.as_str());
    assert_eq!(posted.detail["seq"], 1);
    assert_eq!(posted.detail["deliveries"], 1);
    assert_eq!(posted.conversation_id.as_deref(), Some(cv.id.as_str()));
    // Filtering by agent and conversation.
    let of_cv = w.store.communication_events(0, None, Some(&cv.id), 50).unwrap();
    assert_eq!(of_cv.len(), 4);

    let everything = format!("{events:?} {}", serde_json::to_string(&events).unwrap());
    for secret in [BODY, DESCRIPTION, SPECIALTY, KEY, ticket.consume_token.as_str()] {
        assert!(!everything.contains(secret), "the audit log shows {secret:?}");
    }
    // No digest of the principal either.
    assert!(!everything.contains(alice.principal().as_str()));
}

#[test]
fn debug_output_never_shows_bodies_descriptions_specialties_keys_or_tokens() {
    let mut w = world();
    let alice = w.alice.clone();
    let mut c = card("debugged");
    c.description = DESCRIPTION.into();
    c.specialties = vec![SPECIALTY.into()];
    let a = w.store.create_agent(&alice, &c, KEY).unwrap().value;
    let actor = w.attach(&alice, &a);
    let cv = w.conversation(&alice, &[&a]);
    let post = NewMessage {
        conversation: cv.id.clone(),
        acting: Acting::Human,
        body: BODY.into(),
        reply_to: None,
        idempotency: IdempotencyKey::Key(KEY.into()),
    };
    let m = w.store.post_message(&alice, &post).unwrap();
    let inbox = w.store.read_inbox(&alice, &actor, 0, 10, false).unwrap();
    let claim = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    let ticket = w.store.prepare_dispatch(&alice, &actor, &claim.attempt.id).unwrap();
    let shown = format!("{c:?} {a:?} {post:?} {m:?} {inbox:?} {ticket:?}");
    for secret in [BODY, DESCRIPTION, SPECIALTY, KEY, ticket.consume_token.as_str()] {
        assert!(!shown.contains(secret), "Debug shows {secret:?}: {shown}");
    }
    // What it does show is enough to debug with.
    assert!(shown.contains(&m.value.id) && shown.contains("body_bytes: 20"));
}
