//! A message is answered once: a turn's reply consumes the delivery it answers in the reply's
//! own commit, and the consumes a turn held go with its next post; a delivery's tries, counted
//! at the end of each turn that read it and left it queued; the owner's view of what waits and
//! the skip of a stuck delivery.

use super::*;

/// Alice's agent with a live endpoint, in a conversation, with a wake past the fence for the
/// two messages Alice posted.
struct Turn {
    w: World,
    alice: Caller,
    actor: AgentActor,
    cv: Conversation,
    ticket: DispatchTicket,
    first: String,
    second: String,
}

fn turn() -> Turn {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    let cv = w.conversation(&alice, &[&a]);
    let first = w.post(&alice, &cv, Acting::Human, "one").unwrap().id;
    let second = w.post(&alice, &cv, Acting::Human, "two").unwrap().id;
    let claim = w.store.claim_wake(&alice, &actor, CLAIM).unwrap().unwrap();
    let ticket = w.store.prepare_dispatch(&alice, &actor, &claim.attempt.id).unwrap();
    Turn {
        w,
        alice,
        actor,
        cv,
        ticket,
        first,
        second,
    }
}

impl Turn {
    /// The agent's reply number `index` of this wake, answering `to`.
    fn reply(&self, to: Option<&str>, index: u32) -> NewMessage {
        NewMessage {
            conversation: self.cv.id.clone(),
            acting: Acting::Agent(self.actor.clone()),
            body: format!("answer {index}"),
            reply_to: to.map(str::to_owned),
            idempotency: IdempotencyKey::WakeReply {
                wake: self.ticket.wake.id.clone(),
                index,
            },
        }
    }

    fn queued(&mut self) -> Vec<String> {
        let inbox = self.w.store.read_inbox(&self.alice, &self.actor, 0, 50, true).unwrap();
        inbox.into_iter().map(|d| d.message.id).collect()
    }

    fn tries(&mut self, message: &str) -> u32 {
        self.w
            .store
            .read_delivery(&self.alice, &self.actor, message)
            .unwrap()
            .tries
    }

    fn finish(&mut self, outcome: DispatchOutcome, inbox: TurnInbox<'_>) -> TurnEnd {
        self.w
            .store
            .finish_turn_spending(&self.alice, &self.actor, &self.ticket, outcome, None, inbox)
            .unwrap()
    }
}

#[test]
fn a_reply_consumes_the_delivery_it_answers_in_its_own_commit() {
    let mut t = turn();
    let reply = t.reply(Some(&t.first.clone()), 0);
    let posted = t.w.store.post_message(&t.alice, &reply).unwrap();
    assert!(posted.state_changed);
    // Nothing else was committed for the turn: a crash now leaves the answered message
    // consumed, and the next turn sees only the second.
    assert_eq!(t.queued(), vec![t.second.clone()]);
    let consumed =
        t.w.count("SELECT count(*) FROM communication_events WHERE kind = 'delivery_consumed'");
    assert_eq!(consumed, 1, "audited as a consume is");
    // The same reply made again (a retried turn) is a replay: it consumes nothing more.
    let again = t.w.store.post_message(&t.alice, &reply).unwrap();
    assert!(again.replayed);
    assert_eq!(t.queued(), vec![t.second.clone()]);
}

#[test]
fn a_post_that_answers_nothing_or_a_message_not_delivered_to_the_agent_consumes_nothing() {
    let mut t = turn();
    t.w.store.post_message(&t.alice, &t.reply(None, 0)).unwrap();
    // The agent answering its own message: there is no delivery of it to consume.
    let own = t.w.store.post_message(&t.alice, &t.reply(None, 1)).unwrap().value.id;
    t.w.store.post_message(&t.alice, &t.reply(Some(&own), 2)).unwrap();
    assert_eq!(t.queued(), vec![t.first.clone(), t.second.clone()]);
    // An agent's reply under an ordinary key (an agent acting through the MCP tools, which
    // consumes what it processed explicitly) consumes nothing.
    let mut keyed = t.reply(Some(&t.first.clone()), 3);
    keyed.idempotency = IdempotencyKey::Key("keyed".into());
    t.w.store.post_message(&t.alice, &keyed).unwrap();
    assert_eq!(t.queued(), vec![t.first.clone(), t.second.clone()]);
    // A human's reply consumes nothing of anyone's.
    let mut human = t.w.new_post(&t.cv, Acting::Human, "me too");
    human.reply_to = Some(t.first.clone());
    let third = t.w.store.post_message(&t.alice, &human).unwrap().value.id;
    assert_eq!(t.queued(), vec![t.first.clone(), t.second.clone(), third]);
}

