//! `unbound_active_transfers`: the active transfers a host must (re-)bind — no agent, or no
//! attached wake-capable endpoint — paged by transfer id; and `unbound_among_active`, the same
//! found in bounded slices of the active transfers.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::*;

const LEASE: Duration = Duration::from_secs(600);

fn store() -> (Store, TokenKey, ManualClock) {
    let key = TokenKey::random();
    let clock = ManualClock::new(Timestamp::from_micros(1_796_039_139_000_000));
    let store = crate::testing::store()
        .unwrap()
        .with_clock(Arc::new(clock.clone()))
        .with_token_key(key.clone());
    (store, key, clock)
}

fn active(s: &mut Store, key: &TokenKey) -> String {
    let snap = SnapshotInput {
        source_host: "laptop".into(),
        system_prompt: String::new(),
        message_history: vec![],
        tool_state: json!({}),
        mcp_config: vec![],
    };
    let t = s.snapshot_state(&snap).unwrap().id;
    let tok = issue_transfer_token(key, &t, TokenScope::ProvisionRuntime, s.now(), DEFAULT_TOKEN_TTL).unwrap();
    s.provision_runtime(&t, Tier::Nano, 1_000, "forecaster", &tok).unwrap();
    s.push_state(&t, None).unwrap();
    let tok = issue_transfer_token(key, &t, TokenScope::Activate, s.now(), DEFAULT_TOKEN_TTL).unwrap();
    s.begin_activation(&t, &tok).unwrap();
    s.complete_activation(&t).unwrap();
    t
}

fn all_pages(s: &mut Store) -> Vec<(String, Option<String>)> {
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = s.unbound_active_transfers(after.as_deref(), 2).unwrap();
        assert!(page.len() <= 2);
        let Some((last, _)) = page.last() else { break };
        after = Some(last.clone());
        seen.extend(page);
    }
    seen
}

#[test]
fn active_transfers_without_a_carrier_are_listed_and_paged() {
    let (mut s, key, clock) = store();
    // Never bound (the bind failed, or the process died before it).
    let never = active(&mut s, &key);
    // Bound, but its carrier never registered.
    let unregistered = active(&mut s, &key);
    let b = s.bind_transfer_agent(&unregistered, LEASE).unwrap();
    let unregistered_agent = b.agent.id.clone();
    // Carried.
    let carried = active(&mut s, &key);
    let b = s.bind_transfer_agent(&carried, LEASE).unwrap();
    s.register_wake_carrier(&b.agent.id, &b.endpoint.id, b.endpoint.generation)
        .unwrap();
    // Carried, then its endpoint's lease ran out and was recorded.
    let lapsed = active(&mut s, &key);
    let b = s.bind_transfer_agent(&lapsed, LEASE).unwrap();
    s.register_wake_carrier(&b.agent.id, &b.endpoint.id, b.endpoint.generation)
        .unwrap();
    let lapsed_agent = b.agent.id.clone();
    // Not active: never listed.
    let insolvent = active(&mut s, &key);
    s.report_usage(&insolvent, 1_000, "compute").unwrap();
    let staged = s
        .snapshot_state(&SnapshotInput {
            source_host: "h".into(),
            system_prompt: String::new(),
            message_history: vec![],
            tool_state: json!({}),
            mcp_config: vec![],
        })
        .unwrap()
        .id;

    clock.advance(LEASE);
    s.reconcile_takeover().unwrap();
    let mut want = vec![
        (never.clone(), None),
        (unregistered.clone(), Some(unregistered_agent)),
        (carried.clone(), s.transfer(&carried).unwrap().agent_id),
        (lapsed.clone(), Some(lapsed_agent)),
    ];
    want.sort();
    // A takeover cleared every carrier: every active transfer needs one.
    assert_eq!(all_pages(&mut s), want);
    // Re-registered carriers drop out.
    for t in [&carried, &never] {
        let b = s.bind_transfer_agent(t, LEASE).unwrap();
        s.register_wake_carrier(&b.agent.id, &b.endpoint.id, b.endpoint.generation)
            .unwrap();
    }
    let left: Vec<String> = all_pages(&mut s).into_iter().map(|(t, _)| t).collect();
    let mut expect = vec![unregistered, lapsed];
    expect.sort();
    assert_eq!(left, expect);
    assert!(!left.contains(&staged) && !left.contains(&insolvent));
    for limit in [0, transfer::MAX_LIST_LIMIT + 1] {
        assert!(matches!(
            s.unbound_active_transfers(None, limit),
            Err(Error::InvalidInput { field, .. }) if field == "limit"
        ));
    }
    assert!(matches!(
        s.unbound_active_transfers(Some("agt_x"), 2),
        Err(Error::InvalidInput { .. })
    ));

    // The same walked in slices of two examined: the six transfers (four active, one insolvent,
    // one staged) fill three slices, the fourth finds the end.
    let (mut sliced, mut after, mut slices) = (Vec::new(), None::<String>, 0);
    loop {
        let slice = s.unbound_among_active(after.as_deref(), 2).unwrap();
        slices += 1;
        sliced.extend(slice.unbound.into_iter().map(|(t, _)| t));
        match slice.next_after {
            Some(last) => after = Some(last),
            None => break,
        }
    }
    assert_eq!(sliced, expect);
    assert_eq!(slices, 4);
    let whole = s.unbound_among_active(None, MAX_EXAMINED_TRANSFERS).unwrap();
    assert_eq!(whole.next_after, None, "one slice examined them all");
    for examine in [0, MAX_EXAMINED_TRANSFERS + 1] {
        assert!(matches!(
            s.unbound_among_active(None, examine),
            Err(Error::InvalidInput { field, .. }) if field == "examine"
        ));
    }
    assert!(matches!(
        s.unbound_among_active(Some("agt_x"), 2),
        Err(Error::InvalidInput { .. })
    ));
}

/// A carried agent whose endpoint lease lapsed while its host ran on (its renewals failed for
/// longer than the lease) is driven by no host (`carried_agent` wants a live lease): the repair
/// lists it, and binding it again carries it at the next generation.
#[test]
fn an_attached_endpoint_whose_lease_lapsed_is_unbound_until_bound_again() {
    let (mut s, key, clock) = store();
    let t = active(&mut s, &key);
    let b = s.bind_transfer_agent(&t, LEASE).unwrap();
    s.register_wake_carrier(&b.agent.id, &b.endpoint.id, b.endpoint.generation)
        .unwrap();
    assert_eq!(all_pages(&mut s), vec![]);
    clock.advance(LEASE - Duration::from_secs(1));
    assert_eq!(all_pages(&mut s), vec![], "the lease still holds");
    clock.advance(Duration::from_secs(1));
    assert!(s.carried_agent(&b.agent.id).unwrap().is_none(), "no host drives it");
    let want = vec![(t.clone(), Some(b.agent.id.clone()))];
    assert_eq!(all_pages(&mut s), want);
    let slice = s.unbound_among_active(None, MAX_EXAMINED_TRANSFERS).unwrap();
    assert_eq!(slice.unbound, want);

    let again = s.bind_transfer_agent(&t, LEASE).unwrap();
    assert_eq!(again.endpoint.generation, b.endpoint.generation + 1);
    s.register_wake_carrier(&again.agent.id, &again.endpoint.id, again.endpoint.generation)
        .unwrap();
    assert_eq!(all_pages(&mut s), vec![]);
    assert_eq!(
        s.carried_agent(&b.agent.id).unwrap().map(|c| c.endpoint.generation),
        Some(again.endpoint.generation)
    );
}
