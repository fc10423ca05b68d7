//! The host's endpoint is the host's: through the endpoint a binding attaches for a transfer's
//! agent no client caller acts — not the transfer's owner, who sees its id and generation — and
//! no client attaches or detaches an endpoint of a transfer's agent. Every refusal is compared
//! byte for byte with the database before it. The host's own caller drives the turn through the
//! same endpoint, and the owner keeps talking to its agent as the human.

use std::time::Duration;

use crate::conversation::{
    Acting, AgentActor, AgentCard, Caller, ConversationError, DispatchOutcome, EndpointState, IdempotencyKey,
    NewConversation, NewMessage, OPERATOR_SUBJECT,
};
use crate::*;

use super::tests::{ALICE, CLAIM, Fixture, LEASE, fixture, snapshot};

/// A bound, carried, `active` transfer of `owner`, with a conversation the owner opened with its
/// agent and one question the owner posted as the human (so the agent has a delivery and a
/// pending wake).
struct Bound {
    transfer: String,
    binding: AgentBinding,
    actor: AgentActor,
    conversation: String,
    question: String,
}

impl Fixture {
    fn bound(&mut self, owner: &TransferOwner) -> Bound {
        let t = self.store.snapshot_state_as(&snapshot(), owner).unwrap().id;
        let tok = self.token(&t, TokenScope::ProvisionRuntime);
        self.store
            .provision_runtime(&t, Tier::Nano, 1_000, "forecaster", &tok)
            .unwrap();
        self.store.push_state(&t, None).unwrap();
        let tok = self.token(&t, TokenScope::Activate);
        self.store.begin_activation(&t, &tok).unwrap();
        self.store.complete_activation(&t).unwrap();
        let b = self.store.bind_transfer_agent(&t, LEASE).unwrap();
        self.store
            .register_wake_carrier(&b.agent.id, &b.endpoint.id, b.endpoint.generation)
            .unwrap();
        let human = owner.caller().unwrap();
        let cv = self
            .store
            .create_conversation(
                &human,
                &NewConversation {
                    title: "forecast".into(),
                    agents: vec![b.agent.id.clone()],
                },
                &format!("cv-{t}"),
            )
            .unwrap()
            .value;
        let question = self
            .store
            .post_message(&human, &human_post(&cv.id, "How much stock for Q3?", "q-1"))
            .unwrap()
            .value;
        Bound {
            transfer: t,
            actor: AgentActor::of(&b.endpoint),
            binding: b,
            conversation: cv.id,
            question: question.id,
        }
    }
}

fn human_post(conversation: &str, body: &str, key: &str) -> NewMessage {
    NewMessage {
        conversation: conversation.into(),
        acting: Acting::Human,
        body: body.into(),
        reply_to: None,
        idempotency: IdempotencyKey::Key(key.into()),
    }
}

fn agent_post(b: &Bound, body: &str, idempotency: IdempotencyKey) -> NewMessage {
    NewMessage {
        conversation: b.conversation.clone(),
        acting: Acting::Agent(b.actor.clone()),
        body: body.into(),
        reply_to: Some(b.question.clone()),
        idempotency,
    }
}

/// Every agent-acting store call, made by `caller` through `b`'s endpoint; `wake`, `attempt`
/// and `token` name a real wake, attempt and consume token of that agent.
fn every_agent_call(
    s: &mut Store,
    caller: &Caller,
    b: &Bound,
    wake: &str,
    attempt: &str,
    token: &str,
) -> Vec<(&'static str, ConversationError)> {
    let a = &b.actor;
    let as_agent = Acting::Agent(a.clone());
    let key = |k: &str| IdempotencyKey::Key(k.into());
    let wake_reply = IdempotencyKey::WakeReply {
        wake: wake.into(),
        index: 0,
    };
    let cv = b.conversation.as_str();
    let calls: Vec<(&'static str, Result<(), ConversationError>)> = vec![
        (
            "post_message",
            s.post_message(caller, &agent_post(b, "forged", key("forged-1")))
                .map(drop),
        ),
        (
            "post_message (wake reply)",
            s.post_message(caller, &agent_post(b, "forged", wake_reply)).map(drop),
        ),
        ("read_inbox", s.read_inbox(caller, a, 0, 10, false).map(drop)),
        ("consume_delivery", s.consume_delivery(caller, a, &b.question).map(drop)),
        (
            "read_transcript",
            s.read_transcript(caller, &as_agent, cv, 0, 10).map(drop),
        ),
        ("get_conversation", s.get_conversation(caller, &as_agent, cv).map(drop)),
        (
            "list_agent_conversations",
            s.list_agent_conversations(caller, a, None, 10).map(drop),
        ),
        ("list_wakes", s.list_wakes(caller, a, 10).map(drop)),
        ("wake_attempts", s.wake_attempts(caller, a, wake, 10).map(drop)),
        ("claim_wake", s.claim_wake(caller, a, CLAIM).map(drop)),
        ("prepare_dispatch", s.prepare_dispatch(caller, a, attempt).map(drop)),
        (
            "finish_dispatch",
            s.finish_dispatch(caller, a, attempt, DispatchOutcome::Accepted)
                .map(drop),
        ),
        ("consume_wake", s.consume_wake(caller, a, wake, token).map(drop)),
        (
            "activate_wake",
            s.activate_wake(caller, a, wake, "activate-1").map(drop),
        ),
        ("bootstrap", s.bootstrap(caller, a, Some(cv), Some(wake)).map(drop)),
        ("renew_endpoint", s.renew_endpoint(caller, a, LEASE).map(drop)),
        ("touch_endpoint", s.touch_endpoint(caller, a).map(drop)),
    ];
    calls.into_iter().map(|(name, r)| (name, r.expect_err(name))).collect()
}

