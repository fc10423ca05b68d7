//! The transfer state machine through the real store: every (phase × operation) pair, tokens,
//! the reapers, concurrency. Each refused operation must leave the database unchanged, row for
//! row. On either backend (`crate::testing`); a second connection is a second `Store` over the
//! same database.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use serde_json::json;

use crate::testing::{self, TestDb};
use crate::*;

const START: Timestamp = Timestamp::from_micros(1_796_039_139_000_000);
const BUDGET: u64 = 1_000;

struct Fixture {
    store: Store,
    key: TokenKey,
    clock: ManualClock,
}

impl Fixture {
    fn new() -> Self {
        let key = TokenKey::random();
        let clock = ManualClock::new(START);
        let store = testing::store()
            .unwrap()
            .with_clock(Arc::new(clock.clone()))
            .with_token_key(key.clone());
        Self { store, key, clock }
    }

    fn token(&self, transfer: &str, scope: TokenScope) -> String {
        issue_transfer_token(&self.key, transfer, scope, self.clock.now(), DEFAULT_TOKEN_TTL).unwrap()
    }

    /// Every row of the database: equal before and after means a call changed nothing.
    fn bytes(&mut self) -> Vec<String> {
        testing::dump(&mut self.store)
    }

    /// A new transfer driven into `phase` through the public operations.
    fn transfer_in(&mut self, phase: Phase) -> String {
        use TransferStatus as S;
        let t = self.store.snapshot_state(&snapshot()).unwrap().id;
        let rank = |s: S| S::ALL.iter().position(|x| *x == s).unwrap();
        let target = rank(phase.status);
        if phase.status == S::Expired {
            // Expired is reached only through the reaper.
            self.clock.advance(Duration::from_secs(10));
            let expired = self
                .store
                .reap_expired(self.clock.now(), Duration::from_secs(1))
                .unwrap();
            assert!(expired.contains(&t));
            return t;
        }
        if target >= rank(S::Provisioned) && phase.status != S::Terminated {
            let tok = self.token(&t, TokenScope::ProvisionRuntime);
            self.store
                .provision_runtime(&t, Tier::Nano, BUDGET, "forecaster", &tok)
                .unwrap();
        }
        if target >= rank(S::Pushed) && phase.status != S::Terminated {
            self.store.push_state(&t, None).unwrap();
        }
        if phase.activating || (target >= rank(S::Active) && phase.status != S::Terminated) {
            let tok = self.token(&t, TokenScope::Activate);
            self.store.begin_activation(&t, &tok).unwrap();
        }
        if target >= rank(S::Active) && phase.status != S::Terminated {
            self.store.complete_activation(&t).unwrap();
        }
        if phase.status == S::Insolvent {
            self.store.report_usage(&t, BUDGET, "compute").unwrap();
        }
        if phase.status == S::Terminated {
            self.store.terminate(&t, "operator request").unwrap();
        }
        assert_eq!(self.store.transfer(&t).unwrap().phase(), phase);
        t
    }

    /// Applies `op` to `t` through the store's public API, the way a caller would.
    fn apply(&mut self, t: &str, op: Operation) -> Result<()> {
        let now = self.clock.now();
        match op {
            Operation::Provision => {
                let tok = self.token(t, TokenScope::ProvisionRuntime);
                self.store
                    .provision_runtime(t, Tier::Small, BUDGET, "forecaster", &tok)
                    .map(drop)
            }
            Operation::Push => self.store.push_state(t, None).map(drop),
            Operation::BeginActivation => {
                let tok = self.token(t, TokenScope::Activate);
                self.store.begin_activation(t, &tok).map(drop)
            }
            Operation::CompleteActivation { budget_exhausted } => {
                // Spend during the activation is what exhausts the budget; report it only where
                // the completion can follow, so a refused completion is still compared against
                // an untouched database.
                if budget_exhausted && self.store.transfer(t)?.activating {
                    self.store.report_usage(t, BUDGET, "model_tokens")?;
                }
                self.store.complete_activation(t).map(drop)
            }
            Operation::FailActivation => self.store.fail_activation(t, "resume returned an error").map(drop),
            Operation::ReportUsage { exhausts_budget } => {
                let amount = if exhausts_budget { BUDGET } else { 1 };
                self.store.report_usage(t, amount, "compute").map(drop)
            }
            Operation::Terminate => self.store.terminate(t, "operator request").map(drop),
            Operation::BindAgent => self.store.bind_transfer_agent(t, Duration::from_secs(60)).map(drop),
            Operation::ReapInsolvent => {
                let ended = self
                    .store
                    .reap_insolvent(now.saturating_add(DEFAULT_GRACE_PERIOD), Duration::ZERO)?;
                refuse_if_empty(t, op, ended, &mut self.store)
            }
            Operation::Expire => {
                let ended = self
                    .store
                    .reap_expired(now.saturating_add(Duration::from_secs(1)), Duration::ZERO)?;
                refuse_if_empty(t, op, ended, &mut self.store)
            }
        }
    }
}