#[test]
fn the_consumes_a_turn_held_go_with_its_next_post() {
    let mut t = turn();
    let held = vec![t.first.clone()];
    // Consumed first, then answered with a post that names no message: one commit for both.
    let posted =
        t.w.store
            .post_message_consuming(&t.alice, &t.reply(None, 0), &held)
            .unwrap();
    assert!(posted.state_changed);
    assert_eq!(t.queued(), vec![t.second.clone()]);
    // A replay consumes nothing: the second stays queued even when named.
    let replay =
        t.w.store
            .post_message_consuming(&t.alice, &t.reply(None, 0), std::slice::from_ref(&t.second))
            .unwrap();
    assert!(replay.replayed);
    assert_eq!(t.queued(), vec![t.second.clone()]);
}

#[test]
fn held_consumes_out_of_bounds_by_a_human_or_not_delivered_are_refused_and_post_nothing() {
    let mut t = turn();
    let bob = t.w.bob.clone();
    let other = t.w.agent(&bob);
    let elsewhere = t.w.conversation(&bob, &[&other]);
    let foreign = t.w.post(&bob, &elsewhere, Acting::Human, "not yours").unwrap().id;
    let before = t.w.bytes();
    let too_many = vec![t.first.clone(); bounds::MAX_TURN_CONSUMES + 1];
    let human = t.w.new_post(&t.cv, Acting::Human, "hi");
    let cases: [(&NewMessage, &[String], &str); 4] = [
        (&t.reply(None, 0), &too_many, "one past the bound"),
        (&t.reply(None, 0), &["msg_nope".to_owned()], "a malformed id"),
        (
            &t.reply(None, 0),
            std::slice::from_ref(&foreign),
            "a message delivered elsewhere",
        ),
        (&human, std::slice::from_ref(&t.first), "a human author"),
    ];
    for (new, consumes, what) in cases {
        let e = t.w.store.post_message_consuming(&t.alice, new, consumes).unwrap_err();
        assert!(
            matches!(e, Error::InvalidInput { .. } | Error::MessageNotFound(_)),
            "{what}: {e}"
        );
    }
    assert!(t.w.bytes() == before, "refusals post and consume nothing");
    let at_bound = vec![t.first.clone(); bounds::MAX_TURN_CONSUMES];
    t.w.store
        .post_message_consuming(&t.alice, &t.reply(None, 0), &at_bound)
        .unwrap();
    assert_eq!(t.queued(), vec![t.second.clone()], "the bound itself is accepted");
}

#[test]
fn a_turn_s_end_counts_a_try_for_each_delivery_it_read_and_left_queued_once() {
    let mut t = turn();
    let read = vec![t.first.clone(), t.second.clone()];
    let held = vec![t.second.clone()];
    let end = t.finish(
        DispatchOutcome::Unknown,
        TurnInbox {
            consumed: &held,
            read: &read,
        },
    );
    assert_eq!(end.attempt.value.state, AttemptState::DeliveryUnknown);
    assert_eq!(t.tries(&t.first.clone()), 1, "read and left queued: one try");
    assert_eq!(t.tries(&t.second.clone()), 0, "consumed: not a try");
    // An exact retry of the end counts nothing again.
    let again = t.finish(
        DispatchOutcome::Unknown,
        TurnInbox {
            consumed: &held,
            read: &read,
        },
    );
    assert!(!again.attempt.state_changed);
    assert_eq!(t.tries(&t.first.clone()), 1);
    // Beyond the bound of ids, the end is refused and counts nothing.
    let e =
        t.w.store
            .finish_turn_spending(
                &t.alice,
                &t.actor,
                &t.ticket,
                DispatchOutcome::Unknown,
                None,
                TurnInbox {
                    consumed: &[],
                    read: &vec![t.first.clone(); bounds::MAX_TURN_CONSUMES + 1],
                },
            )
            .unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e}");
}

