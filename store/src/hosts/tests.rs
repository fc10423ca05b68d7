//! Hosts on one database, through two stores (two connections, two host ids) over the same
//! database on a shared manual clock: joining, renewing, the lease bounds, claims of lapsed and
//! stopped hosts, and the fencing of a host that lost its agents.

use std::time::Duration;

use crate::conversation::{Caller, EndpointState};
use crate::fault::FaultStep;
use crate::hosts::{HostState, MAX_HOST_ID_CHARS, MAX_HOST_LEASE, MIN_HOST_LEASE, validate_host_id};
use crate::testing::TestDb;
use crate::*;

const START: Timestamp = Timestamp::from_micros(1_796_039_139_000_000);
const HOST_LEASE: Duration = Duration::from_secs(10);
const ENDPOINT_LEASE: Duration = Duration::from_secs(3600);

struct Two {
    _db: TestDb,
    a: Store,
    b: Store,
    key: TokenKey,
    clock: ManualClock,
}

fn two() -> Two {
    let db = TestDb::new();
    let key = TokenKey::random();
    let clock = ManualClock::new(START);
    let (a, b) = (db.open_as("host-a", &clock, &key), db.open_as("host-b", &clock, &key));
    Two {
        _db: db,
        a,
        b,
        key,
        clock,
    }
}

impl Two {
    fn token(&self, t: &str, scope: TokenScope) -> String {
        issue_transfer_token(&self.key, t, scope, self.clock.now(), DEFAULT_TOKEN_TTL).unwrap()
    }

    /// A transfer pushed and with its activation begun by host A.
    fn activating_on_a(&mut self) -> String {
        let t = self.a.snapshot_state(&crate::testing::bare_snapshot()).unwrap().id;
        let tok = self.token(&t, TokenScope::ProvisionRuntime);
        self.a.provision_runtime(&t, Tier::Nano, 1_000, "c", &tok).unwrap();
        self.a.push_state(&t, None).unwrap();
        let tok = self.token(&t, TokenScope::Activate);
        self.a.begin_activation(&t, &tok).unwrap();
        t
    }

    /// A transfer active on host A with its agent bound and carried there.
    fn carried_by_a(&mut self) -> (String, AgentBinding) {
        let t = self.activating_on_a();
        self.a.complete_activation(&t).unwrap();
        let b = self.a.bind_transfer_agent(&t, ENDPOINT_LEASE).unwrap();
        self.a
            .register_wake_carrier(&b.agent.id, &b.endpoint.id, b.endpoint.generation)
            .unwrap();
        (t, b)
    }
}

fn lost(e: Error) -> String {
    match e {
        Error::HostLeaseLost { why, .. } => why,
        other => panic!("expected HostLeaseLost, got {other:?}"),
    }
}

#[test]
fn host_ids_and_leases_are_bounded() {
    assert!(validate_host_id("a").is_ok());
    assert!(validate_host_id(&"h".repeat(MAX_HOST_ID_CHARS)).is_ok());
    for bad in [
        String::new(),
        "h".repeat(MAX_HOST_ID_CHARS + 1),
        "-lead".into(),
        "a b".into(),
        "a/b".into(),
        "hôte".into(),
    ] {
        assert!(
            matches!(validate_host_id(&bad), Err(Error::InvalidInput { .. })),
            "{bad:?}"
        );
    }
    let mut t = two();
    for lease in [
        MIN_HOST_LEASE - Duration::from_millis(1),
        MAX_HOST_LEASE + Duration::from_secs(1),
    ] {
        assert!(matches!(t.a.join_host(lease, None), Err(Error::InvalidInput { .. })));
    }
    assert!(matches!(
        t.a.join_host(HOST_LEASE, Some(&"x".repeat(257))),
        Err(Error::InvalidInput { .. })
    ));
    assert!(t.a.hosts().unwrap().is_empty(), "a refused join records nothing");
    t.a.join_host(MIN_HOST_LEASE, None).unwrap();
    t.b.join_host(MAX_HOST_LEASE, Some("http://127.0.0.1:7070")).unwrap();
    let hosts = t.a.hosts().unwrap();
    assert_eq!(
        hosts.iter().map(|h| (h.id.as_str(), h.state)).collect::<Vec<_>>(),
        [("host-a", HostState::Live), ("host-b", HostState::Live)]
    );
    assert_eq!(hosts[1].address.as_deref(), Some("http://127.0.0.1:7070"));
}

