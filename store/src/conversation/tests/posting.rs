//! Conversations, the post transaction, deliveries and idempotency.

use super::*;

#[test]
fn a_post_appends_with_the_next_seq_and_delivers_to_every_other_agent() {
    let mut w = world();
    let alice = w.alice.clone();
    let (a, b) = (w.agent(&alice), w.agent(&alice));
    let cv = w.conversation(&alice, &[&a, &b]);
    assert_eq!(cv.agents, vec![a.id.clone(), b.id.clone()]);
    let m1 = w.post(&alice, &cv, Acting::Human, "hello").unwrap();
    assert_eq!(m1.seq, 1);
    assert_eq!(m1.author, Author::Human);
    // Deliveries exist for agents with no endpoint at all.
    assert_eq!(w.count("SELECT count(*) FROM deliveries WHERE state = 'queued'"), 2);
    let actor_a = w.attach(&alice, &a);
    let m2 = w
        .post(&alice, &cv, Acting::Agent(actor_a.clone()), "hi, from a")
        .unwrap();
    assert_eq!(m2.seq, 2);
    assert_eq!(
        m2.author,
        Author::Agent {
            agent_id: a.id.clone(),
            endpoint_id: actor_a.endpoint.clone(),
            generation: 1
        }
    );
    // The author gets no delivery of its own message.
    let inbox_a = w.store.read_inbox(&alice, &actor_a, 0, 10, false).unwrap();
    assert_eq!(inbox_a.iter().map(|d| d.message.seq).collect::<Vec<_>>(), vec![1]);
    let actor_b = w.attach(&alice, &b);
    let inbox_b = w.store.read_inbox(&alice, &actor_b, 0, 10, false).unwrap();
    assert_eq!(inbox_b.iter().map(|d| d.message.seq).collect::<Vec<_>>(), vec![1, 2]);
    assert!(inbox_b[0].delivery_order < inbox_b[1].delivery_order);
    let c = w.store.get_conversation(&alice, &Acting::Human, &cv.id).unwrap();
    assert_eq!(c.message_count, 2);
}

#[test]
fn transcript_reads_use_an_exclusive_cursor_and_consume_nothing() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let cv = w.conversation(&alice, &[&a]);
    for i in 0..5 {
        w.post(&alice, &cv, Acting::Human, &format!("m{i}")).unwrap();
    }
    let page = w.store.read_transcript(&alice, &Acting::Human, &cv.id, 2, 2).unwrap();
    assert_eq!(page.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![3, 4]);
    let actor = w.attach(&alice, &a);
    let as_agent = w
        .store
        .read_transcript(&alice, &Acting::Agent(actor.clone()), &cv.id, 0, 10)
        .unwrap();
    assert_eq!(as_agent.len(), 5);
    assert_eq!(w.count("SELECT count(*) FROM deliveries WHERE state = 'queued'"), 5);
    // Inbox cursor is exclusive too.
    let all = w.store.read_inbox(&alice, &actor, 0, 10, false).unwrap();
    let after = w
        .store
        .read_inbox(&alice, &actor, all[1].delivery_order, 10, false)
        .unwrap();
    assert_eq!(after.len(), 3);
    assert_eq!(after[0].message.seq, 3);
}

#[test]
fn consume_delivery_is_desired_state_idempotent_and_never_touches_the_wake() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let cv = w.conversation(&alice, &[&a]);
    let m = w.post(&alice, &cv, Acting::Human, "do it").unwrap();
    let actor = w.attach(&alice, &a);
    let c = w.store.consume_delivery(&alice, &actor, &m.id).unwrap();
    assert!(c.state_changed);
    assert_eq!(c.value.state, DeliveryState::Consumed);
    let again = w.store.consume_delivery(&alice, &actor, &m.id).unwrap();
    assert!(!again.state_changed);
    assert_eq!(again.value.consumed_at, c.value.consumed_at);
    assert!(w.store.read_inbox(&alice, &actor, 0, 10, true).unwrap().is_empty());
    let wakes = w.store.list_wakes(&alice, &actor, 10).unwrap();
    assert_eq!(wakes.len(), 1);
    assert_eq!(wakes[0].state, WakeState::Pending);
}

