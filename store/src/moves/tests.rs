//! Live moves through two stores over one database: the request's refusals, the hand-over
//! fenced by endpoint and generation, and the receiving host's bind completing the move.

use std::time::Duration;

use crate::conversation::{Caller, EndpointState};
use crate::testing::TestDb;
use crate::*;

const START: Timestamp = Timestamp::from_micros(1_796_039_139_000_000);
const HOST_LEASE: Duration = Duration::from_secs(10);
const ENDPOINT_LEASE: Duration = Duration::from_secs(3600);

/// Host A carries a bound agent; host B is live.
fn setup() -> (TestDb, Store, Store, String, AgentBinding) {
    let (db, a, b, t, binding, _, _) = setup_on(ManualClock::new(START));
    (db, a, b, t, binding)
}

/// [`setup`] on `clock`, also returning the clock and the token key (to open a third host).
fn setup_on(clock: ManualClock) -> (TestDb, Store, Store, String, AgentBinding, ManualClock, TokenKey) {
    let db = TestDb::new();
    let key = TokenKey::random();
    let (mut a, mut b) = (db.open_as("host-a", &clock, &key), db.open_as("host-b", &clock, &key));
    a.join_host(HOST_LEASE, None).unwrap();
    b.join_host(HOST_LEASE, None).unwrap();
    let t = a.snapshot_state(&crate::testing::bare_snapshot()).unwrap().id;
    let tok = issue_transfer_token(&key, &t, TokenScope::ProvisionRuntime, START, DEFAULT_TOKEN_TTL).unwrap();
    a.provision_runtime(&t, Tier::Nano, 1_000, "c", &tok).unwrap();
    a.push_state(&t, None).unwrap();
    let tok = issue_transfer_token(&key, &t, TokenScope::Activate, START, DEFAULT_TOKEN_TTL).unwrap();
    a.begin_activation(&t, &tok).unwrap();
    a.complete_activation(&t).unwrap();
    let binding = a.bind_transfer_agent(&t, ENDPOINT_LEASE).unwrap();
    (db, a, b, t, binding, clock, key)
}

/// [`setup_on`] plus host C, with B's lease lapsed (B was `kill -9`'d after the move towards it
/// was asked for) while A's and C's hold: `request` runs first (a move A→B).
fn b_dies_after(request: impl FnOnce(&mut Store, &AgentBinding)) -> (TestDb, Store, Store, String, AgentBinding) {
    let (db, mut a, _b, t, binding, clock, key) = setup_on(ManualClock::new(START));
    let mut c = db.open_as("host-c", &clock, &key);
    request(&mut a, &binding);
    clock.advance(HOST_LEASE / 2);
    let lease_a = lease_of(&mut a, "host-a");
    a.renew_host_lease(&lease_a, HOST_LEASE).unwrap();
    c.join_host(HOST_LEASE, None).unwrap();
    clock.advance(HOST_LEASE / 2 + Duration::from_secs(1));
    (db, a, c, t, binding)
}

/// The lease host `id` holds now, as its row says.
fn lease_of(store: &mut Store, id: &str) -> HostLease {
    let h = store.hosts().unwrap().into_iter().find(|h| h.id == id).unwrap();
    HostLease {
        host: h.id,
        incarnation: h.incarnation,
        expires_at: h.lease_expires_at,
    }
}

fn host_state(store: &mut Store, id: &str) -> crate::hosts::HostState {
    store.hosts().unwrap().into_iter().find(|h| h.id == id).unwrap().state
}

