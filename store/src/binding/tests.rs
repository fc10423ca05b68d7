//! The binding of a transfer to its agent, through the public `Store` methods: one agent per
//! transfer, re-binding, ownership, refusals that change nothing, unbinding on every way out of
//! `active`, takeover paging and the agent ceilings.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::conversation::bounds::{MAX_AGENTS, MAX_AGENTS_PER_PRINCIPAL};
use crate::conversation::{
    Acting, AgentCard, AuditKind, Caller, ConversationError, EndpointState, IdempotencyKey, NewConversation,
    NewMessage, OPERATOR_SUBJECT,
};
use crate::*;

pub(super) const START: Timestamp = Timestamp::from_micros(1_796_039_139_000_000);
const BUDGET: u64 = 1_000;
pub(super) const LEASE: Duration = Duration::from_secs(600);
pub(super) const CLAIM: Duration = Duration::from_secs(30);
pub(super) const ALICE: &str = "prn_0000000000000000000000a1";
const BOB: &str = "prn_0000000000000000000000b0";

/// A store on a manual clock, and the key its tokens are minted with (shared with the
/// host-held endpoint tests).
pub(super) struct Fixture {
    pub(super) store: Store,
    pub(super) key: TokenKey,
    pub(super) clock: ManualClock,
}

pub(super) fn fixture() -> Fixture {
    let key = TokenKey::random();
    let clock = ManualClock::new(START);
    let store = crate::testing::store()
        .unwrap()
        .with_clock(Arc::new(clock.clone()))
        .with_token_key(key.clone());
    Fixture { store, key, clock }
}

pub(super) fn snapshot() -> SnapshotInput {
    SnapshotInput {
        source_host: "laptop-7".into(),
        system_prompt: "You forecast inventory.".into(),
        message_history: vec![Message {
            role: "user".into(),
            content: "Forecast SKU-1.".into(),
        }],
        tool_state: json!({}),
        mcp_config: vec![],
    }
}

impl Fixture {
    pub(super) fn token(&self, transfer: &str, scope: TokenScope) -> String {
        issue_transfer_token(&self.key, transfer, scope, self.clock.now(), DEFAULT_TOKEN_TTL).unwrap()
    }

    /// A new `active` transfer owned by `owner`.
    pub(super) fn active(&mut self, owner: &TransferOwner) -> String {
        let t = self.store.snapshot_state_as(&snapshot(), owner).unwrap().id;
        let tok = self.token(&t, TokenScope::ProvisionRuntime);
        self.store
            .provision_runtime(&t, Tier::Nano, BUDGET, "forecaster", &tok)
            .unwrap();
        self.store.push_state(&t, None).unwrap();
        let tok = self.token(&t, TokenScope::Activate);
        self.store.begin_activation(&t, &tok).unwrap();
        self.store.complete_activation(&t).unwrap();
        t
    }

    /// A bound `active` transfer of the operator whose endpoint has a registered carrier.
    pub(super) fn carried(&mut self) -> (String, AgentBinding) {
        let t = self.active(&TransferOwner::Operator);
        let b = self.store.bind_transfer_agent(&t, LEASE).unwrap();
        self.store
            .register_wake_carrier(&b.agent.id, &b.endpoint.id, b.endpoint.generation)
            .unwrap();
        (t, b)
    }

    /// The whole database, serialized: what a refusal must leave unchanged.
    pub(super) fn bytes(&mut self) -> Vec<String> {
        crate::testing::dump(&mut self.store)
    }

    fn count(&mut self, sql: &str) -> i64 {
        self.store.autocommit().query_row(sql, [], |r| r.get(0)).unwrap()
    }

    fn kinds(&mut self, t: &str) -> Vec<EventKind> {
        self.store
            .get_status(t)
            .unwrap()
            .events
            .into_iter()
            .map(|e| e.kind)
            .collect()
    }

    fn last_event(&mut self, t: &str, kind: EventKind) -> Event {
        let events = self.store.get_status(t).unwrap().events;
        events.into_iter().rev().find(|e| e.kind == kind).unwrap()
    }
}

