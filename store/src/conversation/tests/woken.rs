//! The agents a post wakes: what `post_message` returns for the host to schedule.

use super::*;

#[test]
fn a_post_wakes_every_other_agent_participant_and_a_replay_wakes_none() {
    let mut w = world();
    let alice = w.alice.clone();
    let (a, b, c) = (w.agent(&alice), w.agent(&alice), w.agent(&alice));
    let cv = w.conversation(&alice, &[&a, &b, &c]);

    // The human's post wakes all three, in participant order.
    let human = w.new_post(&cv, Acting::Human, "hello");
    let posted = w.store.post_message(&alice, &human).unwrap();
    assert!(posted.state_changed && !posted.replayed);
    assert_eq!(posted.woken, vec![a.id.clone(), b.id.clone(), c.id.clone()]);

    // An agent's post wakes the others, never its author.
    let actor_b = w.attach(&alice, &b);
    let reply = w.new_post(&cv, Acting::Agent(actor_b), "from b");
    let posted = w.store.post_message(&alice, &reply).unwrap();
    assert_eq!(posted.woken, vec![a.id.clone(), c.id.clone()]);

    // An exact replay returns the original message, created no delivery and wakes nobody.
    let deliveries = w.count("SELECT count(*) FROM deliveries");
    let again = w.store.post_message(&alice, &reply).unwrap();
    assert!(again.replayed && !again.state_changed);
    assert_eq!(again.value, posted.value);
    assert!(again.woken.is_empty(), "{:?}", again.woken);
    assert_eq!(w.count("SELECT count(*) FROM deliveries"), deliveries);

    // What a post reports it woke is exactly whom it queued a delivery for.
    let recipients: Vec<String> = {
        let conn = w.store.autocommit();
        let mut stmt = conn
            .prepare("SELECT recipient_agent_id FROM deliveries WHERE message_id = ?1 ORDER BY recipient_agent_id")
            .unwrap();
        stmt.query_map([&posted.value.id], |r| r.get(0))
            .unwrap()
            .collect::<std::result::Result<_, _>>()
            .unwrap()
    };
    let mut woken = posted.woken.clone();
    woken.sort();
    assert_eq!(recipients, woken);
}

#[test]
fn a_post_to_a_conversation_with_only_its_author_wakes_none() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let cv = w.conversation(&alice, &[&a]);
    let actor = w.attach(&alice, &a);
    let post = w.new_post(&cv, Acting::Agent(actor), "note to self");
    let posted = w.store.post_message(&alice, &post).unwrap();
    assert!(posted.state_changed);
    assert!(posted.woken.is_empty());
}
