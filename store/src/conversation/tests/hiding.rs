//! Existence hiding (foreign ids answer exactly like nonexistent ones) and fail-closed parsing of
//! stored lifecycle values.

use super::*;
use crate::id::new_id;

/// The error with `id` blanked, in both its Display and Debug forms: what a caller can observe.
fn observed(err: &Error, id: &str) -> (String, String) {
    (
        err.to_string().replace(id, "<id>"),
        format!("{err:?}").replace(id, "<id>"),
    )
}

fn assert_same(
    foreign: Result<impl std::fmt::Debug>,
    foreign_id: &str,
    missing: Result<impl std::fmt::Debug>,
    missing_id: &str,
) {
    let f = foreign.expect_err("foreign id must fail");
    let m = missing.expect_err("nonexistent id must fail");
    assert_eq!(observed(&f, foreign_id), observed(&m, missing_id));
}

#[test]
fn foreign_and_nonexistent_ids_are_indistinguishable() {
    let mut w = world();
    let (alice, bob) = (w.alice.clone(), w.bob.clone());
    // Alice's world: agent, endpoint, conversation, message, wake, attempt.
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    let cv = w.conversation(&alice, &[&a]);
    let m = w.post(&alice, &cv, Acting::Human, "secret").unwrap();
    let claim = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    // Bob's own agent, endpoint and conversation, to act from.
    let b = w.agent(&bob);
    let bob_actor = w.attach(&bob, &b);
    let bob_cv = w.conversation(&bob, &[&b]);

    // Agents.
    let missing = new_id(AGENT_ID_PREFIX);
    assert_same(
        w.store.get_agent(&bob, &a.id),
        &a.id,
        w.store.get_agent(&bob, &missing),
        &missing,
    );
    assert_same(
        w.store.update_agent(&bob, &a.id, 1, &card("x")),
        &a.id,
        w.store.update_agent(&bob, &missing, 1, &card("x")),
        &missing,
    );
    assert_same(
        w.store.attach_endpoint(&bob, &a.id, LEASE, "k1"),
        &a.id,
        w.store.attach_endpoint(&bob, &missing, LEASE, "k2"),
        &missing,
    );

    // Endpoints: Alice's endpoint named under Bob's own agent.
    let missing = new_id(ENDPOINT_ID_PREFIX);
    assert_same(
        w.store.detach_endpoint(&bob, &b.id, &actor.endpoint),
        &actor.endpoint,
        w.store.detach_endpoint(&bob, &b.id, &missing),
        &missing,
    );
    let foreign_actor = AgentActor {
        agent: b.id.clone(),
        endpoint: actor.endpoint.clone(),
        generation: 1,
    };
    let missing_actor = AgentActor {
        agent: b.id.clone(),
        endpoint: missing.clone(),
        generation: 1,
    };
    assert_same(
        w.store.read_inbox(&bob, &foreign_actor, 0, 10, false),
        &actor.endpoint,
        w.store.read_inbox(&bob, &missing_actor, 0, 10, false),
        &missing,
    );

    // Conversations, as a human and as an agent.
    let missing = new_id(CONVERSATION_ID_PREFIX);
    assert_same(
        w.store.get_conversation(&bob, &Acting::Human, &cv.id),
        &cv.id,
        w.store.get_conversation(&bob, &Acting::Human, &missing),
        &missing,
    );
    let as_bob_agent = Acting::Agent(bob_actor.clone());
    assert_same(
        w.store.read_transcript(&bob, &as_bob_agent, &cv.id, 0, 10),
        &cv.id,
        w.store.read_transcript(&bob, &as_bob_agent, &missing, 0, 10),
        &missing,
    );
    let p1 = w.new_post(&cv, Acting::Human, "intrude");
    let mut p2 = w.new_post(&cv, Acting::Human, "intrude");
    p2.conversation = missing.clone();
    assert_same(
        w.store.post_message(&bob, &p1),
        &cv.id,
        w.store.post_message(&bob, &p2),
        &missing,
    );
    assert_same(
        w.store.close_conversation(&bob, &cv.id),
        &cv.id,
        w.store.close_conversation(&bob, &missing),
        &missing,
    );

    // Messages: as a reply target from Bob's conversation, and as a delivery in Bob's inbox.
    let missing = new_id(MESSAGE_ID_PREFIX);
    let mut r1 = w.new_post(&bob_cv, Acting::Human, "re");
    r1.reply_to = Some(m.id.clone());
    let mut r2 = w.new_post(&bob_cv, Acting::Human, "re");
    r2.reply_to = Some(missing.clone());
    assert_same(
        w.store.post_message(&bob, &r1),
        &m.id,
        w.store.post_message(&bob, &r2),
        &missing,
    );
    assert_same(
        w.store.consume_delivery(&bob, &bob_actor, &m.id),
        &m.id,
        w.store.consume_delivery(&bob, &bob_actor, &missing),
        &missing,
    );

    // Wakes and attempts.
    let missing = new_id(WAKE_ID_PREFIX);
    let token = format!("wct_{}", "a".repeat(64));
    assert_same(
        w.store.consume_wake(&bob, &bob_actor, &claim.wake.id, &token),
        &claim.wake.id,
        w.store.consume_wake(&bob, &bob_actor, &missing, &token),
        &missing,
    );
    assert_same(
        w.store.wake_attempts(&bob, &bob_actor, &claim.wake.id, 10),
        &claim.wake.id,
        w.store.wake_attempts(&bob, &bob_actor, &missing, 10),
        &missing,
    );
    let missing = new_id(ATTEMPT_ID_PREFIX);
    assert_same(
        w.store.prepare_dispatch(&bob, &bob_actor, &claim.attempt.id),
        &claim.attempt.id,
        w.store.prepare_dispatch(&bob, &bob_actor, &missing),
        &missing,
    );

    // None of that changed Alice's world.
    assert_eq!(w.count("SELECT count(*) FROM messages"), 1);
    assert_eq!(w.store.get_agent(&alice, &a.id).unwrap().profile_revision, 1);
    assert_eq!(
        w.store.get_conversation(&alice, &Acting::Human, &cv.id).unwrap().state,
        ConversationState::Open
    );
}