#[test]
fn a_move_towards_a_host_claimed_before_the_hand_over_is_dropped_and_the_agent_stays() {
    let (_db, mut a, mut c, t, binding) = b_dies_after(|a, binding| {
        a.request_agent_move(&binding.agent.id, "host-b").unwrap();
    });
    let lease_c = lease_of(&mut c, "host-c");
    let claims = c.claim_lapsed_hosts(&lease_c, ENDPOINT_LEASE).unwrap();
    assert_eq!(claims.iter().map(|c| c.host.as_str()).collect::<Vec<_>>(), ["host-b"]);
    assert_eq!(host_state(&mut a, "host-b"), crate::hosts::HostState::Expired);
    assert_eq!(a.agent_move(&t).unwrap(), None, "the claim dropped the move towards B");
    assert_eq!(a.pending_moves().unwrap(), vec![]);

    let ep = &binding.endpoint;
    assert!(matches!(
        a.hand_over_agent(&t, &ep.id, ep.generation),
        Err(Error::InvalidInput { reason, .. }) if reason.contains("no move")
    ));
    assert_eq!(
        a.carried_transfers(None, 10).unwrap(),
        vec![t.clone()],
        "A still carries it"
    );
    let operator: Caller = TransferOwner::Operator.caller().unwrap();
    assert_eq!(
        a.get_endpoint(&operator, &binding.agent.id, &ep.id).unwrap().state,
        EndpointState::Attached
    );
    a.save_checkpoint(&t, b"still on a").unwrap();
}

#[test]
fn a_hand_over_towards_a_lapsed_host_is_refused_and_drops_the_move() {
    let (_db, mut a, _c, t, binding) = b_dies_after(|a, binding| {
        a.request_agent_move(&binding.agent.id, "host-b").unwrap();
    });
    // B's lease ran out but nobody claimed it yet: it is still `live` in its row.
    assert_eq!(host_state(&mut a, "host-b"), crate::hosts::HostState::Live);
    let ep = &binding.endpoint;
    match a.hand_over_agent(&t, &ep.id, ep.generation) {
        Err(Error::MoveTargetNotLive { transfer, host, why }) => {
            assert_eq!((transfer.as_str(), host.as_str()), (t.as_str(), "host-b"));
            assert!(why.contains("lease ran out"), "{why}");
        }
        other => panic!("expected MoveTargetNotLive, got {other:?}"),
    }
    assert_eq!(a.agent_move(&t).unwrap(), None, "the move is dropped");
    assert_eq!(
        a.carried_transfers(None, 10).unwrap(),
        vec![t.clone()],
        "A still carries it"
    );
    let operator: Caller = TransferOwner::Operator.caller().unwrap();
    assert_eq!(
        a.get_endpoint(&operator, &binding.agent.id, &ep.id).unwrap().state,
        EndpointState::Attached,
        "its endpoint is not detached"
    );
}

#[test]
fn an_agent_stranded_on_an_expired_host_is_claimed_by_a_live_one() {
    let (_db, mut a, mut c, t, binding) = b_dies_after(|_, _| {});
    let lease_c = lease_of(&mut c, "host-c");
    c.claim_lapsed_hosts(&lease_c, ENDPOINT_LEASE).unwrap();
    assert_eq!(host_state(&mut a, "host-b"), crate::hosts::HostState::Expired);
    // What a build that handed agents over to a claimed host left: a transfer carried by B.
    a.autocommit()
        .execute("UPDATE transfers SET host_id = 'host-b' WHERE id = ?1", [&t])
        .unwrap();
    let ep = &binding.endpoint;
    a.autocommit()
        .execute("UPDATE agent_endpoints SET state = 'detached' WHERE id = ?1", [&ep.id])
        .unwrap();
    assert_eq!(a.unbound_active_transfers(None, 10).unwrap(), vec![]);
    assert_eq!(c.unbound_active_transfers(None, 10).unwrap(), vec![]);

    let claims = c.claim_lapsed_hosts(&lease_c, ENDPOINT_LEASE).unwrap();
    assert_eq!(claims.len(), 1, "{claims:?}");
    assert_eq!(
        (claims[0].host.as_str(), claims[0].transfers.clone()),
        ("host-b", vec![t.clone()])
    );
    assert_eq!(c.carried_transfers(None, 10).unwrap(), vec![t.clone()]);
    assert_eq!(
        c.unbound_active_transfers(None, 10).unwrap(),
        vec![(t.clone(), Some(binding.agent.id.clone()))]
    );
    let rebound = c.bind_transfer_agent(&t, ENDPOINT_LEASE).unwrap();
    assert_eq!(rebound.endpoint.generation, ep.generation + 1);
    assert_eq!(
        c.claim_lapsed_hosts(&lease_c, ENDPOINT_LEASE).unwrap(),
        vec![],
        "claimed once"
    );
}