#[test]
fn replies_resolve_only_inside_the_conversation() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let cv1 = w.conversation(&alice, &[&a]);
    let cv2 = w.conversation(&alice, &[&a]);
    let m1 = w.post(&alice, &cv1, Acting::Human, "first").unwrap();
    let mut reply = w.new_post(&cv1, Acting::Human, "reply");
    reply.reply_to = Some(m1.id.clone());
    assert_eq!(
        w.store.post_message(&alice, &reply).unwrap().value.reply_to,
        Some(m1.id.clone())
    );
    let mut elsewhere = w.new_post(&cv2, Acting::Human, "reply elsewhere");
    elsewhere.reply_to = Some(m1.id.clone());
    let err = w.store.post_message(&alice, &elsewhere).unwrap_err();
    assert_eq!(err.to_string(), format!("message {} not found", m1.id));
    assert_eq!(
        w.count(&format!(
            "SELECT count(*) FROM messages WHERE conversation_id = '{}'",
            cv2.id
        )),
        0
    );
}

#[test]
fn closed_conversations_refuse_posts_but_stay_readable() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let cv = w.conversation(&alice, &[&a]);
    w.post(&alice, &cv, Acting::Human, "before").unwrap();
    let closed = w.store.close_conversation(&alice, &cv.id).unwrap();
    assert!(closed.state_changed);
    assert_eq!(closed.value.state, ConversationState::Closed);
    assert!(!w.store.close_conversation(&alice, &cv.id).unwrap().state_changed);
    let err = w.post(&alice, &cv, Acting::Human, "after").unwrap_err();
    assert!(matches!(err, Error::ConversationClosed(_)), "{err}");
    assert_eq!(
        w.store
            .read_transcript(&alice, &Acting::Human, &cv.id, 0, 10)
            .unwrap()
            .len(),
        1
    );
    let b = w.agent(&alice);
    assert!(matches!(
        w.store.add_agent_participant(&alice, &cv.id, &b.id),
        Err(Error::ConversationClosed(_))
    ));
}

#[test]
fn adding_an_agent_requires_owning_it() {
    let mut w = world();
    let (alice, bob) = (w.alice.clone(), w.bob.clone());
    let mine = w.agent(&alice);
    let theirs = w.agent(&bob);
    let cv = w.conversation(&alice, &[&mine]);
    let err = w.store.add_agent_participant(&alice, &cv.id, &theirs.id).unwrap_err();
    assert_eq!(err.to_string(), format!("agent {} not found", theirs.id));
    let new = NewConversation {
        title: "t".into(),
        agents: vec![theirs.id.clone()],
    };
    assert!(matches!(
        w.store.create_conversation(&alice, &new, "cv-x"),
        Err(Error::AgentNotFound(_))
    ));
    assert_eq!(w.count("SELECT count(*) FROM conversations"), 1);
    let other = w.agent(&alice);
    let added = w.store.add_agent_participant(&alice, &cv.id, &other.id).unwrap();
    assert!(added.state_changed);
    assert!(
        !w.store
            .add_agent_participant(&alice, &cv.id, &other.id)
            .unwrap()
            .state_changed
    );
}

#[test]
fn a_failed_wake_write_leaves_no_trace_of_the_post() {
    if crate::testing::skip_on_postgres("the fault seam (SQL function and temp triggers) is SQLite's") {
        return;
    }
    let mut w = world();
    let alice = w.alice.clone();
    let (a, b) = (w.agent(&alice), w.agent(&alice));
    let cv = w.conversation(&alice, &[&a, &b]);
    w.post(&alice, &cv, Acting::Human, "one").unwrap();
    let tables = [
        "SELECT count(*) FROM messages",
        "SELECT count(*) FROM deliveries",
        "SELECT count(*) FROM wakes",
        "SELECT coalesce(sum(delivery_count), 0) FROM wakes",
        "SELECT count(*) FROM communication_idempotency",
        "SELECT next_seq FROM conversations",
    ];
    let before: Vec<i64> = tables.iter().map(|q| w.count(q)).collect();
    w.store.inject_wake_write_failure(true).unwrap();
    let post = w.new_post(&cv, Acting::Human, "two");
    let err = w.store.post_message(&alice, &post).unwrap_err();
    assert!(matches!(err, Error::Database(_)), "{err}");
    assert!(err.to_string().contains("injected wake write failure"));
    let after: Vec<i64> = tables.iter().map(|q| w.count(q)).collect();
    assert_eq!(before, after, "no message, delivery, seq, wake or idempotency record");
    // Once the fault clears, the same request commits with the seq the failure did not consume.
    w.store.inject_wake_write_failure(false).unwrap();
    let m = w.store.post_message(&alice, &post).unwrap();
    assert!(!m.replayed);
    assert_eq!(m.value.seq, 2);
}

