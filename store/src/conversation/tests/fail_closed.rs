//! A lifecycle string this build does not know fails closed wherever the store *filters* on
//! states in SQL, not only where it parses a row: each case corrupts one row and shows that the
//! operation is refused and the database is unchanged byte for byte (before the fix each of
//! these filters silently skipped the row).

use super::*;

fn assert_corrupt(err: Error, table: &str) {
    assert!(
        matches!(&err, Error::CorruptRow { table: t, .. } if *t == table),
        "expected a corrupt {table} row, got {err}"
    );
}

/// Alice, one agent with a live wake-capable endpoint, a conversation with it.
fn setup() -> (World, Caller, Agent, AgentActor, Conversation) {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    let cv = w.conversation(&alice, &[&a]);
    (w, alice, a, actor, cv)
}

#[test]
fn queued_only_inbox_read_refuses_an_unknown_delivery_state() {
    let (mut w, alice, _a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    w.store
        .autocommit()
        .execute("UPDATE deliveries SET state = 'archived'", [])
        .unwrap();
    let err = w.store.read_inbox(&alice, &actor, 0, 10, true).unwrap_err();
    assert_corrupt(err, "deliveries");
}

#[test]
fn attach_refuses_when_the_agents_endpoint_has_an_unknown_state() {
    let (mut w, alice, a, _actor, _cv) = setup();
    w.store
        .autocommit()
        .execute("UPDATE agent_endpoints SET state = 'suspended'", [])
        .unwrap();
    let before = w.bytes();
    let err = w.store.attach_endpoint(&alice, &a.id, LEASE, "again").unwrap_err();
    assert_corrupt(err, "agent_endpoints");
    assert!(w.bytes() == before, "the refused attach changed the database");
}

#[test]
fn a_post_refuses_to_coalesce_into_an_unknown_wake_state() {
    let (mut w, alice, _a, _actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "first").unwrap();
    w.store
        .autocommit()
        .execute("UPDATE wakes SET state = 'snoozed'", [])
        .unwrap();
    let before = w.bytes();
    let err = w.post(&alice, &cv, Acting::Human, "second").unwrap_err();
    assert_corrupt(err, "wakes");
    assert!(w.bytes() == before, "the refused post changed the database");
}

#[test]
fn claim_refuses_an_unknown_wake_state() {
    let (mut w, alice, _a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    w.store
        .autocommit()
        .execute("UPDATE wakes SET state = 'snoozed'", [])
        .unwrap();
    let before = w.bytes();
    let err = w.store.claim_wake(&alice, &actor, CLAIM).unwrap_err();
    assert_corrupt(err, "wakes");
    assert!(w.bytes() == before, "the refused claim changed the database");
}

#[test]
fn reconciliation_refuses_an_unknown_attempt_state() {
    let (mut w, alice, a, actor, cv) = setup();
    w.post(&alice, &cv, Acting::Human, "x").unwrap();
    w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    w.store
        .autocommit()
        .execute("UPDATE wake_attempts SET state = 'teleported'", [])
        .unwrap();
    let before = w.bytes();
    let err = w.store.detach_endpoint(&alice, &a.id, &actor.endpoint).unwrap_err();
    assert_corrupt(err, "wake_attempts");
    let err = w.store.reconcile_takeover().unwrap_err();
    assert_corrupt(err, "wake_attempts");
    assert!(w.bytes() == before, "the refused reconciliation changed the database");
}

#[test]
fn an_unknown_conversation_state_still_takes_an_open_slot() {
    let mut w = world();
    let alice = w.alice.clone();
    for _ in 0..bounds::MAX_OPEN_CONVERSATIONS_PER_PRINCIPAL {
        w.conversation(&alice, &[]);
    }
    let first = w.store.list_conversations(&alice, None, 1).unwrap().remove(0);
    w.store.close_conversation(&alice, &first.id).unwrap();
    // The closed one's state becomes one this build does not know: it must count as open.
    w.store
        .autocommit()
        .execute("UPDATE conversations SET state = 'archived' WHERE id = ?1", [&first.id])
        .unwrap();
    let before = w.bytes();
    let new = NewConversation {
        title: "one more".into(),
        agents: vec![],
    };
    let err = w.store.create_conversation(&alice, &new, "over").unwrap_err();
    assert!(matches!(err, Error::LimitReached { .. }), "{err}");
    assert!(w.bytes() == before);
}
