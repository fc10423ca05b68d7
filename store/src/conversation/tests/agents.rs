//! Agents and endpoints.

use super::*;

#[test]
fn create_agent_gets_a_server_id_and_revision_one() {
    let mut w = world();
    let alice = w.alice.clone();
    let m = w.store.create_agent(&alice, &card("planner"), "create-1").unwrap();
    assert!(m.state_changed && !m.replayed);
    assert!(crate::id::is_well_formed(&m.value.id, AGENT_ID_PREFIX));
    assert_eq!(m.value.profile_revision, 1);
    assert_eq!(m.value.controller_generation, 0);
    assert_eq!(w.store.get_agent(&alice, &m.value.id).unwrap(), m.value);
    assert_eq!(w.store.list_agents(&alice, None, 10).unwrap(), vec![m.value]);
}

#[test]
fn update_is_revision_checked() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let mut c = card("renamed");
    c.specialties = vec!["a".into(), "b".into()];
    let up = w.store.update_agent(&alice, &a.id, 1, &c).unwrap();
    assert!(up.state_changed);
    assert_eq!(up.value.profile_revision, 2);
    assert_eq!(up.value.card, c);
    // A stale revision is an explicit conflict naming the current one, and changes nothing.
    let err = w.store.update_agent(&alice, &a.id, 1, &card("other")).unwrap_err();
    assert!(
        matches!(
            err,
            Error::RevisionConflict {
                expected: 1,
                current: 2,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(w.store.get_agent(&alice, &a.id).unwrap().card, c);
    // The same card again is a no-op.
    let same = w.store.update_agent(&alice, &a.id, 2, &c).unwrap();
    assert!(!same.state_changed);
    assert_eq!(same.value.profile_revision, 2);
}

#[test]
fn bad_cards_are_refused_and_change_nothing() {
    let mut w = world();
    let alice = w.alice.clone();
    let mut c = card("ok");
    c.specialties = vec!["dup".into(), "dup".into()];
    assert!(matches!(
        w.store.create_agent(&alice, &c, "k"),
        Err(Error::InvalidInput {
            field: "specialties",
            ..
        })
    ));
    let mut c = card("Bad Handle");
    c.handle = "Bad Handle".into();
    assert!(matches!(
        w.store.create_agent(&alice, &c, "k"),
        Err(Error::InvalidInput { field: "handle", .. })
    ));
    assert_eq!(w.count("SELECT count(*) FROM agents"), 0);
    assert_eq!(w.count("SELECT count(*) FROM communication_idempotency"), 0);
}

#[test]
fn scopes_are_checked_before_anything_else() {
    let mut w = world();
    let reader = Caller::new(w.alice.principal().clone(), &[Scope::Read]);
    assert!(matches!(
        w.store.create_agent(&reader, &card("x"), "k"),
        Err(Error::MissingScope(Scope::Manage))
    ));
    let manager = Caller::new(w.alice.principal().clone(), &[Scope::Manage]);
    let a = w.store.create_agent(&manager, &card("x"), "k").unwrap().value;
    assert!(matches!(
        w.store.get_agent(&manager, &a.id),
        Err(Error::MissingScope(Scope::Read))
    ));
}

#[test]
fn attach_assigns_the_next_generation_and_replaces_the_previous_endpoint() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let e1 = w.store.attach_endpoint(&alice, &a.id, LEASE, "att-1").unwrap().value;
    assert_eq!(e1.generation, 1);
    assert_eq!(e1.state, EndpointState::Attached);
    assert!(!e1.wake_capable, "attach input never makes an endpoint wake-capable");
    let e2 = w.store.attach_endpoint(&alice, &a.id, LEASE, "att-2").unwrap().value;
    assert_eq!(e2.generation, 2);
    let e1 = w.store.get_endpoint(&alice, &a.id, &e1.id).unwrap();
    assert_eq!(e1.state, EndpointState::Replaced);
    assert_eq!(
        w.count("SELECT count(*) FROM agent_endpoints WHERE state = 'attached'"),
        bounds::MAX_ATTACHED_ENDPOINTS_PER_AGENT as i64
    );
    // The replaced endpoint no longer admits anything.
    let err = w
        .store
        .read_inbox(&alice, &AgentActor::of(&e1), 0, 10, false)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::EndpointNotCurrent {
                state: EndpointState::Replaced,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(w.store.get_agent(&alice, &a.id).unwrap().controller_generation, 2);
}

#[test]
fn stale_generation_is_refused() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let mut actor = w.attach(&alice, &a);
    actor.generation += 1;
    let err = w.store.read_inbox(&alice, &actor, 0, 10, false).unwrap_err();
    assert!(
        matches!(
            err,
            Error::StaleGeneration {
                given: 2,
                current: 1,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn renew_extends_the_lease_and_expiry_is_materialized_lazily() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    w.clock.advance(LEASE - Duration::from_secs(10));
    let renewed = w.store.renew_endpoint(&alice, &actor, LEASE).unwrap();
    assert_eq!(renewed.lease_expires_at, w.store.now().saturating_add(LEASE));
    w.clock.advance(LEASE - Duration::from_secs(1));
    assert!(w.store.read_inbox(&alice, &actor, 0, 10, false).is_ok());
    w.clock.advance(Duration::from_secs(1));
    // Nothing runs on a timer: the row still says attached until an admission looks at it.
    assert_eq!(
        w.count("SELECT count(*) FROM agent_endpoints WHERE state = 'attached'"),
        1
    );
    let err = w.store.read_inbox(&alice, &actor, 0, 10, false).unwrap_err();
    assert!(matches!(err, Error::EndpointExpired { .. }), "{err}");
    let ep = w.store.get_endpoint(&alice, &a.id, &actor.endpoint).unwrap();
    assert_eq!(ep.state, EndpointState::Expired);
    assert!(!ep.wake_capable);
    assert!(ep.ended_at.is_some());
    let err = w.store.renew_endpoint(&alice, &actor, LEASE).unwrap_err();
    assert!(matches!(
        err,
        Error::EndpointNotCurrent {
            state: EndpointState::Expired,
            ..
        }
    ));
}

#[test]
fn detach_is_desired_state_idempotent_and_exact() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let old = w.attach(&alice, &a);
    let current = w.attach(&alice, &a);
    // Detaching the replaced endpoint changes nothing, and never withdraws its successor.
    let m = w.store.detach_endpoint(&alice, &a.id, &old.endpoint).unwrap();
    assert!(!m.state_changed);
    assert_eq!(m.value.state, EndpointState::Replaced);
    assert!(w.store.read_inbox(&alice, &current, 0, 10, false).is_ok());
    let m = w.store.detach_endpoint(&alice, &a.id, &current.endpoint).unwrap();
    assert!(m.state_changed);
    assert_eq!(m.value.state, EndpointState::Detached);
    let again = w.store.detach_endpoint(&alice, &a.id, &current.endpoint).unwrap();
    assert!(!again.state_changed);
    assert_eq!(again.value.state, EndpointState::Detached);
}

#[test]
fn detach_works_after_the_lease_ran_out() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    w.clock.advance(LEASE * 2);
    let m = w.store.detach_endpoint(&alice, &a.id, &actor.endpoint).unwrap();
    assert!(m.state_changed);
    assert_eq!(m.value.state, EndpointState::Detached);
}

#[test]
fn wake_capability_comes_only_from_host_registration_of_the_exact_generation() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let ep = w.store.attach_endpoint(&alice, &a.id, LEASE, "att").unwrap().value;
    let actor = AgentActor::of(&ep);
    assert!(matches!(
        w.store.claim_wake(&alice, &actor, CLAIM),
        Err(Error::NotWakeCapable(_))
    ));
    assert!(matches!(
        w.store.register_wake_carrier(&a.id, &ep.id, 2),
        Err(Error::StaleGeneration { .. })
    ));
    let ep = w.store.register_wake_carrier(&a.id, &ep.id, 1).unwrap();
    assert!(ep.wake_capable);
    assert_eq!(w.store.claim_wake(&alice, &actor, CLAIM).unwrap(), None);
}

#[test]
fn attach_is_idempotent_per_principal() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let first = w.store.attach_endpoint(&alice, &a.id, LEASE, "att").unwrap();
    let again = w.store.attach_endpoint(&alice, &a.id, LEASE, "att").unwrap();
    assert!(again.replayed && !again.state_changed);
    assert_eq!(again.value.id, first.value.id);
    assert_eq!(w.count("SELECT count(*) FROM agent_endpoints"), 1);
    let err = w
        .store
        .attach_endpoint(&alice, &a.id, Duration::from_secs(30), "att")
        .unwrap_err();
    assert!(matches!(
        err,
        Error::IdempotencyConflict {
            operation: "attach_endpoint"
        }
    ));
}