#[test]
fn malformed_ids_are_invalid_input_not_lookups() {
    let mut w = world();
    let alice = w.alice.clone();
    assert!(matches!(
        w.store.get_agent(&alice, "agt_nothex"),
        Err(Error::InvalidInput { field: "agentId", .. })
    ));
    assert!(matches!(
        w.store
            .get_conversation(&alice, &Acting::Human, "tr_000000000000000000000000"),
        Err(Error::InvalidInput {
            field: "conversationId",
            ..
        })
    ));
}

#[test]
fn unknown_stored_lifecycles_fail_closed() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    let cv = w.conversation(&alice, &[&a]);
    w.post(&alice, &cv, Acting::Human, "x").unwrap();

    w.store
        .autocommit()
        .execute("UPDATE conversations SET state = 'archived'", [])
        .unwrap();
    let err = w.store.get_conversation(&alice, &Acting::Human, &cv.id).unwrap_err();
    assert!(
        matches!(
            err,
            Error::CorruptRow {
                table: "conversations",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("unknown conversation state \"archived\""));
    let err = w.post(&alice, &cv, Acting::Human, "y").unwrap_err();
    assert!(matches!(err, Error::CorruptRow { .. }), "{err}");
    w.store
        .autocommit()
        .execute("UPDATE conversations SET state = 'open'", [])
        .unwrap();

    w.store
        .autocommit()
        .execute("UPDATE deliveries SET state = 'read'", [])
        .unwrap();
    let err = w.store.read_inbox(&alice, &actor, 0, 10, false).unwrap_err();
    assert!(
        matches!(
            err,
            Error::CorruptRow {
                table: "deliveries",
                ..
            }
        ),
        "{err}"
    );
    w.store
        .autocommit()
        .execute("UPDATE deliveries SET state = 'queued'", [])
        .unwrap();

    w.store
        .autocommit()
        .execute("UPDATE wakes SET state = 'snoozed'", [])
        .unwrap();
    let err = w.store.list_wakes(&alice, &actor, 10).unwrap_err();
    assert!(matches!(err, Error::CorruptRow { table: "wakes", .. }), "{err}");
    w.store
        .autocommit()
        .execute("UPDATE wakes SET state = 'pending'", [])
        .unwrap();

    // An endpoint whose state is unknown admits nothing: no post, no claim.
    w.store
        .autocommit()
        .execute("UPDATE agent_endpoints SET state = 'hibernating'", [])
        .unwrap();
    let err = w.post(&alice, &cv, Acting::Agent(actor.clone()), "z").unwrap_err();
    assert!(
        matches!(
            err,
            Error::CorruptRow {
                table: "agent_endpoints",
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        w.store.claim_wake(&alice, &actor, CLAIM),
        Err(Error::CorruptRow { .. })
    ));
    assert_eq!(w.count("SELECT count(*) FROM messages"), 1);
    assert_eq!(w.count("SELECT count(*) FROM wake_attempts"), 0);
}
