use super::*;

#[test]
fn completion_is_exact_and_idempotent() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    let done = w
        .complete(&alice, &t.w1_ep, &task, TaskOutcome::Succeeded, "42")
        .unwrap();
    assert!(done.state_changed);
    assert_eq!(done.value.state, TaskState::Succeeded);
    assert_eq!(done.value.result.as_deref(), Some("42"));
    assert!(done.value.terminal_at.is_some());
    assert_eq!(
        done.value.current_attempt.as_ref().unwrap().state,
        TaskAttemptState::Succeeded
    );
    // The exact retry is a replay and changes nothing.
    let before = w.bytes();
    let again = w
        .complete(&alice, &t.w1_ep, &task, TaskOutcome::Succeeded, "42")
        .unwrap();
    assert!(again.replayed && !again.state_changed);
    assert_eq!(again.value, done.value);
    assert_eq!(w.bytes(), before);
    // A different result, or outcome, is refused and changes nothing.
    for (outcome, result) in [(TaskOutcome::Succeeded, "43"), (TaskOutcome::Failed, "42")] {
        let err = w.complete(&alice, &t.w1_ep, &task, outcome, result).unwrap_err();
        assert!(
            matches!(
                err,
                ConversationError::InvalidTaskAttemptState {
                    state: TaskAttemptState::Succeeded,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(w.bytes(), before);
    }
}

#[test]
fn a_failed_attempt_fails_the_task_with_its_reason() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    let done = w
        .complete(&alice, &t.w1_ep, &task, TaskOutcome::Failed, "no data")
        .unwrap()
        .value;
    assert_eq!(
        (done.state, done.result.as_deref()),
        (TaskState::Failed, Some("no data"))
    );
}

#[test]
fn only_the_assignee_completes_and_another_agent_finds_no_such_attempt() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    let before = w.bytes();
    for actor in [t.w2_ep.clone(), t.boss_ep.clone()] {
        let err = w
            .complete(&alice, &actor, &task, TaskOutcome::Succeeded, "x")
            .unwrap_err();
        assert!(matches!(err, ConversationError::TaskAttemptNotFound(_)), "{err:?}");
    }
    // A stale generation of the assignee is refused by admission.
    let stale = AgentActor {
        generation: t.w1_ep.generation + 1,
        ..t.w1_ep.clone()
    };
    let err = w
        .complete(&alice, &stale, &task, TaskOutcome::Succeeded, "x")
        .unwrap_err();
    assert!(matches!(err, ConversationError::StaleGeneration { .. }), "{err:?}");
    assert_eq!(w.bytes(), before);
}

#[test]
fn losing_the_endpoint_before_the_fence_revokes_the_attempt_and_reopens_the_task() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    let newer = w.attach(&alice, &t.w1);
    let now = w.store.get_agent_task(&alice, &Acting::Human, &task.id).unwrap();
    assert_eq!(now.state, TaskState::Open);
    assert_eq!(now.current_attempt.as_ref().unwrap().state, TaskAttemptState::Revoked);
    // The old attempt cannot be completed; a new one runs through the new endpoint.
    let err = w
        .complete(&alice, &newer, &task, TaskOutcome::Succeeded, "x")
        .unwrap_err();
    assert!(matches!(
        err,
        ConversationError::InvalidTaskAttemptState {
            state: TaskAttemptState::Revoked,
            ..
        }
    ));
    let restarted = w.store.start_task_attempt(&alice, &t.boss(), &task.id).unwrap().value;
    let second = restarted.current_attempt.clone().unwrap();
    assert_eq!(
        (second.number, second.endpoint_id.as_str()),
        (2, newer.endpoint.as_str())
    );
    let done = w
        .complete(&alice, &newer, &restarted, TaskOutcome::Succeeded, "ok")
        .unwrap()
        .value;
    assert_eq!(done.state, TaskState::Succeeded);
}

#[test]
fn after_the_fence_a_lost_endpoint_leaves_delivery_unknown_never_rerun_and_its_task_failed() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    w.dispatch(&t.w1_ep);
    let newer = w.attach(&alice, &t.w1);
    let now = w.store.get_agent_task(&alice, &Acting::Human, &task.id).unwrap();
    assert_eq!(
        (now.state, now.result.as_deref()),
        (TaskState::Failed, Some(DELIVERY_UNKNOWN_RESULT)),
        "visibly unresolved"
    );
    assert!(now.terminal_at.is_some());
    assert_eq!(
        now.current_attempt.as_ref().unwrap().state,
        TaskAttemptState::DeliveryUnknown
    );
    // Never silently re-run: no new attempt, no new wake for the task.
    let before = w.bytes();
    let err = w.store.start_task_attempt(&alice, &t.boss(), &task.id).unwrap_err();
    assert!(
        matches!(
            err,
            ConversationError::InvalidTaskState {
                state: TaskState::Failed,
                ..
            }
        ),
        "{err:?}"
    );
    let err = w
        .complete(&alice, &newer, &task, TaskOutcome::Succeeded, "late")
        .unwrap_err();
    assert!(matches!(
        err,
        ConversationError::InvalidTaskAttemptState {
            state: TaskAttemptState::DeliveryUnknown,
            ..
        }
    ));
    assert_eq!(w.bytes(), before);
    assert!(w.open_wake(&newer).is_none());
}