#[test]
fn the_owner_cannot_act_through_the_host_held_endpoint_and_each_refusal_changes_nothing() {
    let mut f = fixture();
    let owner = TransferOwner::ApiKey(ALICE.into());
    let b = f.bound(&owner);
    assert!(b.binding.endpoint.host_held, "a binding's endpoint is the host's");
    let host = owner.host_caller().unwrap();
    // A wake the host has claimed and dispatched, so every call has real ids to name.
    let claim = f.store.claim_wake(&host, &b.actor, CLAIM).unwrap().unwrap();
    let ticket = f.store.prepare_dispatch(&host, &b.actor, &claim.attempt.id).unwrap();
    let (wake, attempt, token) = (
        ticket.wake.id.clone(),
        ticket.attempt.id.clone(),
        ticket.consume_token.clone(),
    );

    // The owner's own credential: it sees the endpoint id and generation in its listing.
    let listed = f.store.list_agent_listings(&owner.caller().unwrap(), None, 10).unwrap();
    assert_eq!(listed[0].current_endpoint.as_ref().unwrap().id, b.binding.endpoint.id);
    let before = f.bytes();
    let refusals = every_agent_call(&mut f.store, &owner.caller().unwrap(), &b, &wake, &attempt, &token);
    assert_eq!(refusals.len(), 17);
    for (name, e) in refusals {
        assert!(
            matches!(&e, ConversationError::HostHeldEndpoint(ep) if *ep == b.binding.endpoint.id),
            "{name}: {e:?}"
        );
    }
    assert!(f.bytes() == before, "the refusals changed nothing");

    // The host's turn goes on through the same endpoint: its reply, its consume, the outcome.
    let reply = agent_post(
        &b,
        "About 400 units.",
        IdempotencyKey::WakeReply {
            wake: wake.clone(),
            index: 0,
        },
    );
    let posted = f.store.post_message(&host, &reply).unwrap();
    assert!(posted.state_changed);
    f.store.consume_delivery(&host, &b.actor, &b.question).unwrap();
    f.store
        .finish_dispatch(&host, &b.actor, &attempt, DispatchOutcome::Accepted)
        .unwrap();
    f.store.consume_wake(&host, &b.actor, &wake, &token).unwrap();

    // An exact replay of the host's reply is no way in either: refused before the replay.
    let before = f.bytes();
    let e = f.store.post_message(&owner.caller().unwrap(), &reply).unwrap_err();
    assert!(matches!(e, ConversationError::HostHeldEndpoint(_)), "{e:?}");
    assert!(f.bytes() == before);

    // The owner still talks to its agent as the human, and reads the agent's answer.
    let human = owner.caller().unwrap();
    f.store
        .post_message(&human, &human_post(&b.conversation, "And for Q4?", "q-2"))
        .unwrap();
    let t = f
        .store
        .read_transcript(&human, &Acting::Human, &b.conversation, 0, 10)
        .unwrap();
    assert_eq!(
        t.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(),
        ["How much stock for Q3?", "About 400 units.", "And for Q4?"]
    );
    let next = f.store.claim_wake(&host, &b.actor, CLAIM).unwrap();
    assert!(next.is_some(), "the owner's next message wakes the agent for the host");
}

#[test]
fn a_lapsed_host_held_endpoint_is_refused_to_clients_without_recording_the_expiry() {
    let mut f = fixture();
    let b = f.bound(&TransferOwner::Operator);
    f.clock.advance(LEASE + Duration::from_secs(1));
    for caller in [
        TransferOwner::Operator.caller().unwrap(),
        Caller::full(OPERATOR_SUBJECT).unwrap(),
    ] {
        let before = f.bytes();
        for (name, e) in every_agent_call(
            &mut f.store,
            &caller,
            &b,
            "wk_000000000000000000000000",
            "wka_000000000000000000000000",
            &format!("wct_{}", "0".repeat(64)),
        ) {
            assert!(matches!(e, ConversationError::HostHeldEndpoint(_)), "{name}: {e:?}");
        }
        assert!(f.bytes() == before, "not even the expiry was recorded by a client");
    }
    // The host's own call records it, as before.
    let host = TransferOwner::Operator.host_caller().unwrap();
    assert!(matches!(
        f.store.claim_wake(&host, &b.actor, CLAIM),
        Err(ConversationError::EndpointExpired { .. })
    ));
    let ep = f
        .store
        .get_endpoint(&host, &b.binding.agent.id, &b.binding.endpoint.id)
        .unwrap();
    assert_eq!(ep.state, EndpointState::Expired);
}