fn operator() -> Caller {
    TransferOwner::Operator.caller().unwrap()
}

/// The host acting for the operator: the caller of an operator-owned transfer's agent's turns.
fn host() -> Caller {
    TransferOwner::Operator.host_caller().unwrap()
}

#[test]
fn binding_creates_one_agent_and_rebinding_keeps_it_with_the_next_generation() {
    let mut f = fixture();
    let t = f.active(&TransferOwner::Operator);
    let first = f.store.bind_transfer_agent(&t, LEASE).unwrap();
    assert_eq!(first.transfer_id, t);
    assert_eq!(first.agent.card.handle, t, "the handle is the transfer id");
    assert_eq!(first.agent.card.display_name, "Agent of laptop-7");
    assert!(first.agent.card.validate().is_ok());
    assert_eq!(first.agent.controller_generation, 1);
    assert_eq!(first.endpoint.agent_id, first.agent.id);
    assert_eq!(
        (
            first.endpoint.generation,
            first.endpoint.state,
            first.endpoint.wake_capable
        ),
        (1, EndpointState::Attached, false)
    );
    assert_eq!(first.endpoint.lease_expires_at, START.saturating_add(LEASE));
    let transfer = f.store.transfer(&t).unwrap();
    assert_eq!(transfer.agent_id.as_deref(), Some(first.agent.id.as_str()));
    assert_eq!(transfer.status, TransferStatus::Active);
    let bound = f.last_event(&t, EventKind::AgentBound);
    assert_eq!(
        bound.detail,
        json!({ "agentId": first.agent.id, "endpointId": first.endpoint.id, "generation": 1 })
    );
    let audit: Vec<AuditKind> = f
        .store
        .communication_events(0, Some(&first.agent.id), None, 50)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(audit, [AuditKind::AgentCreated, AuditKind::EndpointAttached]);

    // A host restart re-binds: the same agent, a fresh endpoint, the old one replaced.
    f.clock.advance(Duration::from_secs(5));
    let again = f.store.bind_transfer_agent(&t, LEASE).unwrap();
    assert_eq!(again.agent.id, first.agent.id);
    assert_eq!(again.agent.controller_generation, 2);
    assert_eq!(again.endpoint.generation, 2);
    assert_ne!(again.endpoint.id, first.endpoint.id);
    let old = f
        .store
        .get_endpoint(&operator(), &first.agent.id, &first.endpoint.id)
        .unwrap();
    assert_eq!(old.state, EndpointState::Replaced);
    assert_eq!(f.count("SELECT count(*) FROM agents"), 1);
    assert_eq!(
        f.count("SELECT count(*) FROM agent_endpoints WHERE state = 'attached'"),
        1
    );
    assert_eq!(f.kinds(&t).iter().filter(|k| **k == EventKind::AgentBound).count(), 2);
    // The transfer is unchanged by a re-bind but for its log.
    assert_eq!(f.store.transfer(&t).unwrap(), transfer);
    assert_eq!(f.store.agent_transfer(&first.agent.id).unwrap(), Some(transfer));
}

#[test]
fn the_transfer_shows_its_agent_but_never_its_owner() {
    let mut f = fixture();
    let t = f.active(&TransferOwner::ApiKey(ALICE.into()));
    let unbound = serde_json::to_value(f.store.transfer(&t).unwrap()).unwrap();
    assert!(unbound.get("agentId").is_none(), "{unbound}");
    let b = f.store.bind_transfer_agent(&t, LEASE).unwrap();
    let bound = serde_json::to_value(f.store.transfer(&t).unwrap()).unwrap();
    assert_eq!(bound["agentId"], json!(b.agent.id));
    let text = bound.to_string();
    assert!(!text.contains(ALICE) && !text.contains("owner"), "{text}");
    assert_eq!(
        f.store.transfer(&t).unwrap().owner().unwrap(),
        TransferOwner::ApiKey(ALICE.into())
    );
    let binding = serde_json::to_value(&b).unwrap();
    assert_eq!(binding["transferId"], json!(t));
    assert_eq!(binding["endpoint"]["generation"], json!(1));
}