/// A sweep does not fail on a transfer it does not apply to; it just leaves it. Report that as
/// the refusal the state machine predicts, so all operations can be checked the same way.
fn refuse_if_empty(t: &str, op: Operation, ended: Vec<String>, store: &mut Store) -> Result<()> {
    if ended.iter().any(|id| id == t) {
        Ok(())
    } else {
        let phase = store.transfer(t)?.phase();
        Err(Error::InvalidTransition {
            transfer: t.to_owned(),
            operation: op,
            phase,
        })
    }
}

fn snapshot() -> SnapshotInput {
    SnapshotInput {
        source_host: "laptop-7".into(),
        system_prompt: "You forecast inventory.".into(),
        message_history: vec![Message {
            role: "user".into(),
            content: "Forecast SKU-1.".into(),
        }],
        tool_state: json!({ "inventory": { "SKU-1": 40 } }),
        mcp_config: vec![McpServer {
            server: "https://inventory.example.com/mcp".into(),
            cred_ref: "inventory-api".into(),
        }],
    }
}

fn expected_event(op: Operation, from: Phase, to: Phase) -> EventKind {
    match op {
        Operation::Provision => EventKind::RuntimeProvisioned,
        Operation::Push => EventKind::StatePushed,
        Operation::BeginActivation => EventKind::ActivationStarted,
        Operation::CompleteActivation {
            budget_exhausted: false,
        } => EventKind::Activated,
        Operation::CompleteActivation { budget_exhausted: true } => EventKind::Insolvent,
        Operation::FailActivation => EventKind::ActivationFailed,
        Operation::ReportUsage { .. }
            if from.status == TransferStatus::Active && to.status == TransferStatus::Insolvent =>
        {
            EventKind::Insolvent
        }
        Operation::ReportUsage { .. } => EventKind::UsageReported,
        Operation::Terminate | Operation::ReapInsolvent => EventKind::Terminated,
        Operation::Expire => EventKind::Expired,
        Operation::BindAgent => EventKind::AgentBound,
    }
}

#[test]
fn every_phase_and_operation_pair_follows_the_state_machine() {
    let mut allowed = 0;
    for phase in Phase::ALL {
        for op in Operation::ALL {
            let mut f = Fixture::new();
            let t = f.transfer_in(phase);
            let events_before = f.store.get_status(&t).unwrap().events.len();
            f.clock.advance(Duration::from_secs(1));
            let before = f.bytes();
            let result = f.apply(&t, op);
            match transition(phase, op) {
                Ok(to) => {
                    allowed += 1;
                    result.unwrap_or_else(|e| panic!("{op} from {phase} should succeed: {e}"));
                    let status = f.store.get_status(&t).unwrap();
                    assert_eq!(status.transfer.phase(), to, "{op} from {phase}");
                    assert!(
                        status.events.len() > events_before,
                        "{op} from {phase} appended no event"
                    );
                    assert_eq!(
                        status.events.last().unwrap().kind,
                        expected_event(op, phase, to),
                        "{op} from {phase}"
                    );
                }
                Err(refusal) => {
                    let err = result.expect_err(&format!("{op} from {phase} should be refused"));
                    match (refusal, &err) {
                        (state::Refusal::ActivationInProgress, Error::ActivationInProgress { transfer }) => {
                            assert_eq!(transfer, &t)
                        }
                        (
                            state::Refusal::NotAllowed,
                            Error::InvalidTransition {
                                transfer,
                                operation,
                                phase: p,
                            },
                        ) => {
                            assert_eq!(
                                (transfer.as_str(), operation.as_str(), *p),
                                (t.as_str(), op.as_str(), phase)
                            );
                            let msg = err.to_string();
                            assert!(
                                msg.contains(op.as_str()) && msg.contains(phase.status.as_str()),
                                "{msg}"
                            );
                        }
                        _ => panic!("{op} from {phase}: unexpected error {err:?}"),
                    }
                    assert!(
                        f.bytes() == before,
                        "{op} from {phase} was refused but changed the database"
                    );
                }
            }
        }
    }
    assert_eq!(allowed, 24);
}