#[test]
fn idempotent_post_replays_exactly_and_rejects_changed_reuse() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let cv = w.conversation(&alice, &[&a]);
    let post = w.new_post(&cv, Acting::Human, "once");
    let first = w.store.post_message(&alice, &post).unwrap();
    let again = w.store.post_message(&alice, &post).unwrap();
    assert!(again.replayed && !again.state_changed);
    assert_eq!(again.value, first.value);
    assert_eq!(w.count("SELECT count(*) FROM messages"), 1);
    assert_eq!(w.count("SELECT count(*) FROM deliveries"), 1);
    let mut changed = post.clone();
    changed.body = "twice".into();
    assert!(matches!(
        w.store.post_message(&alice, &changed),
        Err(Error::IdempotencyConflict {
            operation: "post_message"
        })
    ));
    assert_eq!(w.count("SELECT count(*) FROM messages"), 1);
}

#[test]
fn agent_post_replays_after_its_endpoint_detached() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let cv = w.conversation(&alice, &[&a]);
    let actor = w.attach(&alice, &a);
    let post = w.new_post(&cv, Acting::Agent(actor.clone()), "answer");
    let first = w.store.post_message(&alice, &post).unwrap();
    w.store.detach_endpoint(&alice, &a.id, &actor.endpoint).unwrap();
    let again = w.store.post_message(&alice, &post).unwrap();
    assert!(again.replayed);
    assert_eq!(
        again.value, first.value,
        "the stored message is exactly what the post returned"
    );
    // A new request through the detached endpoint is refused.
    let fresh = w.new_post(&cv, Acting::Agent(actor), "more");
    assert!(matches!(
        w.store.post_message(&alice, &fresh),
        Err(Error::EndpointNotCurrent {
            state: EndpointState::Detached,
            ..
        })
    ));
    assert_eq!(w.count("SELECT count(*) FROM messages"), 1);
}

#[test]
fn idempotency_keys_of_two_principals_are_independent() {
    let mut w = world();
    let (alice, bob) = (w.alice.clone(), w.bob.clone());
    let a = w.store.create_agent(&alice, &card("same"), "shared-key").unwrap();
    let b = w.store.create_agent(&bob, &card("same"), "shared-key").unwrap();
    assert!(!b.replayed && b.state_changed);
    assert_ne!(a.value.id, b.value.id);
    // Bob's reuse of the key with another card conflicts only with his own record.
    assert!(matches!(
        w.store.create_agent(&bob, &card("other"), "shared-key"),
        Err(Error::IdempotencyConflict { .. })
    ));
    let replay = w.store.create_agent(&alice, &card("same"), "shared-key").unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.value.id, a.value.id);
    // Conversations too.
    let new = NewConversation {
        title: "t".into(),
        agents: vec![],
    };
    let c1 = w.store.create_conversation(&alice, &new, "c").unwrap();
    let c1b = w.store.create_conversation(&alice, &new, "c").unwrap();
    assert!(c1b.replayed);
    assert_eq!(c1.value.id, c1b.value.id);
    let c2 = w.store.create_conversation(&bob, &new, "c").unwrap();
    assert!(!c2.replayed);
    assert_eq!(w.count("SELECT count(*) FROM conversations"), 2);
    // Records hold hashes, never the key.
    assert_eq!(
        w.count("SELECT count(*) FROM communication_idempotency WHERE key_hash = 'shared-key' OR key_hash = 'c'"),
        0
    );
}

#[test]
fn an_agent_lists_only_the_conversations_it_participates_in() {
    let mut w = world();
    let alice = w.alice.clone();
    let (a, b) = (w.agent(&alice), w.agent(&alice));
    let with_a = w.conversation(&alice, &[&a]);
    let _without = w.conversation(&alice, &[&b]);
    let both = w.conversation(&alice, &[&a, &b]);
    let actor = w.attach(&alice, &a);
    let listed = w.store.list_agent_conversations(&alice, &actor, None, 10).unwrap();
    let mut expect = vec![with_a.id.clone(), both.id.clone()];
    expect.sort();
    assert_eq!(listed.into_iter().map(|c| c.id).collect::<Vec<_>>(), expect);
    let page = w
        .store
        .list_agent_conversations(&alice, &actor, Some(&expect[0]), 10)
        .unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].id, expect[1]);
    // Alice's own (human) listing has all three.
    assert_eq!(w.store.list_conversations(&alice, None, 10).unwrap().len(), 3);
}