#[test]
fn binding_a_transfer_that_is_not_active_is_refused_and_changes_nothing() {
    let mut f = fixture();
    let staged = f.store.snapshot_state(&snapshot()).unwrap().id;
    let before = f.bytes();
    let err = f.store.bind_transfer_agent(&staged, LEASE).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidTransition { operation: Operation::BindAgent, phase, .. }
            if phase.status == TransferStatus::Staged),
        "{err:?}"
    );
    assert!(err.to_string().contains("bind_agent") && err.to_string().contains("staged"));
    assert!(f.bytes() == before);

    // Bad input and unknown transfers, too.
    for lease in [Duration::ZERO, Duration::from_secs(3601)] {
        let err = f.store.bind_transfer_agent(&staged, lease).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput { field, .. } if field == "lease"),
            "{err:?}"
        );
    }
    assert!(matches!(
        f.store.bind_transfer_agent("tr_nope", LEASE),
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        f.store.bind_transfer_agent("tr_000000000000000000000000", LEASE),
        Err(Error::TransferNotFound(_))
    ));
    assert!(f.bytes() == before);

    // A bound transfer that left `active` cannot be re-bound.
    let (t, _) = f.carried();
    f.store.report_usage(&t, BUDGET, "compute").unwrap();
    let before = f.bytes();
    let err = f.store.bind_transfer_agent(&t, LEASE).unwrap_err();
    assert!(err.to_string().contains("insolvent"), "{err}");
    assert!(f.bytes() == before);
}

#[test]
fn the_agent_belongs_to_the_transfer_owner_and_is_hidden_from_everyone_else() {
    let mut f = fixture();
    let alice_owner = TransferOwner::ApiKey(ALICE.into());
    let t = f.active(&alice_owner);
    let b = f.store.bind_transfer_agent(&t, LEASE).unwrap();
    let alice = alice_owner.caller().unwrap();
    assert_eq!(alice, Caller::full(&format!("api-key:{ALICE}")).unwrap());
    let listed = f.store.list_agent_listings(&alice, None, 10).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].agent.id, b.agent.id);
    assert_eq!(listed[0].current_endpoint.as_ref().unwrap().id, b.endpoint.id);
    let bob = TransferOwner::ApiKey(BOB.into()).caller().unwrap();
    for other in [bob, operator(), Caller::full(OPERATOR_SUBJECT).unwrap()] {
        assert!(f.store.list_agent_listings(&other, None, 10).unwrap().is_empty());
        assert!(matches!(
            f.store.get_agent(&other, &b.agent.id),
            Err(ConversationError::AgentNotFound(_))
        ));
    }

    // The owner opens a conversation with the agent and posts; the host, acting for the owner
    // through the bound (host-held) endpoint, claims the wake.
    f.store
        .register_wake_carrier(&b.agent.id, &b.endpoint.id, b.endpoint.generation)
        .unwrap();
    let cv = f
        .store
        .create_conversation(
            &alice,
            &NewConversation {
                title: "forecast".into(),
                agents: vec![b.agent.id.clone()],
            },
            "cv-1",
        )
        .unwrap()
        .value;
    let post = NewMessage {
        conversation: cv.id.clone(),
        acting: Acting::Human,
        body: "How much stock for Q3?".into(),
        reply_to: None,
        idempotency: IdempotencyKey::Key("post-1".into()),
    };
    f.store.post_message(&alice, &post).unwrap();
    let actor = crate::conversation::AgentActor::of(&b.endpoint);
    let claim = f
        .store
        .claim_wake(&alice_owner.host_caller().unwrap(), &actor, CLAIM)
        .unwrap();
    assert!(claim.is_some(), "the host drives the bound agent for its owner");
}

#[test]
fn an_api_key_owner_must_be_a_principal_id_and_a_refusal_changes_nothing() {
    let mut f = fixture();
    let before = f.bytes();
    let err = f
        .store
        .snapshot_state_as(&snapshot(), &TransferOwner::ApiKey("alice".into()))
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput { field, .. } if field == "owner"),
        "{err:?}"
    );
    assert!(f.bytes() == before);
    let t = f.store.snapshot_state(&snapshot()).unwrap();
    assert_eq!(t.owner_subject, OPERATOR_SUBJECT);
    assert_eq!(t.owner().unwrap(), TransferOwner::Operator);
}