#[test]
fn a_rejoin_is_the_next_incarnation_and_fences_the_previous_one() {
    let mut t = two();
    let first = t.a.join_host(HOST_LEASE, None).unwrap();
    assert_eq!(first.incarnation, 1);
    assert_eq!(
        t.a.claim_own_leftovers(&first, ENDPOINT_LEASE).unwrap().transfers.len(),
        0
    );
    t.clock.advance(Duration::from_secs(3));
    let renewed = t.a.renew_host_lease(&first, HOST_LEASE).unwrap();
    assert_eq!(renewed.expires_at, START.saturating_add(Duration::from_secs(13)));
    let second = t.a.take_over_host(HOST_LEASE, None).unwrap();
    assert_eq!(second.incarnation, 2);
    let why = lost(t.a.renew_host_lease(&first, HOST_LEASE).unwrap_err());
    assert!(why.contains("incarnation 2"), "{why}");
    t.a.renew_host_lease(&second, HOST_LEASE).unwrap();
}

#[test]
fn a_second_process_under_a_live_host_id_is_refused_unless_it_takes_over() {
    let mut t = two();
    let first = t.a.join_host(HOST_LEASE, Some("http://10.0.0.7:7070")).unwrap();
    // Another process started under the same id (two `ahp serve` on one machine).
    let mut twin = t._db.open_as("host-a", &t.clock, &t.key);
    t.clock.advance(Duration::from_secs(3));
    let before = crate::testing::dump(&mut twin);
    let refused = twin.join_host(HOST_LEASE, Some("http://10.0.0.8:7070")).unwrap_err();
    assert!(
        refused.to_string().contains("serving at http://10.0.0.7:7070"),
        "{refused}"
    );
    let Error::HostInUse {
        host,
        incarnation,
        address,
        until,
    } = refused
    else {
        panic!("expected HostInUse, got {refused:?}")
    };
    assert_eq!(
        (host.as_str(), incarnation, address.as_deref(), until),
        ("host-a", 1, Some("http://10.0.0.7:7070"), first.expires_at)
    );
    assert_eq!(crate::testing::dump(&mut twin), before, "the refusal changes nothing");
    t.a.renew_host_lease(&first, HOST_LEASE).unwrap();

    // Asked for, the take-over fences the first process out.
    let taken = twin.take_over_host(HOST_LEASE, None).unwrap();
    assert_eq!(taken.incarnation, 2);
    let why = lost(t.a.renew_host_lease(&first, HOST_LEASE).unwrap_err());
    assert!(why.contains("incarnation 2"), "{why}");
    // And that process, joining again, is refused in turn: no fencing loop.
    assert!(matches!(
        t.a.join_host(HOST_LEASE, None),
        Err(Error::HostInUse {
            incarnation: 2,
            address: None,
            ..
        })
    ));

    // Once the lease lapses (the twin died), a join needs no take-over.
    t.clock.advance(HOST_LEASE);
    assert_eq!(t.a.join_host(HOST_LEASE, None).unwrap().incarnation, 3);
    twin.renew_host_lease(&taken, HOST_LEASE).unwrap_err();
}

#[test]
fn a_lapsed_lease_cannot_be_renewed() {
    let mut t = two();
    let lease = t.a.join_host(HOST_LEASE, None).unwrap();
    t.clock.advance(HOST_LEASE);
    let why = lost(t.a.renew_host_lease(&lease, HOST_LEASE).unwrap_err());
    assert!(why.contains("ran out"), "{why}");
}