#[test]
fn no_client_attaches_or_detaches_an_endpoint_of_a_transfers_agent() {
    let mut f = fixture();
    let owner = TransferOwner::ApiKey(ALICE.into());
    let b = f.bound(&owner);
    let (agent, ep) = (b.binding.agent.id.clone(), b.binding.endpoint.id.clone());
    let owner_caller = owner.caller().unwrap();
    let stranger = Caller::full("api-key:prn_0000000000000000000000b0").unwrap();

    let before = f.bytes();
    let e = f
        .store
        .attach_endpoint(&owner_caller, &agent, LEASE, "attach-1")
        .unwrap_err();
    assert!(
        matches!(&e, ConversationError::TransferBoundAgent(a) if *a == agent),
        "{e:?}"
    );
    let e = f.store.detach_endpoint(&owner_caller, &agent, &ep).unwrap_err();
    assert!(
        matches!(&e, ConversationError::TransferBoundAgent(a) if *a == agent),
        "{e:?}"
    );
    // A stranger learns nothing: the agent is simply not found, as any foreign one.
    assert!(matches!(
        f.store.attach_endpoint(&stranger, &agent, LEASE, "attach-1"),
        Err(ConversationError::AgentNotFound(_))
    ));
    assert!(matches!(
        f.store.detach_endpoint(&stranger, &agent, &ep),
        Err(ConversationError::AgentNotFound(_))
    ));
    assert!(f.bytes() == before, "the refusals changed nothing");
    let current = f.store.get_endpoint(&owner_caller, &agent, &ep).unwrap();
    assert_eq!((current.state, current.wake_capable), (EndpointState::Attached, true));

    // Once the transfer ended its endpoint is detached, and the agent stays the transfer's.
    f.store.terminate(&b.transfer, "operator request").unwrap();
    let before = f.bytes();
    assert!(matches!(
        f.store.attach_endpoint(&owner_caller, &agent, LEASE, "attach-2"),
        Err(ConversationError::TransferBoundAgent(_))
    ));
    assert!(matches!(
        f.store.detach_endpoint(&owner_caller, &agent, &ep),
        Err(ConversationError::TransferBoundAgent(_))
    ));
    assert!(f.bytes() == before);

    // An agent the owner made itself is attached and detached as always, and is not host-held.
    let own = f
        .store
        .create_agent(
            &owner_caller,
            &AgentCard {
                handle: "mine".into(),
                display_name: "Mine".into(),
                description: String::new(),
                specialties: vec![],
            },
            "create-1",
        )
        .unwrap()
        .value;
    let attached = f
        .store
        .attach_endpoint(&owner_caller, &own.id, LEASE, "attach-3")
        .unwrap()
        .value;
    assert!(!attached.host_held);
    f.store
        .read_inbox(&owner_caller, &AgentActor::of(&attached), 0, 10, false)
        .unwrap();
    let detached = f.store.detach_endpoint(&owner_caller, &own.id, &attached.id).unwrap();
    assert_eq!(detached.value.state, EndpointState::Detached);
}

#[test]
fn provenance_names_exactly_the_host_held_endpoints() {
    let mut f = fixture();
    let owner = TransferOwner::ApiKey(ALICE.into());
    let b = f.bound(&owner);
    let human = owner.caller().unwrap();
    let own = f
        .store
        .create_agent(
            &human,
            &AgentCard {
                handle: "client".into(),
                display_name: "Client".into(),
                description: String::new(),
                specialties: vec![],
            },
            "create-1",
        )
        .unwrap()
        .value;
    let client_ep = f
        .store
        .attach_endpoint(&human, &own.id, LEASE, "attach-1")
        .unwrap()
        .value;
    let sandbox = b.binding.endpoint.id.as_str();
    let held = f
        .store
        .host_held_endpoints(&[
            sandbox,
            &client_ep.id,
            "ep_ffffffffffffffffffffffff",
            "not-an-id",
            sandbox,
        ])
        .unwrap();
    assert_eq!(held.into_iter().collect::<Vec<_>>(), [sandbox.to_owned()]);
    let page = vec![sandbox; conversation::bounds::MAX_PAGE_LIMIT];
    assert_eq!(f.store.host_held_endpoints(&page).unwrap().len(), 1);
    let over = vec![sandbox; conversation::bounds::MAX_PAGE_LIMIT + 1];
    assert!(matches!(
        f.store.host_held_endpoints(&over),
        Err(ConversationError::InvalidInput { field: "endpoints", .. })
    ));
}