#[test]
fn insolvency_revokes_the_agents_turns_but_keeps_it_readable() {
    let mut f = fixture();
    let (t, b) = f.carried();
    let op = operator();
    let cv = f
        .store
        .create_conversation(
            &op,
            &NewConversation {
                title: "q".into(),
                agents: vec![b.agent.id.clone()],
            },
            "cv",
        )
        .unwrap()
        .value;
    let post = NewMessage {
        conversation: cv.id.clone(),
        acting: Acting::Human,
        body: "hello".into(),
        reply_to: None,
        idempotency: IdempotencyKey::Key("p".into()),
    };
    f.store.post_message(&op, &post).unwrap();

    let report = f.store.report_usage(&t, BUDGET, "compute").unwrap();
    assert_eq!(report.transfer.status, TransferStatus::Insolvent);
    let ep = f.store.get_endpoint(&op, &b.agent.id, &b.endpoint.id).unwrap();
    assert_eq!((ep.state, ep.wake_capable), (EndpointState::Attached, false));
    let actor = crate::conversation::AgentActor::of(&b.endpoint);
    assert!(matches!(
        f.store.claim_wake(&host(), &actor, CLAIM),
        Err(ConversationError::NotWakeCapable(id)) if id == b.endpoint.id
    ));
    // No carrier can make it wake-capable again.
    let before = f.bytes();
    assert!(matches!(
        f.store
            .register_wake_carrier(&b.agent.id, &b.endpoint.id, b.endpoint.generation),
        Err(ConversationError::NotWakeCapable(_))
    ));
    assert!(f.bytes() == before);
    let unbound = f.last_event(&t, EventKind::AgentUnbound);
    assert_eq!(
        unbound.detail,
        json!({ "agentId": b.agent.id, "endpointId": b.endpoint.id, "generation": 1, "endpoint": "wake_revoked" })
    );
    let audit = f.store.communication_events(0, Some(&b.agent.id), None, 50).unwrap();
    let revoked = audit.last().unwrap();
    assert_eq!(revoked.kind, AuditKind::EndpointWakeRevoked);
    assert_eq!(
        revoked.detail,
        json!({ "endpointId": b.endpoint.id, "controllerGeneration": 1 })
    );
    let kinds = f.kinds(&t);
    assert_eq!(
        &kinds[kinds.len() - 3..],
        [EventKind::AgentUnbound, EventKind::UsageReported, EventKind::Insolvent],
        "the unbinding is written by the compare-and-set, before the transition's own events"
    );
    // Still readable: the agent, its conversation and transcript.
    assert_eq!(f.store.get_agent(&op, &b.agent.id).unwrap().id, b.agent.id);
    assert_eq!(
        f.store
            .read_transcript(&op, &Acting::Human, &cv.id, 0, 10)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_task_attempt_starts_only_for_a_transfer_s_agent_that_can_take_a_turn() {
    let mut f = fixture();
    let op = operator();
    let task = |assignee: &str| crate::conversation::delegation::NewTask {
        assignee: assignee.to_owned(),
        title: "job".into(),
        instructions: "do it".into(),
        goal: None,
        start: true,
    };
    let unavailable = |e: ConversationError, agent: &str| {
        assert!(
            matches!(&e, ConversationError::AssigneeUnavailable(a) if a == agent),
            "{e:?}"
        );
    };
    // Bound, but its component takes no turns: no carrier was ever registered.
    let t = f.active(&TransferOwner::Operator);
    let no_turns = f.store.bind_transfer_agent(&t, LEASE).unwrap();
    // Carried, then insolvent: its wake capability is revoked.
    let (t, insolvent) = f.carried();
    f.store.report_usage(&t, BUDGET, "compute").unwrap();
    let before = f.bytes();
    for (i, agent) in [&no_turns.agent.id, &insolvent.agent.id].into_iter().enumerate() {
        let e = f
            .store
            .create_agent_task(&op, &Acting::Human, &task(agent), &format!("t-{i}"))
            .unwrap_err();
        unavailable(e, agent);
    }
    assert!(f.bytes() == before, "the refusals change nothing");
    // Not started, then started: refused the same way.
    let open = f
        .store
        .create_agent_task(
            &op,
            &Acting::Human,
            &crate::conversation::delegation::NewTask {
                start: false,
                ..task(&insolvent.agent.id)
            },
            "t-open",
        )
        .unwrap()
        .value;
    let e = f.store.start_task_attempt(&op, &Acting::Human, &open.id).unwrap_err();
    unavailable(e, &insolvent.agent.id);
    // A carried agent's attempt starts.
    let (_, carried) = f.carried();
    let started = f
        .store
        .create_agent_task(&op, &Acting::Human, &task(&carried.agent.id), "t-carried")
        .unwrap()
        .value;
    assert_eq!(
        started.current_attempt.map(|a| a.endpoint_id),
        Some(carried.endpoint.id)
    );
}

#[test]
fn a_claim_not_yet_dispatched_is_given_back_when_the_transfer_becomes_insolvent() {
    let mut f = fixture();
    let (t, b) = f.carried();
    let op = operator();
    let cv = f
        .store
        .create_conversation(
            &op,
            &NewConversation {
                title: "q".into(),
                agents: vec![b.agent.id.clone()],
            },
            "cv",
        )
        .unwrap()
        .value;
    let post = NewMessage {
        conversation: cv.id.clone(),
        acting: Acting::Human,
        body: "hello".into(),
        reply_to: None,
        idempotency: IdempotencyKey::Key("p".into()),
    };
    f.store.post_message(&op, &post).unwrap();
    let actor = crate::conversation::AgentActor::of(&b.endpoint);
    let claim = f.store.claim_wake(&host(), &actor, CLAIM).unwrap().unwrap();
    f.store.report_usage(&t, BUDGET, "compute").unwrap();
    assert!(matches!(
        f.store.prepare_dispatch(&host(), &actor, &claim.attempt.id),
        Err(ConversationError::InvalidAttemptState { .. })
    ));
    let wakes = f.count("SELECT count(*) FROM wakes WHERE state = 'pending'");
    assert_eq!(wakes, 1, "the wake is pending again, with no carrier to claim it");
}

#[test]
fn termination_and_the_reaper_detach_the_agents_endpoint() {
    let mut f = fixture();
    let op = operator();

    // terminate from active.
    let (t, b) = f.carried();
    f.store.terminate(&t, "operator request").unwrap();
    let ep = f.store.get_endpoint(&op, &b.agent.id, &b.endpoint.id).unwrap();
    assert_eq!((ep.state, ep.wake_capable), (EndpointState::Detached, false));
    assert_eq!(ep.ended_at, Some(START));
    let unbound = f.last_event(&t, EventKind::AgentUnbound);
    assert_eq!(unbound.detail["endpoint"], json!("detached"));
    assert_eq!(unbound.detail["endpointId"], json!(b.endpoint.id));
    let audit = f.store.communication_events(0, Some(&b.agent.id), None, 50).unwrap();
    assert_eq!(audit.last().unwrap().kind, AuditKind::EndpointDetached);
    assert_eq!(f.store.get_agent(&op, &b.agent.id).unwrap().id, b.agent.id);
    assert_eq!(
        f.store.agent_transfer(&b.agent.id).unwrap().unwrap().status,
        TransferStatus::Terminated
    );

    // insolvent, then the reaper ends it past the grace period.
    let (t2, b2) = f.carried();
    f.store.report_usage(&t2, BUDGET, "compute").unwrap();
    f.clock.advance(DEFAULT_GRACE_PERIOD + Duration::from_secs(1));
    let now = f.clock.now();
    assert_eq!(
        f.store.reap_insolvent(now, DEFAULT_GRACE_PERIOD).unwrap(),
        std::slice::from_ref(&t2)
    );
    let ep = f.store.get_endpoint(&op, &b2.agent.id, &b2.endpoint.id).unwrap();
    assert_eq!((ep.state, ep.wake_capable), (EndpointState::Detached, false));
    let kinds = f.kinds(&t2);
    assert_eq!(
        &kinds[kinds.len() - 2..],
        [EventKind::AgentUnbound, EventKind::Terminated]
    );
    assert_eq!(
        kinds.iter().filter(|k| **k == EventKind::AgentUnbound).count(),
        2,
        "one when insolvent, one when ended"
    );
    // Nothing left attached; a renewal of the old carrier is refused.
    assert_eq!(
        f.count("SELECT count(*) FROM agent_endpoints WHERE state = 'attached'"),
        0
    );
    assert!(matches!(
        f.store
            .renew_carrier_lease(&b2.agent.id, &b2.endpoint.id, b2.endpoint.generation, LEASE),
        Err(ConversationError::EndpointNotCurrent {
            state: EndpointState::Detached,
            ..
        })
    ));
}

#[test]
fn transfers_without_an_agent_move_as_before() {
    let mut f = fixture();
    let t = f.active(&TransferOwner::Operator);
    f.store.report_usage(&t, BUDGET, "compute").unwrap();
    f.store.terminate(&t, "done").unwrap();
    assert!(!f.kinds(&t).contains(&EventKind::AgentUnbound));
    let old = f.store.snapshot_state(&snapshot()).unwrap().id;
    f.clock.advance(DEFAULT_TRANSFER_TTL + Duration::from_secs(1));
    let now = f.clock.now();
    assert_eq!(
        f.store.reap_expired(now, DEFAULT_TRANSFER_TTL).unwrap(),
        std::slice::from_ref(&old)
    );
    assert!(!f.kinds(&old).contains(&EventKind::AgentUnbound));
}

#[test]
fn carried_leases_renew_in_one_commit_only_what_this_host_carries_and_is_due() {
    use crate::conversation::MAX_LEASE_RENEWALS;
    let mut f = fixture();
    let (_, one) = f.carried();
    let (_, two) = f.carried();
    let (_, three) = f.carried();
    let (rebound, _) = f.carried();
    // Nothing due: nothing written.
    let before = f.bytes();
    let r = f.store.renew_carried_leases(LEASE, LEASE / 2, 10).unwrap();
    assert!(r.endpoints.is_empty());
    assert!(f.bytes() == before);
    // Carried by another host now, and replaced by a re-bind (its new endpoint not registered
    // as a carrier): neither is this host's to renew.
    f.store
        .autocommit()
        .execute(
            "UPDATE agent_endpoints SET host_id = 'elsewhere' WHERE id = ?1",
            [&three.endpoint.id],
        )
        .unwrap();
    f.store.bind_transfer_agent(&rebound, LEASE).unwrap();
    f.clock.advance(LEASE / 2 + Duration::from_secs(1));
    let now = f.clock.now();
    // Bounds, each refused changing nothing; the largest limit is accepted.
    let before = f.bytes();
    for (lease, due, limit, field) in [
        (Duration::ZERO, Duration::ZERO, 10, "lease"),
        (Duration::from_secs(3601), LEASE, 10, "lease"),
        (LEASE, LEASE / 2 + Duration::from_secs(1), 10, "due_within"),
        (LEASE, LEASE / 2, 0, "limit"),
        (LEASE, LEASE / 2, MAX_LEASE_RENEWALS + 1, "limit"),
    ] {
        match f.store.renew_carried_leases(lease, due, limit) {
            Err(ConversationError::InvalidInput { field: got, .. }) => assert_eq!(got, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(f.bytes() == before);
    // The soonest first, at most `limit`, then the rest.
    let first = f.store.renew_carried_leases(LEASE, LEASE / 2, 1).unwrap();
    assert_eq!(first.endpoints.len(), 1);
    assert_eq!(first.lease_expires_at, now.saturating_add(LEASE));
    let rest = f
        .store
        .renew_carried_leases(LEASE, LEASE / 2, MAX_LEASE_RENEWALS)
        .unwrap();
    let mut renewed: Vec<_> = first.endpoints.into_iter().chain(rest.endpoints).collect();
    renewed.sort();
    let mut expected = vec![
        (one.agent.id.clone(), one.endpoint.id.clone(), 1),
        (two.agent.id.clone(), two.endpoint.id.clone(), 1),
    ];
    expected.sort();
    assert_eq!(renewed, expected);
    for b in [&one, &two] {
        let ep = f.store.get_endpoint(&operator(), &b.agent.id, &b.endpoint.id).unwrap();
        assert_eq!(ep.lease_expires_at, now.saturating_add(LEASE));
    }
    let other = f
        .store
        .get_endpoint(&operator(), &three.agent.id, &three.endpoint.id)
        .unwrap();
    assert_eq!(
        other.lease_expires_at,
        START.saturating_add(LEASE),
        "another host's lease is its own"
    );
    // Renewed ones are not due again.
    assert!(
        f.store
            .renew_carried_leases(LEASE, LEASE / 2, 10)
            .unwrap()
            .endpoints
            .is_empty()
    );
}

#[test]
fn active_among_says_which_transfers_are_active_in_batches() {
    let mut f = fixture();
    let active: Vec<String> = (0..150).map(|_| f.active(&TransferOwner::Operator)).collect();
    let ended = f.active(&TransferOwner::Operator);
    f.store.terminate(&ended, "done").unwrap();
    let unknown = "tr_000000000000000000000000".to_owned();
    // More than one batch of a hundred, in the order given, without the ended and the unknown.
    let mut asked = vec![ended.clone(), unknown.clone()];
    asked.extend(active.iter().rev().cloned());
    let mut expected = active.clone();
    expected.reverse();
    assert_eq!(f.store.active_among(&asked).unwrap(), expected);
    assert!(f.store.active_among(&[]).unwrap().is_empty());
    // Bounds: at most 1,000 ids, each well formed.
    let many = vec![unknown.clone(); crate::transfer::MAX_LIST_LIMIT];
    assert!(f.store.active_among(&many).unwrap().is_empty());
    let too_many = vec![unknown; crate::transfer::MAX_LIST_LIMIT + 1];
    assert!(matches!(
        f.store.active_among(&too_many),
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        f.store.active_among(&["x'; DROP TABLE transfers; --".to_owned()]),
        Err(Error::InvalidInput { .. })
    ));
}

#[test]
fn carrier_leases_renew_only_the_exact_current_endpoint() {
    let mut f = fixture();
    let (t, b) = f.carried();
    f.clock.advance(Duration::from_secs(100));
    let renewed = f
        .store
        .renew_carrier_lease(&b.agent.id, &b.endpoint.id, 1, Duration::from_secs(900))
        .unwrap();
    assert_eq!(
        renewed.lease_expires_at,
        f.clock.now().saturating_add(Duration::from_secs(900))
    );
    assert!(renewed.wake_capable);
    let before = f.bytes();
    assert!(matches!(
        f.store.renew_carrier_lease(&b.agent.id, &b.endpoint.id, 2, LEASE),
        Err(ConversationError::StaleGeneration {
            given: 2,
            current: 1,
            ..
        })
    ));
    assert!(matches!(
        f.store
            .renew_carrier_lease(&b.agent.id, &b.endpoint.id, 1, Duration::from_secs(3601)),
        Err(ConversationError::InvalidInput { field: "lease", .. })
    ));
    assert!(f.bytes() == before);
    // Replaced by a re-bind: the old generation is refused.
    f.store.bind_transfer_agent(&t, LEASE).unwrap();
    let before = f.bytes();
    assert!(matches!(
        f.store.renew_carrier_lease(&b.agent.id, &b.endpoint.id, 1, LEASE),
        Err(ConversationError::EndpointNotCurrent {
            state: EndpointState::Replaced,
            ..
        })
    ));
    assert!(f.bytes() == before);
    // An endpoint whose lease ran out is refused, and its expiry recorded.
    let fresh = f.store.bind_transfer_agent(&t, LEASE).unwrap();
    f.clock.advance(LEASE);
    assert!(matches!(
        f.store
            .renew_carrier_lease(&fresh.agent.id, &fresh.endpoint.id, fresh.endpoint.generation, LEASE),
        Err(ConversationError::EndpointExpired { .. })
    ));
    let ep = f
        .store
        .get_endpoint(&operator(), &fresh.agent.id, &fresh.endpoint.id)
        .unwrap();
    assert_eq!(ep.state, EndpointState::Expired);
}

#[test]
fn bound_active_transfers_are_paged_by_transfer_id() {
    let mut f = fixture();
    let mut bound = Vec::new();
    for i in 0..5 {
        let t = f.active(&TransferOwner::Operator);
        if i == 4 {
            continue; // active but never bound
        }
        let b = f.store.bind_transfer_agent(&t, LEASE).unwrap();
        bound.push((t, b.agent.id));
    }
    // One bound transfer becomes insolvent and drops out.
    let (gone, _) = bound.remove(0);
    f.store.report_usage(&gone, BUDGET, "compute").unwrap();
    bound.sort();
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = f.store.bound_active_transfers(after.as_deref(), 2).unwrap();
        assert!(page.len() <= 2);
        if page.is_empty() {
            break;
        }
        after = Some(page.last().unwrap().0.clone());
        seen.extend(page);
    }
    assert_eq!(seen, bound);
    for limit in [0, transfer::MAX_LIST_LIMIT + 1] {
        assert!(matches!(
            f.store.bound_active_transfers(None, limit),
            Err(Error::InvalidInput { field, .. }) if field == "limit"
        ));
    }
    assert!(matches!(
        f.store.bound_active_transfers(Some("agt_x"), 2),
        Err(Error::InvalidInput { .. })
    ));
    assert_eq!(f.store.agent_transfer("agt_000000000000000000000000").unwrap(), None);
    assert!(matches!(
        f.store.agent_transfer("tr_000000000000000000000000"),
        Err(Error::InvalidInput { .. })
    ));
}

#[test]
fn transfer_agents_are_exempt_from_the_per_principal_ceiling_but_not_the_total() {
    let mut f = fixture();
    let op = operator();
    let card = |i: u64| AgentCard {
        handle: format!("a{i}"),
        display_name: format!("A{i}"),
        description: String::new(),
        specialties: vec![],
    };
    for i in 0..MAX_AGENTS_PER_PRINCIPAL - 1 {
        f.store.create_agent(&op, &card(i), &format!("k{i}")).unwrap();
    }
    // One below the ceiling, plus two transfer agents of the same owner.
    for _ in 0..2 {
        let t = f.active(&TransferOwner::Operator);
        f.store.bind_transfer_agent(&t, LEASE).unwrap();
    }
    f.store.create_agent(&op, &card(1000), "last").unwrap();
    assert!(matches!(
        f.store.create_agent(&op, &card(1001), "over"),
        Err(ConversationError::LimitReached {
            what: "agents per principal",
            ..
        })
    ));
    // A binding never meets the per-principal ceiling.
    let t = f.active(&TransferOwner::Operator);
    f.store.bind_transfer_agent(&t, LEASE).unwrap();

    // The store-wide ceiling holds for bindings too, and refusing changes nothing.
    let t = f.active(&TransferOwner::ApiKey(ALICE.into()));
    // Every transfer agent above is counted; the rest of the store stands in as the count.
    let have = f.count("SELECT count(*) FROM agents");
    assert_eq!(f.count("SELECT agents FROM agent_total"), have);
    assert_eq!(
        f.count(&format!(
            "SELECT agents FROM created_agents WHERE owner_principal = '{}'",
            op.principal().as_str()
        )),
        MAX_AGENTS_PER_PRINCIPAL as i64,
        "transfer agents are not counted as created"
    );
    f.store
        .autocommit()
        .execute("UPDATE agent_total SET agents = ?1", [MAX_AGENTS as i64])
        .unwrap();
    let before = f.bytes();
    let err = f.store.bind_transfer_agent(&t, LEASE).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Conversation(ConversationError::LimitReached {
                what: "agents in total",
                ..
            })
        ),
        "{err:?}"
    );
    assert!(f.bytes() == before);
}
