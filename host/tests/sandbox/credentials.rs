//! Credentials: injected by the host, never in the guest unless revealed; a revealed one's audit
//! durable before the next request; a snapshot cannot use one the policy does not bind.

#[allow(unused_imports)]
use super::*;

#[test]
pub(super) fn credential_prober() {
    let h = host();
    let id = h.pushed(&snapshot(1, json!({})), Tier::Nano, 1_000_000, "credential-prober");
    let report = h.activate(&id);
    // The prober resumes only if every probe was refused and its own ref resolved.
    assert_eq!(report.outcome, RunOutcome::Returned);
    let denied = h.events(&id, EventKind::CredentialDenied);
    let refs: Vec<&str> = denied.iter().map(|d| d["credRef"].as_str().unwrap()).collect();
    assert_eq!(refs, ["someone-elses-key", "../token-key", "../../etc/passwd"]);
    assert!(denied[0]["reason"].as_str().unwrap().contains("not listed"));
    assert!(denied[1]["reason"].as_str().unwrap().contains("malformed"));
    let resolved = h.events(&id, EventKind::CredentialResolved);
    assert_eq!(resolved.len(), 1);
    let log = serde_json::to_string(&h.db().get_status(&id).unwrap().events).unwrap();
    assert!(
        !log.contains(SECRET) && !log.contains("host secret"),
        "no value is audited"
    );
}

#[test]
pub(super) fn an_activation_commits_twice_whatever_its_resume_writes() {
    // The forecaster's resume resolves a credential (audited), saves a checkpoint and burns
    // fuel (the meter settles): all of it rides in the completing commit, and so does the
    // binding of its agent with its wake carrier.
    let h = host_on_a_file();
    let id = h.pushed(&snapshot(3, inventory()), Tier::Nano, 1_000_000, "forecaster");
    let tok = testing::activate_token(&h.db(), &h.key, &id).unwrap();
    let group = || h.host.store().group().unwrap().stats().commits;
    let before = group();
    let report = h.host.activate(&id, &tok).unwrap();
    assert_eq!(report.outcome, RunOutcome::Returned, "{:?}", report.diagnosis);
    assert_eq!(group() - before, 2, "begin and complete, nothing between or after");
    let agent = report.transfer.agent_id.clone().expect("bound");
    assert!(h.host.agents().carrier(&agent).is_some(), "this host carries its turns");
    let events = h.db().get_status(&id).unwrap().events;
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    use EventKind as K;
    for k in [K::CredentialResolved, K::UsageReported, K::Activated, K::AgentBound] {
        assert!(kinds.contains(&k), "{k:?} in {kinds:?}");
    }
    let compute = events
        .iter()
        .filter(|e| e.kind == K::UsageReported && e.detail["kind"] == "compute")
        .count();
    assert_eq!(compute, 1, "the meter's settlements are one spend: {kinds:?}");
    assert!(
        h.db().load_checkpoint(&id).unwrap().is_some(),
        "the checkpoint was saved"
    );
    let budget = h.db().budget(&id).unwrap().unwrap();
    assert_eq!(
        budget.spent_micro_usd,
        report.compute_micro_usd + forecaster_model_spend(&events)
    );
}

/// The spend the forecaster reported itself (not compute), from its `usage_reported` events.
pub(super) fn forecaster_model_spend(events: &[ahp_store::Event]) -> u64 {
    events
        .iter()
        .filter(|e| e.kind == EventKind::UsageReported && e.detail["kind"] != "compute")
        .map(|e| e.detail["amountMicroUsd"].as_u64().unwrap())
        .sum()
}