#[test]
fn a_full_lifecycle_logs_every_step_in_order() {
    let mut f = Fixture::new();
    let staged = f.store.snapshot_state(&snapshot()).unwrap();
    assert_eq!(staged.checksum, snapshot().checksum());
    let t = staged.id;
    let tok = f.token(&t, TokenScope::ProvisionRuntime);
    f.store
        .provision_runtime(&t, Tier::Nano, 100, "forecaster", &tok)
        .unwrap();
    f.store.push_state(&t, Some(&staged.checksum.to_uppercase())).unwrap();
    let tok = f.token(&t, TokenScope::Activate);
    let begun = f.store.begin_activation(&t, &tok).unwrap();
    assert_eq!(
        (begun.tier, begun.component.as_deref()),
        (Some(Tier::Nano), Some("forecaster"))
    );
    f.store.report_usage(&t, 30, "compute").unwrap();
    f.store.complete_activation(&t).unwrap();
    let r = f.store.report_usage(&t, 60, "model_tokens").unwrap();
    assert_eq!(
        (r.transfer.status, r.budget.remaining_micro_usd()),
        (TransferStatus::Active, 10)
    );
    f.clock.advance(Duration::from_secs(5));
    let r = f.store.report_usage(&t, 25, "model_tokens").unwrap();
    assert_eq!(r.transfer.status, TransferStatus::Insolvent);
    assert_eq!(r.transfer.insolvent_at, Some(f.clock.now()));
    assert_eq!((r.budget.spent_micro_usd, r.budget.remaining_micro_usd()), (115, 0));
    // Late metering during the grace period is recorded, the status stays.
    let r = f.store.report_usage(&t, 1, "compute").unwrap();
    assert_eq!(
        (r.transfer.status, r.budget.spent_micro_usd),
        (TransferStatus::Insolvent, 116)
    );
    let status = f.store.get_status(&t).unwrap();
    let kinds: Vec<_> = status.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "snapshot_created",
            "runtime_provisioned",
            "state_pushed",
            "activation_started",
            "usage_reported",
            "activated",
            "usage_reported",
            "usage_reported",
            "insolvent",
            "usage_reported"
        ]
    );
    assert!(
        status
            .events
            .windows(2)
            .all(|w| w[0].id < w[1].id && w[0].at <= w[1].at)
    );
    assert_eq!(status.events[2].detail["checksumVerified"], json!(true));
    assert_eq!(status.events[1].detail["rateMicroUsdPerCpuSecond"], json!(20));
    assert_eq!(status.budget.unwrap().allocated_micro_usd, 100);
    assert_eq!(f.store.snapshot(&t).unwrap(), snapshot());
}

#[test]
fn failed_activation_burns_the_token_and_a_retry_needs_a_new_one() {
    let mut f = Fixture::new();
    let t = f.transfer_in(Phase::settled(TransferStatus::Pushed));
    let tok = f.token(&t, TokenScope::Activate);
    f.store.begin_activation(&t, &tok).unwrap();
    let t2 = f.store.fail_activation(&t, "guest trapped: fuel exhausted").unwrap();
    assert_eq!(t2.phase(), Phase::settled(TransferStatus::Pushed));
    assert!(matches!(
        f.store.begin_activation(&t, &tok),
        Err(Error::Token(TokenRefusal::Replayed))
    ));
    let fresh = f.token(&t, TokenScope::Activate);
    f.store.begin_activation(&t, &fresh).unwrap();
    f.store.complete_activation(&t).unwrap();
    let events = f.store.get_status(&t).unwrap().events;
    let failed = events.iter().find(|e| e.kind == EventKind::ActivationFailed).unwrap();
    assert_eq!(failed.detail["reason"], json!("guest trapped: fuel exhausted"));
}

#[test]
fn bad_tokens_are_refused_and_change_nothing() {
    let mut f = Fixture::new();
    let t = f.store.snapshot_state(&snapshot()).unwrap().id;
    let other = f.store.snapshot_state(&snapshot()).unwrap().id;
    let good = f.token(&t, TokenScope::ProvisionRuntime);
    let forged = {
        let mut k = TokenKey::random();
        std::mem::swap(&mut k, &mut f.key);
        let tok = f.token(&t, TokenScope::ProvisionRuntime);
        std::mem::swap(&mut k, &mut f.key);
        tok
    };
    let expired = issue_transfer_token(
        &f.key,
        &t,
        TokenScope::ProvisionRuntime,
        f.clock.now().saturating_sub(Duration::from_secs(301)),
        DEFAULT_TOKEN_TTL,
    )
    .unwrap();
    let cases = [
        (forged, TokenRefusal::BadSignature),
        (good[..good.len() - 2].to_owned(), TokenRefusal::Malformed),
        (expired, TokenRefusal::Expired),
        (f.token(&t, TokenScope::Activate), TokenRefusal::WrongScope),
        (
            f.token(&other, TokenScope::ProvisionRuntime),
            TokenRefusal::WrongTransfer,
        ),
    ];
    for (tok, refusal) in cases {
        let before = f.bytes();
        let err = f
            .store
            .provision_runtime(&t, Tier::Nano, BUDGET, "forecaster", &tok)
            .unwrap_err();
        assert!(
            matches!(err, Error::Token(r) if r == refusal),
            "{refusal:?}: got {err:?}"
        );
        assert!(f.bytes() == before, "{refusal:?} changed the database");
    }
    f.store
        .provision_runtime(&t, Tier::Nano, BUDGET, "forecaster", &good)
        .unwrap();
    // Presenting it again is refused (the state moved on) and changes nothing.
    let before = f.bytes();
    let again = f
        .store
        .provision_runtime(&t, Tier::Nano, BUDGET, "forecaster", &good)
        .unwrap_err();
    assert!(matches!(again, Error::InvalidTransition { .. }), "{again:?}");
    assert!(f.bytes() == before);

    // No key configured: refused, nothing changes.
    let mut keyless = testing::store().unwrap();
    let t = keyless.snapshot_state(&snapshot()).unwrap().id;
    let tok = f.token(&t, TokenScope::ProvisionRuntime);
    assert!(matches!(
        keyless.provision_runtime(&t, Tier::Nano, BUDGET, "forecaster", &tok),
        Err(Error::NoTokenKey)
    ));
    assert_eq!(keyless.transfer(&t).unwrap().status, TransferStatus::Staged);
}

