use super::*;

#[test]
fn an_all_wait_fires_exactly_once_at_the_last_terminal_fact() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let a = w.task(&alice, &t.boss(), &t.w1, None, true);
    let b = w.task(&alice, &t.boss(), &t.w2, None, true);
    let wait = w.wait(&alice, &t.boss_ep, &[&a, &b], WaitMode::All, None).unwrap();
    assert_eq!(wait.state, WaitState::Waiting);
    w.complete(&alice, &t.w1_ep, &a, TaskOutcome::Succeeded, "one").unwrap();
    // A partial `all` makes no wake.
    assert!(w.open_wake(&t.boss_ep).is_none());
    let partial = w.store.read_agent_wait(&alice, &t.boss(), &wait.id).unwrap();
    assert_eq!(partial.state, WaitState::Waiting);
    assert!(partial.sources[0].matched_at.is_some() && partial.sources[1].matched_at.is_none());
    w.complete(&alice, &t.w2_ep, &b, TaskOutcome::Failed, "two").unwrap();
    let fired = w.store.read_agent_wait(&alice, &t.boss(), &wait.id).unwrap();
    assert_eq!(fired.state, WaitState::Triggered);
    let wake = w.open_wake(&t.boss_ep).unwrap();
    assert_eq!(wake.origin, WakeOrigin::Wait(wait.id.clone()));
    assert_eq!(fired.wake_id.as_deref(), Some(wake.id.as_str()));
    assert_eq!(w.causes("wait", &wait.id), 1);
    assert_eq!(
        fired.sources.iter().map(|s| s.task_state).collect::<Vec<_>>(),
        vec![TaskState::Succeeded, TaskState::Failed]
    );
}

#[test]
fn an_any_wait_fires_at_the_first_fact_and_never_again() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let a = w.task(&alice, &t.boss(), &t.w1, None, true);
    let b = w.task(&alice, &t.boss(), &t.w2, None, true);
    let wait = w.wait(&alice, &t.boss_ep, &[&a, &b], WaitMode::Any, None).unwrap();
    w.complete(&alice, &t.w2_ep, &b, TaskOutcome::Succeeded, "first")
        .unwrap();
    assert_eq!(w.causes("wait", &wait.id), 1);
    // The boss's turn runs for it (its wake crosses the fence), then the second fact arrives.
    w.dispatch(&t.boss_ep);
    w.complete(&alice, &t.w1_ep, &a, TaskOutcome::Succeeded, "second")
        .unwrap();
    assert_eq!(w.causes("wait", &wait.id), 1);
    assert!(w.open_wake(&t.boss_ep).is_none(), "no second wake");
}

#[test]
fn a_condition_that_already_holds_fires_at_registration() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let a = w.task(&alice, &t.boss(), &t.w1, None, true);
    w.complete(&alice, &t.w1_ep, &a, TaskOutcome::Succeeded, "done")
        .unwrap();
    let wait = w.wait(&alice, &t.boss_ep, &[&a], WaitMode::All, None).unwrap();
    assert_eq!(wait.state, WaitState::Triggered);
    assert_eq!(
        w.open_wake(&t.boss_ep).unwrap().origin,
        WakeOrigin::Wait(wait.id.clone())
    );
    assert_eq!(w.causes("wait", &wait.id), 1);
}

#[test]
fn a_cancelled_task_is_a_terminal_fact_for_waits() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let a = w.task(&alice, &t.boss(), &t.w1, None, false);
    let wait = w.wait(&alice, &t.boss_ep, &[&a], WaitMode::All, None).unwrap();
    w.store.cancel_agent_task(&alice, &t.boss(), &a.id).unwrap();
    let fired = w.store.read_agent_wait(&alice, &t.boss(), &wait.id).unwrap();
    assert_eq!(fired.state, WaitState::Triggered);
    assert_eq!(fired.sources[0].task_state, TaskState::Cancelled);
}

#[test]
fn cancel_is_desired_state_and_a_cancelled_wait_never_fires() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let a = w.task(&alice, &t.boss(), &t.w1, None, true);
    let wait = w.wait(&alice, &t.boss_ep, &[&a], WaitMode::Any, None).unwrap();
    let c = w.store.cancel_agent_wait(&alice, &t.boss(), &wait.id).unwrap();
    assert!(c.state_changed);
    assert_eq!(c.value.state, WaitState::Cancelled);
    let before = w.bytes();
    let again = w.store.cancel_agent_wait(&alice, &t.boss(), &wait.id).unwrap();
    assert!(!again.state_changed);
    assert_eq!(w.bytes(), before);
    w.complete(&alice, &t.w1_ep, &a, TaskOutcome::Succeeded, "x").unwrap();
    assert_eq!(w.causes("wait", &wait.id), 0);
    assert!(w.open_wake(&t.boss_ep).is_none());
    let after = w.store.read_agent_wait(&alice, &Acting::Human, &wait.id).unwrap();
    assert_eq!((after.state, after.sources[0].matched_at), (WaitState::Cancelled, None));
}