#[test]
fn a_move_request_is_refused_unless_it_can_happen() {
    let (_db, mut a, _b, _t, binding) = setup();
    let agent = binding.agent.id.as_str();
    let before = crate::testing::dump(&mut a);
    for (who, to) in [
        (agent, "host-a"),
        (agent, "host-z"),
        (agent, "bad host"),
        ("agt_000000000000000000000000", "host-b"),
        ("not-an-agent", "host-b"),
    ] {
        assert!(
            matches!(a.request_agent_move(who, to), Err(Error::InvalidInput { .. })),
            "{who} -> {to}"
        );
    }
    assert_eq!(crate::testing::dump(&mut a), before, "refusals change nothing");
    let m = a.request_agent_move(agent, "host-b").unwrap();
    assert_eq!(
        (m.from_host.as_str(), m.to_host.as_str(), m.handed_over_at),
        ("host-a", "host-b", None)
    );
    assert!(matches!(
        a.request_agent_move(agent, "host-b"),
        Err(Error::InvalidInput { reason, .. }) if reason.contains("already pending")
    ));
}

#[test]
fn the_hand_over_is_fenced_and_the_receiving_bind_completes_the_move() {
    let (_db, mut a, mut b, t, binding) = setup();
    let (agent, ep) = (binding.agent.id.clone(), binding.endpoint.clone());
    assert!(
        matches!(
            a.hand_over_agent(&t, &ep.id, ep.generation),
            Err(Error::InvalidInput { .. })
        ),
        "nothing pending"
    );
    a.request_agent_move(&agent, "host-b").unwrap();
    assert_eq!(b.pending_moves().unwrap(), vec![], "B is not the source");
    assert_eq!(a.pending_moves().unwrap().len(), 1);
    // B can neither hand over what A carries nor bind it before the hand-over.
    assert!(matches!(
        b.hand_over_agent(&t, &ep.id, ep.generation),
        Err(Error::CarriedElsewhere { .. })
    ));
    assert!(matches!(
        b.bind_transfer_agent(&t, ENDPOINT_LEASE),
        Err(Error::CarriedElsewhere { .. })
    ));
    let before = crate::testing::dump(&mut a);
    assert!(
        matches!(
            a.hand_over_agent(&t, &ep.id, ep.generation + 1),
            Err(Error::InvalidInput { .. })
        ),
        "a stale generation"
    );
    assert_eq!(crate::testing::dump(&mut a), before);

    let handed = a.hand_over_agent(&t, &ep.id, ep.generation).unwrap();
    assert!(handed.handed_over_at.is_some());
    assert_eq!(a.pending_moves().unwrap(), vec![]);
    let operator: Caller = TransferOwner::Operator.caller().unwrap();
    assert_eq!(
        a.get_endpoint(&operator, &agent, &ep.id).unwrap().state,
        EndpointState::Detached
    );
    assert!(matches!(
        a.save_checkpoint(&t, b"late"),
        Err(Error::CarriedElsewhere { .. })
    ));
    assert_eq!(b.carried_transfers(None, 10).unwrap(), vec![t.clone()]);
    assert_eq!(
        b.unbound_active_transfers(None, 10).unwrap(),
        vec![(t.clone(), Some(agent.clone()))]
    );
    assert_eq!(
        a.unbound_active_transfers(None, 10).unwrap(),
        vec![],
        "A does not repair it"
    );

    let rebound = b.bind_transfer_agent(&t, ENDPOINT_LEASE).unwrap();
    assert_eq!(rebound.endpoint.generation, ep.generation + 1);
    assert_eq!(b.agent_move(&t).unwrap(), None, "the move is complete");
    b.save_checkpoint(&t, b"on b").unwrap();
}