#[test]
fn a_live_host_is_not_claimed_and_a_lapsed_one_is_claimed_once() {
    let mut t = two();
    let la = t.a.join_host(HOST_LEASE, None).unwrap();
    let lb = t.b.join_host(HOST_LEASE * 3, None).unwrap();
    let (transfer, binding) = t.carried_by_a();
    assert_eq!(
        t.b.claim_lapsed_hosts(&lb, ENDPOINT_LEASE).unwrap(),
        vec![],
        "A's lease still holds"
    );

    t.clock.advance(HOST_LEASE + Duration::from_millis(1));
    let claims = t.b.claim_lapsed_hosts(&lb, ENDPOINT_LEASE).unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].host, "host-a");
    assert_eq!(claims[0].transfers, vec![transfer.clone()]);
    assert_eq!(claims[0].retired_endpoints, 1);
    assert_eq!((claims[0].parked, claims[0].unbound.len()), (1, 0));
    assert_eq!(
        t.b.claim_lapsed_hosts(&lb, ENDPOINT_LEASE).unwrap(),
        vec![],
        "claimed once"
    );

    let a = t.b.hosts().unwrap().into_iter().find(|h| h.id == "host-a").unwrap();
    assert_eq!((a.state, a.claimed_by.as_deref()), (HostState::Expired, Some("host-b")));
    assert_eq!(t.b.transfer(&transfer).unwrap().status, TransferStatus::Active);
    let operator: Caller = TransferOwner::Operator.caller().unwrap();
    let old =
        t.b.get_endpoint(&operator, &binding.agent.id, &binding.endpoint.id)
            .unwrap();
    assert_eq!((old.state, old.wake_capable), (EndpointState::Expired, false));

    // The claim bound the agent on B at the next generation, its wake carrier (parked: B
    // holds nothing of it until its next wake); A is fenced out everywhere.
    let parked = t.b.carried_agent(&binding.agent.id).unwrap().expect("carried by B");
    assert_eq!(parked.endpoint.generation, binding.endpoint.generation + 1);
    assert_eq!(parked.endpoint.host_id.as_deref(), Some("host-b"));
    assert!(t.a.carried_agent(&binding.agent.id).unwrap().is_none());
    assert!(lost(t.a.renew_host_lease(&la, HOST_LEASE).unwrap_err()).contains("claimed by host-b"));
    assert!(matches!(
        t.a.save_checkpoint(&transfer, b"stale"),
        Err(Error::CarriedElsewhere { host, .. }) if host == "host-b"
    ));
    assert!(matches!(
        t.a.bind_transfer_agent(&transfer, ENDPOINT_LEASE),
        Err(Error::CarriedElsewhere { .. })
    ));
    // Nor does it reserve a model call for the agent (the call it would then make).
    let ask = ReservationRequest {
        model: "default",
        prices: ModelPrices {
            input: 1,
            output: 1,
            cache_read: 0,
            cache_write: 0,
        },
        input_tokens_bound: 10,
        max_output_tokens: 10,
    };
    assert!(matches!(
        t.a.reserve_model_call(&transfer, &ask),
        Err(Error::CarriedElsewhere { host, .. }) if host == "host-b"
    ));
    assert!(matches!(
        t.b.reserve_model_call(&transfer, &ask),
        Ok(Reservation::Granted(_))
    ));
    // The budget a tool call is paid from is read only by the carrying host.
    assert!(matches!(
        t.a.budget_carried_here(&transfer),
        Err(Error::CarriedElsewhere { host, .. }) if host == "host-b"
    ));
    assert!(t.b.budget_carried_here(&transfer).unwrap().is_some());
    // Nor does its meter record spend for it, nor may it send a request for it.
    assert!(matches!(
        t.a.report_usage(&transfer, 1, "compute"),
        Err(Error::CarriedElsewhere { host, .. }) if host == "host-b"
    ));
    assert!(matches!(
        t.a.check_carried_here(&transfer),
        Err(Error::CarriedElsewhere { host, .. }) if host == "host-b"
    ));
    let spent = t.b.budget(&transfer).unwrap().unwrap().spent_micro_usd;
    assert_eq!(
        t.b.report_usage(&transfer, 1, "compute")
            .unwrap()
            .budget
            .spent_micro_usd,
        spent + 1
    );
    t.b.check_carried_here(&transfer).unwrap();
    assert!(
        t.a.register_wake_carrier(&binding.agent.id, &binding.endpoint.id, binding.endpoint.generation)
            .is_err(),
        "the old endpoint takes no carrier"
    );
    assert!(matches!(
        t.a.claim_lapsed_hosts(&la, ENDPOINT_LEASE),
        Err(Error::HostLeaseLost { .. })
    ));
    t.b.save_checkpoint(&transfer, b"fresh").unwrap();
    assert_eq!(t.a.carried_transfers(None, 10).unwrap(), Vec::<String>::new());
    assert_eq!(t.b.carried_transfers(None, 10).unwrap(), vec![transfer]);
}

#[test]
fn claiming_a_host_fails_the_activations_it_had_begun() {
    let mut t = two();
    t.a.join_host(HOST_LEASE, None).unwrap();
    let lb = t.b.join_host(HOST_LEASE * 3, None).unwrap();
    let transfer = t.activating_on_a();
    t.clock.advance(HOST_LEASE);
    let claims = t.b.claim_lapsed_hosts(&lb, ENDPOINT_LEASE).unwrap();
    assert_eq!(claims[0].interrupted, vec![transfer.clone()]);
    let status = t.b.get_status(&transfer).unwrap();
    assert_eq!(status.transfer.status, TransferStatus::Pushed);
    assert_eq!(status.events.last().unwrap().kind, EventKind::ActivationFailed);
}