#[test]
fn a_replayed_activate_token_is_refused_even_where_the_edge_is_open() {
    let mut f = Fixture::new();
    let t = f.transfer_in(Phase::settled(TransferStatus::Pushed));
    let tok = f.token(&t, TokenScope::Activate);
    f.store.begin_activation(&t, &tok).unwrap();
    f.store.fail_activation(&t, "resume failed").unwrap();
    let before = f.bytes();
    assert!(matches!(
        f.store.begin_activation(&t, &tok),
        Err(Error::Token(TokenRefusal::Replayed))
    ));
    assert!(f.bytes() == before);
}

#[test]
fn sixteen_connections_racing_one_token_exactly_one_wins() {
    let db = TestDb::new();
    let key = TokenKey::random();
    let mut store = db.open().unwrap().with_token_key(key.clone());
    let t = store.snapshot_state(&snapshot()).unwrap().id;
    let tok = issue_transfer_token(&key, &t, TokenScope::ProvisionRuntime, store.now(), DEFAULT_TOKEN_TTL).unwrap();
    let barrier = Barrier::new(16);
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|_| {
                let (db, key, t, tok, barrier) = (&db, key.clone(), &t, &tok, &barrier);
                scope.spawn(move || {
                    let mut s = db.open().unwrap().with_token_key(key);
                    barrier.wait();
                    s.provision_runtime(t, Tier::Nano, BUDGET, "forecaster", tok)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let wins = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(wins, 1, "{results:?}");
    for r in results.iter().filter_map(|r| r.as_ref().err()) {
        // Losers see either the consumed token or the state it moved the transfer to.
        assert!(
            matches!(
                r,
                Error::Token(TokenRefusal::Replayed) | Error::InvalidTransition { .. }
            ),
            "{r:?}"
        );
    }
    let used: i64 = store
        .autocommit()
        .query_row("SELECT count(*) FROM used_transfer_tokens", (), |r| r.get(0))
        .unwrap();
    assert_eq!(used, 1);
    let status = store.get_status(&t).unwrap();
    assert_eq!(
        status
            .events
            .iter()
            .filter(|e| e.kind == EventKind::RuntimeProvisioned)
            .count(),
        1
    );
}

#[test]
fn insolvency_reaper_waits_for_the_grace_period_and_runs_once() {
    let mut f = Fixture::new();
    let insolvent = f.transfer_in(Phase::settled(TransferStatus::Insolvent));
    let active = f.transfer_in(Phase::settled(TransferStatus::Active));
    let grace = Duration::from_secs(60);
    f.clock.advance(grace - Duration::from_micros(1));
    assert!(f.store.reap_insolvent(f.clock.now(), grace).unwrap().is_empty());
    assert_eq!(f.store.transfer(&insolvent).unwrap().status, TransferStatus::Insolvent);
    f.clock.advance(Duration::from_micros(1));
    assert_eq!(
        f.store.reap_insolvent(f.clock.now(), grace).unwrap(),
        vec![insolvent.clone()]
    );
    let t = f.store.transfer(&insolvent).unwrap();
    assert_eq!(
        (t.status, t.ended_at),
        (TransferStatus::Terminated, Some(f.clock.now()))
    );
    assert!(t.end_reason.unwrap().contains("grace period"));
    assert!(
        f.store.reap_insolvent(f.clock.now(), grace).unwrap().is_empty(),
        "second run is a no-op"
    );
    assert_eq!(f.store.transfer(&active).unwrap().status, TransferStatus::Active);
    let terminated = f.store.get_status(&insolvent).unwrap().events;
    assert_eq!(terminated.iter().filter(|e| e.kind == EventKind::Terminated).count(), 1);
}

#[test]
fn expiry_reaper_ends_only_unactivated_transfers_past_the_ttl() {
    let mut f = Fixture::new();
    let staged = f.transfer_in(Phase::settled(TransferStatus::Staged));
    let provisioned = f.transfer_in(Phase::settled(TransferStatus::Provisioned));
    let activating = f.transfer_in(Phase {
        status: TransferStatus::Pushed,
        activating: true,
    });
    let active = f.transfer_in(Phase::settled(TransferStatus::Active));
    let ttl = Duration::from_secs(3600);
    f.clock.advance(ttl - Duration::from_secs(1));
    let young = f.transfer_in(Phase::settled(TransferStatus::Pushed));
    assert!(f.store.reap_expired(f.clock.now(), ttl).unwrap().is_empty());
    f.clock.advance(Duration::from_secs(1));
    let mut ended = f.store.reap_expired(f.clock.now(), ttl).unwrap();
    ended.sort();
    let mut expected = vec![staged.clone(), provisioned, activating.clone()];
    expected.sort();
    assert_eq!(ended, expected);
    assert!(
        f.store.reap_expired(f.clock.now(), ttl).unwrap().is_empty(),
        "second run is a no-op"
    );
    assert_eq!(f.store.transfer(&active).unwrap().status, TransferStatus::Active);
    assert_eq!(f.store.transfer(&young).unwrap().status, TransferStatus::Pushed);
    let a = f.store.transfer(&activating).unwrap();
    assert_eq!((a.status, a.activating), (TransferStatus::Expired, false));
    // The activation that was in progress can no longer complete.
    assert!(matches!(
        f.store.complete_activation(&activating),
        Err(Error::InvalidTransition { .. })
    ));
}

#[test]
fn concurrent_sweeps_end_each_transfer_once() {
    let db = TestDb::new();
    let mut store = db.open().unwrap();
    let ids: Vec<_> = (0..40).map(|_| store.snapshot_state(&snapshot()).unwrap().id).collect();
    let later = store.now().saturating_add(Duration::from_secs(10));
    let mut all: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let db = &db;
                scope.spawn(move || db.open().unwrap().reap_expired(later, Duration::from_secs(1)).unwrap())
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    all.sort();
    let mut ids = ids;
    ids.sort();
    assert_eq!(all, ids, "every transfer expired exactly once across the sweeps");
    let events: i64 = store
        .autocommit()
        .query_row("SELECT count(*) FROM usage_events WHERE type = 'expired'", (), |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(events, 40);
}

#[test]
fn bad_inputs_are_refused_before_anything_is_written() {
    let mut f = Fixture::new();
    let t = f.store.snapshot_state(&snapshot()).unwrap().id;
    let tok = f.token(&t, TokenScope::ProvisionRuntime);
    let before = f.bytes();
    let field = |e: Error| match e {
        Error::InvalidInput { field, .. } => field,
        other => panic!("expected InvalidInput, got {other:?}"),
    };
    assert_eq!(
        field(
            f.store
                .provision_runtime(&t, Tier::Nano, 0, "forecaster", &tok)
                .unwrap_err()
        ),
        "budgetMicroUsd"
    );
    assert_eq!(
        field(
            f.store
                .provision_runtime(&t, Tier::Nano, MAX_BUDGET_MICRO_USD + 1, "forecaster", &tok)
                .unwrap_err()
        ),
        "budgetMicroUsd"
    );
    assert_eq!(
        field(
            f.store
                .provision_runtime(&t, Tier::Nano, 1, "Bad Name", &tok)
                .unwrap_err()
        ),
        "component"
    );
    assert_eq!(
        field(
            f.store
                .provision_runtime(&t, Tier::Nano, 1, "sha256:abc", &tok)
                .unwrap_err()
        ),
        "component"
    );
    assert_eq!(
        field(
            f.store
                .provision_runtime(&t, Tier::Nano, 1, &"c".repeat(65), &tok)
                .unwrap_err()
        ),
        "component"
    );
    assert_eq!(field(f.store.push_state(&t, Some("xyz")).unwrap_err()), "checksum");
    assert_eq!(
        field(f.store.report_usage(&t, 0, "compute").unwrap_err()),
        "amountMicroUsd"
    );
    assert_eq!(
        field(
            f.store
                .report_usage(&t, MAX_USAGE_REPORT_MICRO_USD + 1, "compute")
                .unwrap_err()
        ),
        "amountMicroUsd"
    );
    assert_eq!(field(f.store.report_usage(&t, 1, "Model Tokens").unwrap_err()), "kind");
    assert_eq!(field(f.store.terminate(&t, " ").unwrap_err()), "reason");
    assert_eq!(field(f.store.terminate(&t, &"r".repeat(1025)).unwrap_err()), "reason");
    assert_eq!(
        field(f.store.transfer("agt_0123456789abcdef01234567").unwrap_err()),
        "transferId"
    );
    let mut bad = snapshot();
    bad.tool_state = json!([]);
    assert_eq!(field(f.store.snapshot_state(&bad).unwrap_err()), "toolState");
    assert!(f.bytes() == before);
    // At the limits they pass.
    f.store
        .provision_runtime(&t, Tier::Nano, MAX_BUDGET_MICRO_USD, &"c".repeat(64), &tok)
        .unwrap();
    f.store.terminate(&t, &"r".repeat(1024)).unwrap();
    assert!(matches!(
        f.store.transfer("tr_ffffffffffffffffffffffff"),
        Err(Error::TransferNotFound(id)) if id == "tr_ffffffffffffffffffffffff"
    ));
}

#[test]
fn a_push_with_the_wrong_checksum_is_refused() {
    let mut f = Fixture::new();
    let t = f.transfer_in(Phase::settled(TransferStatus::Provisioned));
    let before = f.bytes();
    let err = f.store.push_state(&t, Some(&"0".repeat(64))).unwrap_err();
    assert!(matches!(err, Error::ChecksumMismatch { .. }), "{err:?}");
    assert!(f.bytes() == before);
}

#[test]
fn an_unknown_status_in_the_database_fails_closed() {
    let mut f = Fixture::new();
    let t = f.store.snapshot_state(&snapshot()).unwrap().id;
    f.store
        .autocommit()
        .execute("UPDATE transfers SET status = 'zombie' WHERE id = ?1", [&t])
        .unwrap();
    assert!(matches!(
        f.store.transfer(&t),
        Err(Error::CorruptRow { table: "transfers", .. })
    ));
    assert!(matches!(f.store.terminate(&t, "x"), Err(Error::CorruptRow { .. })));
}

#[test]
fn host_events_are_recorded_but_transition_events_are_not_forgeable() {
    let mut f = Fixture::new();
    let t = f.store.snapshot_state(&snapshot()).unwrap().id;
    f.store
        .record_event(&t, EventKind::CredentialDenied, json!({ "credRef": "../etc" }))
        .unwrap();
    assert!(matches!(
        f.store.record_event(&t, EventKind::Activated, json!({})),
        Err(Error::InvalidInput { .. })
    ));
    let huge = json!({ "x": "y".repeat(5000) });
    assert!(matches!(
        f.store.record_event(&t, EventKind::CeilingExceeded, huge),
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        f.store
            .record_event("tr_ffffffffffffffffffffffff", EventKind::CeilingExceeded, json!({})),
        Err(Error::TransferNotFound(_))
    ));
    let events = f.store.get_status(&t).unwrap().events;
    assert_eq!(events.last().unwrap().kind, EventKind::CredentialDenied);
}

#[test]
fn no_column_holds_a_secret() {
    let mut f = Fixture::new();
    let columns = match f.store.dialect() {
        sql::Dialect::Sqlite => {
            "SELECT m.name || '.' || p.name FROM sqlite_schema m JOIN pragma_table_info(m.name) p WHERE m.type = 'table'"
        }
        sql::Dialect::Postgres => {
            "SELECT CAST(table_name || '.' || column_name AS TEXT) FROM information_schema.columns
             WHERE table_schema = current_schema()"
        }
    };
    let tx = f.store.autocommit();
    let cols: Vec<String> = tx
        .prepare(columns)
        .unwrap()
        .query_map((), |r| r.get(0))
        .unwrap()
        .map(std::result::Result::unwrap)
        .collect();
    assert!(cols.len() > 100, "{cols:?}");
    for c in &cols {
        for word in ["secret", "password", "api_key", "credential_value"] {
            assert!(!c.contains(word), "column {c} looks like it holds a secret");
        }
    }
}

#[test]
fn clients_cannot_report_the_host_reserved_compute_kind() {
    let mut f = Fixture::new();
    let t = f.transfer_in(Phase::settled(TransferStatus::Active));
    let before = f.bytes();
    for kind in HOST_RESERVED_USAGE_KINDS {
        let err = f.store.report_client_usage(&t, 1, kind).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput { field, reason } if field == "kind" && reason.contains("reserved")),
            "{err:?}"
        );
    }
    assert!(f.bytes() == before, "a refused compute report changed the database");
    let r = f.store.report_client_usage(&t, 7, "model_tokens").unwrap();
    assert_eq!(r.budget.spent_micro_usd, 7);
    // The host's meter still records compute.
    let r = f.store.report_usage(&t, 3, COMPUTE_USAGE_KIND).unwrap();
    assert_eq!(r.budget.spent_micro_usd, 10);
}

#[test]
fn spend_that_exhausts_the_budget_during_activation_completes_it_insolvent() {
    let mut f = Fixture::new();
    let t = f.transfer_in(Phase {
        status: TransferStatus::Pushed,
        activating: true,
    });
    // One micro-USD short: the activation completes `active`.
    let short = f.transfer_in(Phase {
        status: TransferStatus::Pushed,
        activating: true,
    });
    f.store.report_usage(&short, BUDGET - 1, "model_tokens").unwrap();
    assert_eq!(
        f.store.complete_activation(&short).unwrap().status,
        TransferStatus::Active
    );
    let r = f.store.report_usage(&t, BUDGET, "model_tokens").unwrap();
    assert_eq!(
        r.transfer.phase(),
        Phase {
            status: TransferStatus::Pushed,
            activating: true
        }
    );
    f.clock.advance(Duration::from_secs(2));
    let done = f.store.complete_activation(&t).unwrap();
    assert_eq!(
        (done.status, done.activating, done.insolvent_at, done.activated_at),
        (
            TransferStatus::Insolvent,
            false,
            Some(f.clock.now()),
            Some(f.clock.now())
        )
    );
    let events = f.store.get_status(&t).unwrap().events;
    let tail: Vec<_> = events.iter().rev().take(2).map(|e| e.kind).collect();
    assert_eq!(tail, [EventKind::Insolvent, EventKind::Activated]);
    assert_eq!(events.last().unwrap().detail["during"], json!("activation"));
    // The grace period runs from completion, and the reaper ends it as any insolvent transfer.
    let grace = Duration::from_secs(60);
    f.clock.advance(grace);
    assert_eq!(f.store.reap_insolvent(f.clock.now(), grace).unwrap(), vec![t]);
}

#[test]
fn an_activation_interrupted_by_a_crash_is_failed_and_a_new_token_retries_it() {
    let mut f = Fixture::new();
    let stuck = f.transfer_in(Phase {
        status: TransferStatus::Pushed,
        activating: true,
    });
    let active = f.transfer_in(Phase::settled(TransferStatus::Active));
    let pushed = f.transfer_in(Phase::settled(TransferStatus::Pushed));
    // While it is "in progress" nothing can retry it.
    let retry = f.token(&stuck, TokenScope::Activate);
    assert!(matches!(
        f.store.begin_activation(&stuck, &retry),
        Err(Error::ActivationInProgress { .. })
    ));
    let before = f.bytes();
    assert!(matches!(
        f.store.fail_interrupted_activations(" "),
        Err(Error::InvalidInput { .. })
    ));
    assert!(f.bytes() == before);
    let reason = "interrupted: the host stopped during the activation";
    assert_eq!(
        f.store.fail_interrupted_activations(reason).unwrap(),
        vec![stuck.clone()]
    );
    let last = f.store.get_status(&stuck).unwrap().events.pop().unwrap();
    assert_eq!(
        (last.kind, &last.detail["reason"], &last.detail["interrupted"]),
        (EventKind::ActivationFailed, &json!(reason), &json!(true))
    );
    assert_eq!(f.store.transfer(&active).unwrap().status, TransferStatus::Active);
    assert_eq!(
        f.store.transfer(&pushed).unwrap().phase(),
        Phase::settled(TransferStatus::Pushed)
    );
    // A second sweep finds nothing; the retry token works.
    assert!(f.store.fail_interrupted_activations(reason).unwrap().is_empty());
    f.store.begin_activation(&stuck, &retry).unwrap();
    assert_eq!(
        f.store.complete_activation(&stuck).unwrap().status,
        TransferStatus::Active
    );
}

/// A file database with a second connection that can hold its write lock.
fn busy_fixture(busy: Duration) -> (tempfile::TempDir, std::path::PathBuf, Store, TokenKey, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("busy.db");
    let key = TokenKey::random();
    let mut store = Store::open(&path)
        .unwrap()
        .with_token_key(key.clone())
        .with_busy_timeout(busy)
        .unwrap();
    let t = store.snapshot_state(&snapshot()).unwrap().id;
    (dir, path, store, key, t)
}

#[test]
fn a_database_that_stays_busy_is_reported_as_transient_and_spends_no_token() {
    if testing::skip_on_postgres("holds SQLite's write lock past its busy timeout") {
        return;
    }
    let (_dir, path, mut store, key, t) = busy_fixture(Duration::from_millis(20));
    let tok = issue_transfer_token(&key, &t, TokenScope::ProvisionRuntime, store.now(), DEFAULT_TOKEN_TTL).unwrap();
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let before = store.connection().serialize(rusqlite::MAIN_DB).unwrap().to_vec();
    let started = std::time::Instant::now();
    let err = store
        .provision_runtime(&t, Tier::Nano, BUDGET, "forecaster", &tok)
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(err, Error::Busy { attempts } if attempts == MAX_WRITE_ATTEMPTS),
        "{err:?}"
    );
    assert!(err.is_transient() && err.to_string().contains("try again"), "{err}");
    // Bounded: four 20 ms waits and 10 + 40 + 160 ms of backoff, not an endless loop.
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // Refusals are not transient.
    assert!(!Error::Token(TokenRefusal::Replayed).is_transient());
    assert!(!Error::invalid("x", "y").is_transient());
    holder.execute_batch("ROLLBACK").unwrap();
    assert!(
        store.connection().serialize(rusqlite::MAIN_DB).unwrap().to_vec() == before,
        "a busy attempt changed the database"
    );
    // The same token was never spent: it provisions now.
    let t = store
        .provision_runtime(&t, Tier::Nano, BUDGET, "forecaster", &tok)
        .unwrap();
    assert_eq!(t.status, TransferStatus::Provisioned);
}

#[test]
fn a_lock_released_during_the_backoff_is_ridden_out() {
    if testing::skip_on_postgres("holds SQLite's write lock past its busy timeout") {
        return;
    }
    let (_dir, path, mut store, key, t) = busy_fixture(Duration::from_millis(20));
    let tok = issue_transfer_token(&key, &t, TokenScope::ProvisionRuntime, store.now(), DEFAULT_TOKEN_TTL).unwrap();
    let locked = Arc::new(Barrier::new(2));
    let holder = {
        let (path, locked) = (path.clone(), locked.clone());
        std::thread::spawn(move || {
            let c = rusqlite::Connection::open(&path).unwrap();
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            locked.wait();
            std::thread::sleep(Duration::from_millis(100));
            c.execute_batch("COMMIT").unwrap();
        })
    };
    locked.wait();
    let started = std::time::Instant::now();
    let t = store
        .provision_runtime(&t, Tier::Nano, BUDGET, "forecaster", &tok)
        .unwrap();
    // Longer than one busy wait: the first attempts found the lock held and were retried.
    assert!(
        started.elapsed() >= Duration::from_millis(60),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(t.status, TransferStatus::Provisioned);
    holder.join().unwrap();
    let events = store.get_status(&t.id).unwrap().events;
    assert_eq!(
        events
            .iter()
            .filter(|e| e.kind == EventKind::RuntimeProvisioned)
            .count(),
        1
    );
}

#[test]
fn a_provision_token_binds_tier_budget_cap_and_component() {
    let mut f = Fixture::new();
    let t = f.store.snapshot_state(&snapshot()).unwrap().id;
    let bindings = TokenBindings {
        tier: Some(Tier::Small),
        max_budget_micro_usd: Some(BUDGET),
        component: Some("forecaster".into()),
        checksum: None,
    };
    let tok = issue_bound_transfer_token(
        &f.key,
        &t,
        TokenScope::ProvisionRuntime,
        f.clock.now(),
        DEFAULT_TOKEN_TTL,
        &bindings,
    )
    .unwrap();
    let before = f.bytes();
    for (tier, budget, component, bound) in [
        (Tier::Large, BUDGET, "forecaster", Bound::Tier),
        (Tier::Small, BUDGET + 1, "forecaster", Bound::Budget),
        (Tier::Small, BUDGET, "cpu-burn", Bound::Component),
    ] {
        let err = f
            .store
            .provision_runtime(&t, tier, budget, component, &tok)
            .unwrap_err();
        assert!(
            matches!(err, Error::Token(TokenRefusal::Binding(b)) if b == bound),
            "{bound:?}: {err:?}"
        );
        assert!(err.to_string().contains("does not allow this"), "{err}");
        assert!(f.bytes() == before, "{bound:?} refused but changed the database");
    }
    // The refusals spent nothing: the same token provisions within its bindings (at the cap).
    let p = f
        .store
        .provision_runtime(&t, Tier::Small, BUDGET, "forecaster", &tok)
        .unwrap();
    assert_eq!((p.status, p.tier), (TransferStatus::Provisioned, Some(Tier::Small)));
}

#[test]
fn an_activate_token_bound_to_a_checksum_activates_only_that_snapshot() {
    let mut f = Fixture::new();
    let t = f.transfer_in(Phase::settled(TransferStatus::Pushed));
    let checksum = f.store.transfer(&t).unwrap().checksum;
    let bound_to = |f: &Fixture, sum: &str| {
        let b = TokenBindings {
            checksum: Some(sum.to_owned()),
            ..TokenBindings::default()
        };
        issue_bound_transfer_token(&f.key, &t, TokenScope::Activate, f.clock.now(), DEFAULT_TOKEN_TTL, &b).unwrap()
    };
    let other = bound_to(&f, &"f".repeat(64));
    let before = f.bytes();
    let err = f.store.begin_activation(&t, &other).unwrap_err();
    assert!(
        matches!(err, Error::Token(TokenRefusal::Binding(Bound::Checksum))),
        "{err:?}"
    );
    assert!(f.bytes() == before, "a refused activation changed the database");
    let right = bound_to(&f, &checksum);
    assert!(f.store.begin_activation(&t, &right).unwrap().activating);
}

/// An activation's MCP task is created with its start and ended by whatever ends it: a
/// completion, a failure, an interruption at restart, a termination.
#[test]
fn an_activations_mcp_task_ends_however_the_activation_ends() {
    use crate::conversation::CommunicationPrincipal;
    use crate::conversation::mcp_task::McpTaskStatus;
    let mut f = Fixture::new();
    let owner = CommunicationPrincipal::from_subject("operator:local").unwrap();
    let pushed = Phase::settled(TransferStatus::Pushed);
    let begin = |f: &mut Fixture| {
        let t = f.transfer_in(pushed);
        let token = f.token(&t, TokenScope::Activate);
        let (_, task) = f.store.begin_activation_tracked(&t, &token, &owner).unwrap();
        assert_eq!((task.status, task.tool.as_str()), (McpTaskStatus::Working, "activate"));
        (t, task.id)
    };
    let read = |f: &mut Fixture, id: &str| f.store.mcp_task(&owner, id).unwrap().unwrap();
    let (completed, c) = begin(&mut f);
    let (failed, x) = begin(&mut f);
    let (stuck, i) = begin(&mut f);
    let (killed, k) = begin(&mut f);
    for id in [&c, &x, &i, &k] {
        assert_eq!(read(&mut f, id).status, McpTaskStatus::Working);
    }
    f.store.complete_activation(&completed).unwrap();
    f.store.fail_activation(&failed, "the guest trapped").unwrap();
    f.store.fail_interrupted_activations("interrupted").unwrap();
    assert_eq!(f.store.transfer(&stuck).unwrap().status, TransferStatus::Pushed);
    for (id, transfer, said) in [
        (&c, &completed, "active"),
        (&x, &failed, "pushed"),
        (&i, &stuck, "pushed"),
    ] {
        let task = read(&mut f, id);
        assert_eq!(
            (task.status, task.answer.as_deref()),
            (McpTaskStatus::Completed, Some(transfer.as_str()))
        );
        assert!(task.status_message.unwrap().ends_with(said), "{id}");
    }
    // The interrupted sweep ended the fourth too (it was in progress); it ends once.
    assert_eq!(read(&mut f, &k).status, McpTaskStatus::Completed);
    f.store.terminate(&killed, "gone").unwrap();
    let ends: i64 = f
        .store
        .autocommit()
        .query_row("SELECT max(ends) FROM mcp_tasks", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ends, 1);
}
