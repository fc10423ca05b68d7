//! An activation's held writes recorded with its end: in order, in the end's commit, checked
//! before anything is written. On either backend (`crate::testing`).

use serde_json::json;

use crate::testing;
use crate::*;

const BUDGET: u64 = 1_000;

/// An activation completed without a bind.
const COMPLETED: ActivationEnd = ActivationEnd::Completed { bind: None };

/// An activation failed for `reason`.
fn failed(reason: &str) -> ActivationEnd {
    ActivationEnd::Failed {
        reason: reason.to_owned(),
    }
}

/// A store and a transfer whose activation is in progress (tier nano, `BUDGET` allocated).
fn activating() -> (Store, String) {
    let key = TokenKey::random();
    let mut store = testing::store().unwrap().with_token_key(key.clone());
    let t = store.snapshot_state(&testing::bare_snapshot()).unwrap().id;
    let tok = issue_transfer_token(&key, &t, TokenScope::ProvisionRuntime, store.now(), DEFAULT_TOKEN_TTL).unwrap();
    store
        .provision_runtime(&t, Tier::Nano, BUDGET, "forecaster", &tok)
        .unwrap();
    store.push_state(&t, None).unwrap();
    let tok = issue_transfer_token(&key, &t, TokenScope::Activate, store.now(), DEFAULT_TOKEN_TTL).unwrap();
    store.begin_activation(&t, &tok).unwrap();
    (store, t)
}

/// What a forecaster's `resume` holds: one audited resolution, its own report, the meter's
/// settlement and a checkpoint.
fn resume_writes() -> ActivationWrites {
    let mut w = ActivationWrites::default();
    w.writes.push(ActivationWrite::Event {
        kind: EventKind::CredentialResolved,
        detail: json!({ "credRef": "inventory-api" }),
    });
    w.add_spend("model_tokens", 5);
    w.add_spend("compute", 10);
    w.checkpoint = Some(b"memory".to_vec());
    w
}

fn kinds(store: &mut Store, t: &str) -> Vec<EventKind> {
    store.get_status(t).unwrap().events.iter().map(|e| e.kind).collect()
}

#[test]
fn the_writes_ride_in_the_completion_in_their_order() {
    let (mut store, t) = activating();
    let done = store
        .end_activation(&t, &COMPLETED, &resume_writes())
        .map(|done| done.0)
        .unwrap();
    assert_eq!(done.status, TransferStatus::Active);
    use EventKind as K;
    assert_eq!(
        kinds(&mut store, &t)[4..],
        [K::CredentialResolved, K::UsageReported, K::UsageReported, K::Activated]
    );
    assert_eq!(store.budget(&t).unwrap().unwrap().spent_micro_usd, 15);
    assert_eq!(store.load_checkpoint(&t).unwrap().unwrap().state, b"memory");
}

#[test]
fn held_spend_that_reaches_the_allocation_makes_the_completion_insolvent() {
    let (mut store, t) = activating();
    let mut w = ActivationWrites::default();
    w.add_spend("compute", BUDGET);
    let done = store.end_activation(&t, &COMPLETED, &w).map(|done| done.0).unwrap();
    assert_eq!(done.status, TransferStatus::Insolvent);
    let k = kinds(&mut store, &t);
    assert_eq!(k[k.len() - 2..], [EventKind::Activated, EventKind::Insolvent]);
}

#[test]
fn a_failed_activation_keeps_its_audit_and_its_spend() {
    let (mut store, t) = activating();
    let failed = store
        .end_activation(&t, &failed("resume returned an error"), &resume_writes())
        .map(|done| done.0)
        .unwrap();
    assert_eq!(failed.phase(), Phase::settled(TransferStatus::Pushed));
    let k = kinds(&mut store, &t);
    assert!(k.contains(&EventKind::CredentialResolved), "{k:?}");
    assert_eq!(k.last(), Some(&EventKind::ActivationFailed));
    assert_eq!(store.budget(&t).unwrap().unwrap().spent_micro_usd, 15);
}