#[test]
fn a_stopped_host_is_claimable_at_once_and_a_host_without_a_lease_claims_nothing() {
    let mut t = two();
    let la = t.a.join_host(HOST_LEASE, None).unwrap();
    let lb = t.b.join_host(HOST_LEASE, None).unwrap();
    let (transfer, _) = t.carried_by_a();
    t.a.leave_host(&la).unwrap();
    t.a.leave_host(&la).unwrap();
    // B's own lease has lapsed: it claims nothing, and nothing changes.
    t.clock.advance(HOST_LEASE);
    let before = crate::testing::dump(&mut t.b);
    assert!(matches!(
        t.b.claim_lapsed_hosts(&lb, ENDPOINT_LEASE),
        Err(Error::HostLeaseLost { .. })
    ));
    assert_eq!(crate::testing::dump(&mut t.b), before);
    let lb = t.b.join_host(HOST_LEASE, None).unwrap();
    let claims = t.b.claim_lapsed_hosts(&lb, ENDPOINT_LEASE).unwrap();
    assert_eq!(claims[0].transfers, vec![transfer]);
}

#[test]
fn a_rejoining_host_retires_its_previous_endpoints_and_keeps_its_transfers() {
    let mut t = two();
    t.a.join_host(HOST_LEASE, None).unwrap();
    let (transfer, binding) = t.carried_by_a();
    let again = t.a.take_over_host(HOST_LEASE, None).unwrap();
    let claim = t.a.claim_own_leftovers(&again, ENDPOINT_LEASE).unwrap();
    assert_eq!((claim.transfers, claim.retired_endpoints), (vec![transfer.clone()], 1));
    assert_eq!(t.a.carried_transfers(None, 10).unwrap(), vec![transfer.clone()]);
    let rebound = t.a.carried_agent(&binding.agent.id).unwrap().expect("carried again");
    assert_eq!(rebound.endpoint.generation, binding.endpoint.generation + 1);
    let old = t.a.get_endpoint(
        &TransferOwner::Operator.caller().unwrap(),
        &binding.agent.id,
        &binding.endpoint.id,
    );
    assert_eq!(old.unwrap().state, EndpointState::Expired);
}

#[test]
fn adopting_every_host_takes_each_agent_for_the_one_serving_process() {
    let mut t = two();
    t.a.join_host(HOST_LEASE, None).unwrap();
    let (transfer, _) = t.carried_by_a();
    t.b.join_host(HOST_LEASE, None).unwrap();
    assert_eq!(t.b.adopt_all_hosts().unwrap(), 1);
    assert_eq!(t.b.carried_transfers(None, 10).unwrap(), vec![transfer.clone()]);
    t.b.bind_transfer_agent(&transfer, ENDPOINT_LEASE).unwrap();
    let a = t.b.hosts().unwrap().into_iter().find(|h| h.id == "host-a").unwrap();
    assert_eq!(a.state, HostState::Expired);
}

impl Two {
    /// `n` transfers active on host A, each agent bound and its wake carrier there.
    fn many_carried_by_a(&mut self, n: usize) -> Vec<(String, String)> {
        (0..n)
            .map(|_| {
                let t = self.activating_on_a();
                let b = self
                    .a
                    .end_activation(
                        &t,
                        &ActivationEnd::bound(ENDPOINT_LEASE, true),
                        &ActivationWrites::default(),
                    )
                    .unwrap();
                (t, b.1.unwrap().agent.id)
            })
            .collect()
    }
}

impl Two {
    /// B claims A, and its second slice fails for good (every retry): its first stays done.
    fn claim_cut_after_one_slice(&mut self, lb: &HostLease) {
        let slice = crate::hosts::CLAIM_SLICE;
        self.b
            .inject_transient_fault(FaultStep::AttachEndpoint, slice as u32, MAX_WRITE_ATTEMPTS)
            .unwrap();
        self.b.claim_lapsed_hosts(lb, ENDPOINT_LEASE).unwrap_err();
        assert_eq!(self.b.carried_transfers(None, 1000).unwrap().len(), slice);
    }
}

/// Which host carries each agent of `agents` (as its rows say), and at which generation.
fn carriers(stores: &mut [&mut Store], agents: &[(String, String)]) -> Vec<(String, u64)> {
    agents
        .iter()
        .map(|(_, agent)| {
            let held: Vec<(String, u64)> = stores
                .iter_mut()
                .filter_map(|s| {
                    let c = s.carried_agent(agent).unwrap()?;
                    Some((s.host_id().to_owned(), c.endpoint.generation))
                })
                .collect();
            assert_eq!(held.len(), 1, "{agent} is carried by exactly one host: {held:?}");
            held[0].clone()
        })
        .collect()
}