#[test]
fn a_takeover_after_the_fence_leaves_delivery_unknown() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    w.dispatch(&t.w1_ep);
    w.store.reconcile_takeover().unwrap();
    let now = w.store.get_agent_task(&alice, &Acting::Human, &task.id).unwrap();
    assert_eq!(now.current_attempt.unwrap().state, TaskAttemptState::DeliveryUnknown);
    // Same endpoint and generation still attached, but the attempt is not completed by it.
    let err = w
        .complete(&alice, &t.w1_ep, &task, TaskOutcome::Succeeded, "x")
        .unwrap_err();
    assert!(matches!(
        err,
        ConversationError::InvalidTaskAttemptState {
            state: TaskAttemptState::DeliveryUnknown,
            ..
        }
    ));
}

#[test]
fn a_takeover_before_the_fence_keeps_the_attempt_for_the_next_claim() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    let claim = w
        .store
        .claim_wake(&alice, &t.w1_ep, Duration::from_secs(30))
        .unwrap()
        .unwrap();
    w.store.reconcile_takeover().unwrap();
    // The claim was released: the wake is pending again and the attempt still active.
    assert_eq!(w.open_wake(&t.w1_ep).unwrap().id, claim.wake.id);
    let now = w.store.get_agent_task(&alice, &Acting::Human, &task.id).unwrap();
    assert_eq!(now.current_attempt.unwrap().state, TaskAttemptState::Active);
}

#[test]
fn a_replayed_completion_recovers_after_the_endpoint_was_replaced() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    let first = w
        .complete(&alice, &t.w1_ep, &task, TaskOutcome::Succeeded, "r")
        .unwrap()
        .value;
    w.attach(&alice, &t.w1);
    let again = w
        .complete(&alice, &t.w1_ep, &task, TaskOutcome::Succeeded, "r")
        .unwrap();
    assert!(again.replayed);
    assert_eq!(again.value.id, first.id);
}

#[test]
fn the_attempt_history_is_readable_in_order() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    let newer = w.attach(&alice, &t.w1);
    w.store.start_task_attempt(&alice, &Acting::Human, &task.id).unwrap();
    let all = w.store.task_attempts(&alice, &Acting::Agent(newer), &task.id).unwrap();
    let states: Vec<_> = all.iter().map(|a| (a.number, a.state)).collect();
    assert_eq!(
        states,
        vec![(1, TaskAttemptState::Revoked), (2, TaskAttemptState::Active)]
    );
}

#[test]
fn a_turn_whose_outcome_is_unknown_leaves_its_task_attempt_delivery_unknown() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    let ticket = w.dispatch(&t.w1_ep);
    w.store
        .finish_turn(&alice, &t.w1_ep, &ticket, DispatchOutcome::Unknown)
        .unwrap();
    let now = w.store.get_agent_task(&alice, &Acting::Human, &task.id).unwrap();
    assert_eq!(now.current_attempt.unwrap().state, TaskAttemptState::DeliveryUnknown);
    // The carrier settling its unconfirmed attempts does the same.
    let other = w.task(&alice, &t.boss(), &t.w2, None, true);
    w.dispatch(&t.w2_ep);
    w.store.settle_unconfirmed_attempts(&alice, &t.w2_ep).unwrap();
    let now = w.store.get_agent_task(&alice, &Acting::Human, &other.id).unwrap();
    assert_eq!(now.current_attempt.unwrap().state, TaskAttemptState::DeliveryUnknown);
}

#[test]
fn a_turn_that_ran_and_completed_its_attempt_consumes_its_wake_normally() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    let ticket = w.dispatch(&t.w1_ep);
    assert_eq!(ticket.wake.origin, WakeOrigin::AgentTaskAttempt(task.id.clone()));
    // Inside the turn: read the task, finish the attempt; then the carrier ends the turn.
    let read = w
        .store
        .get_agent_task(&alice, &Acting::Agent(t.w1_ep.clone()), &task.id)
        .unwrap();
    assert_eq!(read.instructions, "do the job");
    w.complete(&alice, &t.w1_ep, &read, TaskOutcome::Succeeded, "done")
        .unwrap();
    let end = w
        .store
        .finish_turn(&alice, &t.w1_ep, &ticket, DispatchOutcome::Accepted)
        .unwrap();
    assert_eq!(end.value.state, AttemptState::Consumed);
    let now = w.store.get_agent_task(&alice, &Acting::Human, &task.id).unwrap();
    assert_eq!(
        (now.state, now.current_attempt.unwrap().state),
        (TaskState::Succeeded, TaskAttemptState::Succeeded)
    );
}