#[test]
fn writes_recorded_before_the_end_leave_the_activation_in_progress() {
    let (mut store, t) = activating();
    store.record_activation_writes(&t, &resume_writes()).unwrap();
    let now = store.transfer(&t).unwrap();
    assert!(now.activating, "still activating");
    assert!(kinds(&mut store, &t).contains(&EventKind::CredentialResolved));
    // Recorded once: the end records only what was held since.
    store
        .end_activation(&t, &COMPLETED, &ActivationWrites::default())
        .map(|done| done.0)
        .unwrap();
    assert_eq!(store.budget(&t).unwrap().unwrap().spent_micro_usd, 15);
    // Once active there is no activation to record into.
    let before = testing::dump(&mut store);
    let refused = store.record_activation_writes(&t, &resume_writes()).unwrap_err();
    assert!(matches!(refused, Error::InvalidTransition { .. }), "{refused:?}");
    assert_eq!(testing::dump(&mut store), before);
}

#[test]
fn a_refused_set_changes_nothing_and_the_activation_can_still_end() {
    let (mut store, t) = activating();
    let max_checkpoint = Tier::Nano.limits().checkpoint_bytes as usize;
    let with = |f: &dyn Fn(&mut ActivationWrites)| {
        let mut w = resume_writes();
        f(&mut w);
        w
    };
    let refused_sets = [
        // A transition's kind cannot be forged through an observation.
        with(&|w| {
            w.writes.push(ActivationWrite::Event {
                kind: EventKind::Activated,
                detail: json!({}),
            })
        }),
        with(&|w| {
            w.writes.push(ActivationWrite::Event {
                kind: EventKind::CredentialDenied,
                detail: json!("not an object"),
            })
        }),
        with(&|w| {
            w.writes.push(ActivationWrite::Event {
                kind: EventKind::CredentialDenied,
                detail: json!({ "credRef": "x".repeat(event::MAX_EVENT_DETAIL_BYTES) }),
            })
        }),
        with(&|w| {
            w.writes.push(ActivationWrite::Spend {
                kind: "compute".into(),
                micro_usd: 0,
            })
        }),
        with(&|w| {
            w.writes.push(ActivationWrite::Spend {
                kind: "compute".into(),
                micro_usd: MAX_USAGE_REPORT_MICRO_USD + 1,
            })
        }),
        with(&|w| {
            w.writes.push(ActivationWrite::Spend {
                kind: "Not-A-Kind".into(),
                micro_usd: 1,
            })
        }),
        with(&|w| w.checkpoint = Some(vec![0; max_checkpoint + 1])),
        with(&|w| {
            w.writes = (0..=MAX_ACTIVATION_WRITES)
                .map(|_| ActivationWrite::Event {
                    kind: EventKind::CredentialDenied,
                    detail: json!({}),
                })
                .collect();
        }),
    ];
    let before = testing::dump(&mut store);
    for (i, w) in refused_sets.iter().enumerate() {
        for e in [
            store.end_activation(&t, &COMPLETED, w).map(|done| done.0).unwrap_err(),
            store
                .end_activation(&t, &failed("failed"), w)
                .map(|done| done.0)
                .unwrap_err(),
            store.record_activation_writes(&t, w).unwrap_err(),
        ] {
            assert!(matches!(e, Error::InvalidInput { .. }), "set {i}: {e:?}");
        }
        assert_eq!(testing::dump(&mut store), before, "set {i} changed nothing");
    }
    // At the bounds themselves: accepted.
    let mut at_bounds = ActivationWrites {
        checkpoint: Some(vec![0; max_checkpoint]),
        ..Default::default()
    };
    at_bounds.writes = (0..MAX_ACTIVATION_WRITES - 1)
        .map(|_| ActivationWrite::Event {
            kind: EventKind::CredentialDenied,
            detail: json!({}),
        })
        .collect();
    at_bounds.add_spend("compute", MAX_USAGE_REPORT_MICRO_USD.min(BUDGET - 1));
    assert_eq!(at_bounds.writes.len(), MAX_ACTIVATION_WRITES);
    let done = store
        .end_activation(&t, &COMPLETED, &at_bounds)
        .map(|done| done.0)
        .unwrap();
    assert_eq!(done.status, TransferStatus::Active);
}