#[test]
fn a_claim_moves_a_host_in_slices_and_binds_each_agent_parked_at_the_next_generation() {
    let mut t = two();
    t.a.join_host(HOST_LEASE, None).unwrap();
    let lb = t.b.join_host(HOST_LEASE * 3, None).unwrap();
    let n = 2 * crate::hosts::CLAIM_SLICE + 1;
    let agents = t.many_carried_by_a(n);
    t.clock.advance(HOST_LEASE);
    let claims = t.b.claim_lapsed_hosts(&lb, ENDPOINT_LEASE).unwrap();
    assert_eq!(claims.len(), 1);
    let c = &claims[0];
    assert_eq!(c.transfers.len(), n);
    assert_eq!(
        (c.parked, c.unbound.len(), c.retired_endpoints),
        (n as u64, 0, n as u64)
    );
    // One to begin, three slices of transfers and the empty one that ends them, one of
    // endpoints.
    assert_eq!(c.slices, 6);
    let mut stores = [&mut t.a, &mut t.b];
    assert!(
        carriers(&mut stores, &agents)
            .iter()
            .all(|c| *c == ("host-b".to_owned(), 2))
    );
    assert_eq!(t.b.carried_transfers(None, 1000).unwrap().len(), n);
}

#[test]
fn a_claim_cut_half_way_is_finished_by_its_claimant_and_never_by_another_while_it_lives() {
    if crate::testing::skip_on_postgres("the fault seam (SQL function and temp triggers) is SQLite's") {
        return;
    }
    let mut t = two();
    let mut c = t._db.open_as("host-c", &t.clock, &t.key);
    t.a.join_host(HOST_LEASE, None).unwrap();
    let lb = t.b.join_host(HOST_LEASE * 3, None).unwrap();
    let lc = c.join_host(HOST_LEASE * 3, None).unwrap();
    let n = crate::hosts::CLAIM_SLICE + 1;
    let agents = t.many_carried_by_a(n);
    t.clock.advance(HOST_LEASE);
    t.claim_cut_after_one_slice(&lb);
    // C leaves the rest to B, which is live.
    assert_eq!(c.claim_lapsed_hosts(&lc, ENDPOINT_LEASE).unwrap(), vec![]);
    let finished = t.b.claim_lapsed_hosts(&lb, ENDPOINT_LEASE).unwrap();
    assert_eq!(
        (finished.len(), finished[0].transfers.len(), finished[0].parked),
        (1, 1, 1)
    );
    let mut stores = [&mut t.a, &mut t.b, &mut c];
    assert!(
        carriers(&mut stores, &agents)
            .iter()
            .all(|c| *c == ("host-b".to_owned(), 2))
    );
}

#[test]
fn a_claim_whose_claimant_dies_half_way_is_finished_by_a_survivor() {
    if crate::testing::skip_on_postgres("the fault seam (SQL function and temp triggers) is SQLite's") {
        return;
    }
    let mut t = two();
    let mut c = t._db.open_as("host-c", &t.clock, &t.key);
    t.a.join_host(HOST_LEASE, None).unwrap();
    let lb = t.b.join_host(HOST_LEASE * 2, None).unwrap();
    let lc = c.join_host(HOST_LEASE * 2, None).unwrap();
    let n = crate::hosts::CLAIM_SLICE + 1;
    let agents = t.many_carried_by_a(n);
    t.clock.advance(HOST_LEASE);
    let lc = c.renew_host_lease(&lc, HOST_LEASE * 2).unwrap();
    t.claim_cut_after_one_slice(&lb);
    // B dies there; C claims B (what B had moved) and finishes B's claim of A.
    t.clock.advance(HOST_LEASE + Duration::from_millis(1));
    let claims = c.claim_lapsed_hosts(&lc, ENDPOINT_LEASE).unwrap();
    let claimed: Vec<(&str, usize)> = claims.iter().map(|c| (c.host.as_str(), c.transfers.len())).collect();
    assert_eq!(claimed, vec![("host-b", crate::hosts::CLAIM_SLICE), ("host-a", 1)]);
    let mut stores = [&mut t.a, &mut t.b, &mut c];
    let carried = carriers(&mut stores, &agents);
    assert!(carried.iter().all(|(host, _)| host == "host-c"), "{carried:?}");
    // The agents B had bound are one generation further on.
    assert_eq!(
        carried.iter().filter(|(_, generation)| *generation == 3).count(),
        crate::hosts::CLAIM_SLICE
    );
}
