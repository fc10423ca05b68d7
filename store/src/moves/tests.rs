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
    let db = TestDb::new();
    let key = TokenKey::random();
    let clock = ManualClock::new(START);
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
    (db, a, b, t, binding)
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