#[test]
fn a_transfer_ended_mid_activation_takes_none_of_the_writes() {
    let (mut store, t) = activating();
    store.terminate(&t, "operator request").unwrap();
    let before = testing::dump(&mut store);
    let e = store
        .end_activation(&t, &COMPLETED, &resume_writes())
        .map(|done| done.0)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidTransition { .. }), "{e:?}");
    let e = store
        .end_activation(&t, &failed("failed"), &resume_writes())
        .map(|done| done.0)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidTransition { .. }), "{e:?}");
    assert_eq!(testing::dump(&mut store), before);
}

#[test]
fn spend_of_one_kind_in_a_row_is_one_write_up_to_one_report() {
    let mut w = ActivationWrites::default();
    w.add_spend("compute", 3);
    w.add_spend("compute", 4);
    assert_eq!(w.writes.len(), 1);
    w.add_spend("model_tokens", 1);
    w.add_spend("compute", MAX_USAGE_REPORT_MICRO_USD);
    w.add_spend("compute", 1);
    assert_eq!(w.writes.len(), 4, "{:?}", w.writes);
    assert_eq!(w.spend_micro_usd(), 3 + 4 + 1 + MAX_USAGE_REPORT_MICRO_USD + 1);
    assert!(!w.is_empty());
    assert!(ActivationWrites::default().is_empty());
}

#[test]
fn completion_and_bind_are_one_commit_and_leave_a_wake_capable_endpoint() {
    use crate::conversation::bounds::{MAX_ENDPOINT_LEASE, MIN_ENDPOINT_LEASE};
    let lease = std::time::Duration::from_secs(30);
    let (mut store, t) = activating();
    // The lease is bounded as the bind's own: refused at one past either end, nothing changed.
    let before = testing::dump(&mut store);
    for bad in [
        MIN_ENDPOINT_LEASE - std::time::Duration::from_millis(1),
        MAX_ENDPOINT_LEASE + std::time::Duration::from_secs(1),
    ] {
        let e = store
            .end_activation(&t, &ActivationEnd::bound(bad, true), &resume_writes())
            .unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");
    }
    assert_eq!(testing::dump(&mut store), before);

    let (done, binding) = store
        .end_activation(&t, &ActivationEnd::bound(lease, true), &resume_writes())
        .unwrap();
    assert_eq!(done.status, TransferStatus::Active);
    let binding = binding.expect("an active transfer is bound");
    assert_eq!(done.agent_id.as_deref(), Some(binding.agent.id.as_str()));
    assert!(binding.endpoint.wake_capable, "registered as its wake carrier");
    use EventKind as K;
    assert_eq!(
        kinds(&mut store, &t)[4..],
        [
            K::CredentialResolved,
            K::UsageReported,
            K::UsageReported,
            K::Activated,
            K::AgentBound
        ]
    );
}

#[test]
fn an_activation_that_ends_insolvent_is_not_bound_and_one_without_turns_not_registered() {
    let lease = std::time::Duration::from_secs(30);
    let (mut store, t) = activating();
    let mut spent = ActivationWrites::default();
    spent.add_spend("compute", BUDGET);
    let (done, binding) = store
        .end_activation(&t, &ActivationEnd::bound(lease, true), &spent)
        .unwrap();
    assert_eq!(done.status, TransferStatus::Insolvent);
    assert!(binding.is_none(), "an insolvent transfer takes no turns");
    assert!(!kinds(&mut store, &t).contains(&EventKind::AgentBound));

    let (mut store, t) = activating();
    let (_, binding) = store
        .end_activation(&t, &ActivationEnd::bound(lease, false), &ActivationWrites::default())
        .unwrap();
    assert!(!binding.unwrap().endpoint.wake_capable);
}
