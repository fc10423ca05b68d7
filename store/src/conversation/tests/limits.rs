//! Every bound at its limit and one past it, through the operations that enforce it.

use super::bounds::*;
use super::*;

#[test]
fn message_body() {
    let mut w = world();
    let alice = w.alice.clone();
    let cv = w.conversation(&alice, &[]);
    let m = w
        .post(&alice, &cv, Acting::Human, &"b".repeat(MAX_MESSAGE_BODY_BYTES))
        .unwrap();
    assert_eq!(m.body.len(), MAX_MESSAGE_BODY_BYTES);
    let err = w
        .post(&alice, &cv, Acting::Human, &"b".repeat(MAX_MESSAGE_BODY_BYTES + 1))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { field: "body", .. }), "{err}");
    assert!(w.post(&alice, &cv, Acting::Human, "   ").is_err());
    assert_eq!(w.count("SELECT count(*) FROM messages"), 1);
}

#[test]
fn messages_per_conversation() {
    let mut w = world();
    let alice = w.alice.clone();
    let cv = w.conversation(&alice, &[]);
    // Stand in for a million earlier posts.
    w.store
        .autocommit()
        .execute(
            "UPDATE conversations SET next_seq = ?1",
            [MAX_MESSAGES_PER_CONVERSATION as i64],
        )
        .unwrap();
    let last = w.post(&alice, &cv, Acting::Human, "the last one").unwrap();
    assert_eq!(last.seq, MAX_MESSAGES_PER_CONVERSATION);
    let err = w.post(&alice, &cv, Acting::Human, "one too many").unwrap_err();
    assert!(
        matches!(
            err,
            Error::LimitReached {
                what: "messages per conversation",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(w.count("SELECT count(*) FROM messages"), 1);
}

#[test]
fn agent_participants() {
    let mut w = world();
    let alice = w.alice.clone();
    let agents: Vec<Agent> = (0..=MAX_AGENT_PARTICIPANTS).map(|_| w.agent(&alice)).collect();
    let too_many = NewConversation {
        title: "crowd".into(),
        agents: agents.iter().map(|a| a.id.clone()).collect(),
    };
    assert!(matches!(
        w.store.create_conversation(&alice, &too_many, "c1"),
        Err(Error::InvalidInput { field: "agents", .. })
    ));
    let refs: Vec<&Agent> = agents[..MAX_AGENT_PARTICIPANTS].iter().collect();
    let cv = w.conversation(&alice, &refs);
    assert_eq!(cv.agents.len(), MAX_AGENT_PARTICIPANTS);
    let err = w
        .store
        .add_agent_participant(&alice, &cv.id, &agents[MAX_AGENT_PARTICIPANTS].id)
        .unwrap_err();
    assert!(matches!(err, Error::LimitReached { .. }), "{err}");
    // A post to a full conversation delivers to every agent.
    w.post(&alice, &cv, Acting::Human, "all hands").unwrap();
    assert_eq!(
        w.count("SELECT count(*) FROM deliveries"),
        MAX_AGENT_PARTICIPANTS as i64
    );
    assert_eq!(w.count("SELECT count(*) FROM wakes"), MAX_AGENT_PARTICIPANTS as i64);
}

#[test]
fn agents_per_principal() {
    let mut w = world();
    let alice = w.alice.clone();
    for _ in 0..MAX_AGENTS_PER_PRINCIPAL {
        w.agent(&alice);
    }
    let err = w.store.create_agent(&alice, &card("one-more"), "last").unwrap_err();
    assert!(
        matches!(
            err,
            Error::LimitReached {
                what: "agents per principal",
                ..
            }
        ),
        "{err}"
    );
    // Another principal is unaffected.
    let bob = w.bob.clone();
    w.agent(&bob);
}

#[test]
fn open_conversations_per_principal() {
    let mut w = world();
    let alice = w.alice.clone();
    let mut first = None;
    for _ in 0..MAX_OPEN_CONVERSATIONS_PER_PRINCIPAL {
        let cv = w.conversation(&alice, &[]);
        first.get_or_insert(cv.id);
    }
    let new = NewConversation {
        title: "one more".into(),
        agents: vec![],
    };
    let err = w.store.create_conversation(&alice, &new, "over").unwrap_err();
    assert!(matches!(err, Error::LimitReached { .. }), "{err}");
    // Closing one frees a slot.
    w.store.close_conversation(&alice, &first.unwrap()).unwrap();
    assert!(w.store.create_conversation(&alice, &new, "over").is_ok());
}

#[test]
fn card_fields() {
    let mut w = world();
    let alice = w.alice.clone();
    let max = AgentCard {
        handle: "h".repeat(MAX_HANDLE_BYTES),
        display_name: "d".repeat(MAX_DISPLAY_NAME_BYTES),
        description: "x".repeat(MAX_DESCRIPTION_BYTES),
        specialties: (0..MAX_SPECIALTIES)
            .map(|i| format!("{i:0>width$}", width = MAX_SPECIALTY_BYTES))
            .collect(),
    };
    w.store.create_agent(&alice, &max, "max").unwrap();
    type Grow = fn(&mut AgentCard);
    let cases: [(&str, Grow); 5] = [
        ("handle", |c| c.handle.push('h')),
        ("displayName", |c| c.display_name.push('d')),
        ("description", |c| c.description.push('x')),
        ("specialties", |c| c.specialties.push("extra".into())),
        ("specialties", |c| c.specialties[0].push('0')),
    ];
    for (field, grow) in cases {
        let mut c = max.clone();
        grow(&mut c);
        let err = w.store.create_agent(&alice, &c, "over").unwrap_err();
        assert!(
            matches!(err, Error::InvalidInput { field: f, .. } if f == field),
            "{field}: {err}"
        );
    }
    assert_eq!(w.count("SELECT count(*) FROM agents"), 1);
}

#[test]
fn titles_keys_pages_and_leases() {
    let mut w = world();
    let alice = w.alice.clone();
    let ok = NewConversation {
        title: "t".repeat(MAX_TITLE_BYTES),
        agents: vec![],
    };
    w.store.create_conversation(&alice, &ok, "t").unwrap();
    let over = NewConversation {
        title: "t".repeat(MAX_TITLE_BYTES + 1),
        agents: vec![],
    };
    assert!(matches!(
        w.store.create_conversation(&alice, &over, "t2"),
        Err(Error::InvalidInput { field: "title", .. })
    ));
    let key = "k".repeat(MAX_IDEMPOTENCY_KEY_BYTES);
    w.store.create_agent(&alice, &card("a"), &key).unwrap();
    assert!(matches!(
        w.store.create_agent(&alice, &card("a"), &format!("{key}k")),
        Err(Error::InvalidInput {
            field: "idempotencyKey",
            ..
        })
    ));
    assert_eq!(w.store.list_agents(&alice, None, MAX_PAGE_LIMIT).unwrap().len(), 1);
    assert!(matches!(
        w.store.list_agents(&alice, None, MAX_PAGE_LIMIT + 1),
        Err(Error::InvalidInput { field: "limit", .. })
    ));
    let a = w.agent(&alice);
    w.store
        .attach_endpoint(&alice, &a.id, MAX_ENDPOINT_LEASE, "e1")
        .unwrap();
    assert!(matches!(
        w.store
            .attach_endpoint(&alice, &a.id, MAX_ENDPOINT_LEASE + Duration::from_secs(1), "e2"),
        Err(Error::InvalidInput { field: "lease", .. })
    ));
    let actor = w.attach(&alice, &a);
    w.store.claim_wake(&alice, &actor, MAX_CLAIM_LEASE).unwrap();
    assert!(matches!(
        w.store
            .claim_wake(&alice, &actor, MAX_CLAIM_LEASE + Duration::from_secs(1)),
        Err(Error::InvalidInput { field: "lease", .. })
    ));
}