#[test]
fn registration_is_idempotent_and_refusals_change_nothing() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let a = w.task(&alice, &t.boss(), &t.w1, None, true);
    let new = NewWait {
        sources: vec![a.id.clone()],
        mode: WaitMode::All,
        goal: None,
    };
    let first = w.store.register_agent_wait(&alice, &t.boss_ep, &new, "wk").unwrap();
    let again = w.store.register_agent_wait(&alice, &t.boss_ep, &new, "wk").unwrap();
    assert!(again.replayed);
    assert_eq!(again.value.id, first.value.id);
    let before = w.bytes();
    let changed = NewWait {
        mode: WaitMode::Any,
        ..new.clone()
    };
    let err = w
        .store
        .register_agent_wait(&alice, &t.boss_ep, &changed, "wk")
        .unwrap_err();
    assert!(matches!(err, ConversationError::IdempotencyConflict { .. }));
    let twice = NewWait {
        sources: vec![a.id.clone(), a.id.clone()],
        ..new.clone()
    };
    let err = w
        .store
        .register_agent_wait(&alice, &t.boss_ep, &twice, "wk2")
        .unwrap_err();
    assert!(matches!(err, ConversationError::InvalidInput { field: "sources", .. }));
    // A source the agent cannot see is not found (W2 did not create or get task `a`).
    let err = w.wait(&alice, &t.w2_ep, &[&a], WaitMode::All, None).unwrap_err();
    assert!(matches!(err, ConversationError::TaskNotFound(_)), "{err:?}");
    assert_eq!(w.bytes(), before);
}

#[test]
fn waits_are_listed_for_their_agent_and_the_owner() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let a = w.task(&alice, &t.boss(), &t.w1, None, true);
    w.wait(&alice, &t.boss_ep, &[&a], WaitMode::All, None).unwrap();
    w.wait(&alice, &t.w1_ep, &[&a], WaitMode::All, None).unwrap();
    assert_eq!(
        w.store
            .list_agent_waits(&alice, &Acting::Human, None, None, 10)
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        w.store
            .list_agent_waits(&alice, &t.boss(), None, None, 10)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        w.store
            .list_agent_waits(&alice, &Acting::Human, Some(&t.w1.id), None, 10)
            .unwrap()
            .len(),
        1
    );
}

/// A worker's host crashes mid-attempt (its turn crossed the dispatch fence): however the
/// unknown outcome is settled — the carrier settling its unconfirmed attempts, a takeover's
/// reconciliation, the worker's endpoint retired — the coordinator waiting on the task is woken.
#[test]
fn a_worker_crashing_mid_attempt_wakes_the_coordinator_waiting_on_its_task() {
    type Settle = fn(&mut World, &Team);
    let settles: [(&str, Settle); 3] = [
        ("settled by its carrier", |w, t| {
            let alice = w.alice.clone();
            w.store.settle_unconfirmed_attempts(&alice, &t.w1_ep).unwrap();
        }),
        ("reconciled at takeover", |w, _| {
            w.store.reconcile_takeover().unwrap();
        }),
        ("endpoint replaced", |w, t| {
            let alice = w.alice.clone();
            w.attach(&alice, &t.w1);
        }),
    ];
    for (how, settle) in settles {
        let mut w = world();
        let t = w.team();
        let alice = w.alice.clone();
        let a = w.task(&alice, &t.boss(), &t.w1, None, true);
        let b = w.task(&alice, &t.boss(), &t.w2, None, true);
        let wait = w.wait(&alice, &t.boss_ep, &[&a, &b], WaitMode::All, None).unwrap();
        w.complete(&alice, &t.w2_ep, &b, TaskOutcome::Succeeded, "two").unwrap();
        w.dispatch(&t.w1_ep);
        assert!(w.open_wake(&t.boss_ep).is_none(), "{how}: still waiting on the first");
        settle(&mut w, &t);
        let fired = w.store.read_agent_wait(&alice, &t.boss(), &wait.id).unwrap();
        assert_eq!(fired.state, WaitState::Triggered, "{how}");
        assert_eq!(
            fired.sources.iter().map(|s| s.task_state).collect::<Vec<_>>(),
            vec![TaskState::Failed, TaskState::Succeeded],
            "{how}"
        );
        let wake = w.open_wake(&t.boss_ep).unwrap();
        assert_eq!(wake.origin, WakeOrigin::Wait(wait.id.clone()), "{how}");
        assert_eq!(w.causes("wait", &wait.id), 1, "{how}");
        let task = w.store.get_agent_task(&alice, &t.boss(), &a.id).unwrap();
        assert_eq!(task.result.as_deref(), Some(DELIVERY_UNKNOWN_RESULT), "{how}");
    }
}