#[test]
fn the_owner_sees_what_waits_with_its_tries_and_skips_a_stuck_delivery() {
    let mut t = turn();
    let read = vec![t.first.clone()];
    t.finish(
        DispatchOutcome::Unknown,
        TurnInbox {
            consumed: &[],
            read: &read,
        },
    );
    let agent = t.actor.agent.clone();
    let waiting = t.w.store.queued_deliveries(&t.alice, &agent, 0, 10).unwrap();
    let seen: Vec<_> = waiting.iter().map(|d| (d.message.id.clone(), d.tries)).collect();
    assert_eq!(seen, vec![(t.first.clone(), 1), (t.second.clone(), 0)]);
    // Another principal sees neither the agent nor its inbox, and cannot skip.
    let bob = t.w.bob.clone();
    let before = t.w.bytes();
    let e = t.w.store.queued_deliveries(&bob, &agent, 0, 10).unwrap_err();
    assert!(matches!(e, Error::AgentNotFound(_)), "{e}");
    let e = t.w.store.skip_delivery(&bob, &agent, &t.first).unwrap_err();
    assert!(matches!(e, Error::AgentNotFound(_)), "{e}");
    let e = t.w.store.skip_delivery(&t.alice, &agent, "msg_nope").unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e}");
    let e = t.w.store.queued_deliveries(&t.alice, &agent, 0, 0).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e}");
    assert!(t.w.bytes() == before, "refusals change nothing");
    // The owner skips it: consumed, audited as skipped, the next turn starts at the second.
    let skipped = t.w.store.skip_delivery(&t.alice, &agent, &t.first).unwrap();
    assert!(skipped.state_changed);
    assert_eq!(skipped.value.state, DeliveryState::Consumed);
    assert_eq!(t.queued(), vec![t.second.clone()]);
    let audited =
        t.w.count("SELECT count(*) FROM communication_events WHERE kind = 'delivery_skipped'");
    assert_eq!(audited, 1);
    let again = t.w.store.skip_delivery(&t.alice, &agent, &t.first).unwrap();
    assert!(!again.state_changed, "skipping twice changes nothing");
    assert_eq!(t.w.store.queued_deliveries(&t.alice, &agent, 0, 10).unwrap().len(), 1);
}

#[test]
fn a_turn_that_answered_some_and_left_others_queued_is_woken_again_and_one_that_answered_none_is_not() {
    let mut t = turn();
    // The turn answers the first, fails on the second (out of time, say) and ends.
    t.w.store
        .post_message(&t.alice, &t.reply(Some(&t.first.clone()), 0))
        .unwrap();
    let read = vec![t.second.clone()];
    let end = t.finish(
        DispatchOutcome::Accepted,
        TurnInbox {
            consumed: &[],
            read: &read,
        },
    );
    assert!(end.rewoken, "the second would otherwise wait for the next post");
    let open = t.w.count("SELECT count(*) FROM wakes WHERE state = 'pending'");
    assert_eq!(open, 1);
    // The next turn answers nothing: no wake for its leftovers, so an agent that fails on
    // everything is not woken by them again and again.
    t.w.clock.advance(Duration::from_secs(1));
    let claim = t.w.store.claim_wake(&t.alice, &t.actor, CLAIM).unwrap().unwrap();
    assert_eq!(claim.wake.delivery_count, 1, "the wake names the one delivery left");
    t.ticket =
        t.w.store
            .prepare_dispatch(&t.alice, &t.actor, &claim.attempt.id)
            .unwrap();
    let end = t.finish(
        DispatchOutcome::Unknown,
        TurnInbox {
            consumed: &[],
            read: &read,
        },
    );
    assert!(!end.rewoken);
    assert_eq!(t.w.count("SELECT count(*) FROM wakes WHERE state = 'pending'"), 0);
    assert_eq!(t.tries(&t.second.clone()), 2, "read and left by both turns");
}