#[test]
pub(super) fn a_revealed_credential_s_audit_is_durable_before_the_guest_s_next_request_goes_out() {
    // The activation holds its writes for its end; a guest that reads a secret and then sends
    // a request (which could carry it) must find its `credential_resolved` row already
    // committed when that request arrives. The prober GETs A, resolves A's ref (revealed),
    // then GETs B.
    use std::sync::atomic::Ordering;
    let h = host();
    let store = h.host.store().clone();
    let resolved_at_b = Arc::new(Mutex::new(Vec::new()));
    let (seen, watched) = (resolved_at_b.clone(), Arc::new(Mutex::new(String::new())));
    let transfer = watched.clone();
    let b = loopback_seeing(move || {
        let id = transfer.lock().unwrap().clone();
        let events = store.locked().get_status(&id).unwrap().events;
        // The guest's own resolution (the injection into A's request has `"use": "injected"`).
        let n = events
            .iter()
            .filter(|e| e.kind == EventKind::CredentialResolved && e.detail.get("use").is_none())
            .count();
        seen.lock().unwrap().push(n);
    });
    let a = loopback();
    h.allow(
        json!([
            { "server": a.url, "credential": { "credRef": "inventory-api", "reveal": true } },
            { "server": b.url },
        ]),
        true,
    );
    let snap = snapshot_with(&[(&a.url, "inventory-api"), (&b.url, "unbound")]);
    let id = h.pushed(&snap, Tier::Nano, 1_000_000, "egress-prober");
    *watched.lock().unwrap() = id.clone();
    let report = h.activate(&id);
    assert_eq!(report.outcome, RunOutcome::Returned);
    let log = h.sandboxes.guest_log(&id).unwrap();
    assert!(log.contains("resolve inventory-api -> revealed"), "{log}");
    assert_eq!(b.requests.load(Ordering::Relaxed), 1, "{log}");
    assert_eq!(
        *resolved_at_b.lock().unwrap(),
        [1],
        "the audit was committed before B was reached"
    );
    // And the rest of the activation's writes landed with its end: the denial of the unbound ref.
    let events = h.db().get_status(&id).unwrap().events;
    let at = |k: EventKind| events.iter().position(|e| e.kind == k).unwrap();
    assert_eq!(
        events.iter().filter(|e| e.kind == EventKind::CredentialDenied).count(),
        1
    );
    assert!(at(EventKind::CredentialDenied) < at(EventKind::Activated));
}

#[test]
pub(super) fn an_injected_credential_reaches_the_server_and_never_the_guest() {
    use std::sync::atomic::Ordering;
    let server = loopback();
    let h = host();
    // The operator binds inventory-api to the loopback server, injected and not revealed, and
    // lets this test reach loopback.
    h.allow(
        json!([{ "server": server.url, "credential": { "credRef": "inventory-api" } }]),
        true,
    );
    let (id, log) = h.probe(&snapshot_with(&[(&server.url, "inventory-api")]));
    assert!(log.contains(&format!("GET {} -> 200 (2 bytes)", server.url)), "{log}");
    assert_eq!(*server.authorizations.lock().unwrap(), [format!("Bearer {SECRET}")]);
    assert!(
        log.contains("resolve inventory-api -> refused: NotAllowed(\"the operator's policy injects it"),
        "{log}"
    );
    assert!(!log.contains(SECRET), "{log}");
    let events = h.db().get_status(&id).unwrap().events;
    let injected: Vec<&Value> = events
        .iter()
        .filter(|e| e.kind == EventKind::CredentialResolved)
        .map(|e| &e.detail)
        .collect();
    assert_eq!(
        injected,
        [&json!({ "credRef": "inventory-api", "server": server.url.replace("/mcp", ""), "use": "injected" })]
    );
    assert!(!serde_json::to_string(&events).unwrap().contains(SECRET));
    assert_eq!(server.requests.load(Ordering::Relaxed), 1);
}

#[test]
pub(super) fn a_snapshot_cannot_use_a_credential_the_policy_does_not_bind_to_that_server() {
    let server = loopback();
    let h = host();
    // The policy binds `crm-key` to the loopback server; the snapshot names inventory-api for
    // it (which the policy binds, and reveals, only for the inventory server), and names a
    // server the policy does not list at all.
    std::fs::write(h._dir.path().join("vault/crm-key"), "crm-secret").unwrap();
    h.allow(
        json!([{ "server": server.url, "credential": { "credRef": "crm-key", "reveal": true } }]),
        true,
    );
    let (_, log) = h.probe(&snapshot_with(&[
        (&server.url, "inventory-api"),
        ("http://127.0.0.1:9/other", "crm-key"),
    ]));
    assert!(log.contains(&format!("GET {} -> 200", server.url)), "reachable: {log}");
    assert_eq!(*server.authorizations.lock().unwrap(), [""], "no credential injected");
    assert!(
        log.contains("resolve inventory-api -> refused: NotAllowed(\"the operator's policy does not bind it"),
        "{log}"
    );
    assert!(
        refused_with(&log, "http://127.0.0.1:9/other", "HttpRequestDenied"),
        "{log}"
    );
    assert!(
        log.contains("resolve crm-key -> refused: NotAllowed(\"the operator's policy does not bind it"),
        "{log}"
    );
    assert!(!log.contains(SECRET) && !log.contains("crm-secret"));
}
