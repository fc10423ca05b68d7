use super::*;

#[test]
fn an_agent_creates_a_task_for_another_and_its_attempt_wakes_the_assignee() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    assert_eq!(task.state, TaskState::Running);
    assert_eq!(task.creator_agent_id.as_deref(), Some(t.boss.id.as_str()));
    assert_eq!(task.attempt_count, 1);
    let attempt = task.current_attempt.clone().unwrap();
    assert_eq!(attempt.state, TaskAttemptState::Active);
    assert_eq!(
        (attempt.endpoint_id.as_str(), attempt.generation),
        (t.w1_ep.endpoint.as_str(), t.w1_ep.generation)
    );
    let wake = w.open_wake(&t.w1_ep).expect("the worker has a wake");
    assert_eq!(wake.id, attempt.wake_id);
    assert_eq!(wake.origin, WakeOrigin::AgentTaskAttempt(task.id.clone()));
    assert_eq!(wake.delivery_count, 0);
    // The turn can read why it runs.
    let causes = w.store.wake_causes(&alice, &t.w1_ep, &wake.id).unwrap();
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].origin, WakeOrigin::AgentTaskAttempt(task.id.clone()));
    // The creator is not woken by creating it.
    assert!(w.open_wake(&t.boss_ep).is_none());
}

#[test]
fn the_owner_creates_a_task_as_a_human_and_starts_it_later() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &Acting::Human, &t.w1, None, false);
    assert_eq!(
        (task.state, task.creator_agent_id.clone(), task.current_attempt.clone()),
        (TaskState::Open, None, None)
    );
    assert!(w.open_wake(&t.w1_ep).is_none());
    let started = w
        .store
        .start_task_attempt(&alice, &Acting::Human, &task.id)
        .unwrap()
        .value;
    assert_eq!(started.state, TaskState::Running);
    // A second start is refused and changes nothing.
    let before = w.bytes();
    let err = w
        .store
        .start_task_attempt(&alice, &Acting::Human, &task.id)
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConversationError::InvalidTaskState {
                state: TaskState::Running,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(w.bytes(), before);
}

#[test]
fn creation_is_idempotent_per_principal_and_a_changed_retry_is_refused() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let new = World::new_task(&t.w1, None, true);
    let first = w.store.create_agent_task(&alice, &t.boss(), &new, "same").unwrap();
    let again = w.store.create_agent_task(&alice, &t.boss(), &new, "same").unwrap();
    assert!(again.replayed && !again.state_changed);
    assert_eq!(again.value, first.value);
    assert_eq!(w.count("SELECT count(*) FROM agent_tasks"), 1);
    assert_eq!(w.count("SELECT count(*) FROM agent_task_attempts"), 1);
    let before = w.bytes();
    let mut changed = new.clone();
    changed.instructions = "something else".into();
    let err = w
        .store
        .create_agent_task(&alice, &t.boss(), &changed, "same")
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConversationError::IdempotencyConflict {
                operation: "create_agent_task"
            }
        ),
        "{err:?}"
    );
    assert_eq!(w.bytes(), before);
    // Another principal's same key is its own.
    let bob = w.bob.clone();
    let b = w.agent(&bob);
    w.attach(&bob, &b);
    let theirs = w
        .store
        .create_agent_task(&bob, &Acting::Human, &World::new_task(&b, None, false), "same")
        .unwrap();
    assert!(!theirs.replayed);
}

#[test]
fn a_replayed_creation_recovers_after_the_creator_endpoint_was_replaced() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let new = World::new_task(&t.w1, None, false);
    let first = w.store.create_agent_task(&alice, &t.boss(), &new, "k").unwrap().value;
    let _newer = w.attach(&alice, &t.boss);
    let again = w.store.create_agent_task(&alice, &t.boss(), &new, "k").unwrap();
    assert!(again.replayed);
    assert_eq!(again.value.id, first.id);
}

#[test]
fn starting_needs_an_attached_assignee_endpoint_and_a_refusal_changes_nothing() {
    let mut w = world();
    let alice = w.alice.clone();
    let boss = w.agent(&alice);
    let offline = w.agent(&alice);
    let boss_ep = w.attach(&alice, &boss);
    let before = w.bytes();
    let k = w.key();
    let err = w
        .store
        .create_agent_task(
            &alice,
            &Acting::Agent(boss_ep),
            &World::new_task(&offline, None, true),
            &k,
        )
        .unwrap_err();
    assert!(
        matches!(&err, ConversationError::AssigneeUnavailable(a) if *a == offline.id),
        "{err:?}"
    );
    assert_eq!(w.bytes(), before);
}

#[test]
fn the_assignee_must_be_the_same_owners_agent() {
    let mut w = world();
    let t = w.team();
    let (alice, bob) = (w.alice.clone(), w.bob.clone());
    let foreign = w.agent(&bob);
    let before = w.bytes();
    let k = w.key();
    let err = w
        .store
        .create_agent_task(&alice, &t.boss(), &World::new_task(&foreign, None, false), &k)
        .unwrap_err();
    assert!(matches!(err, ConversationError::AgentNotFound(_)), "{err:?}");
    assert_eq!(w.bytes(), before);
}

#[test]
fn a_task_attempt_coalesces_into_an_open_message_wake_whose_origin_stays_the_first() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let k = w.key();
    let cv = w
        .store
        .create_conversation(
            &alice,
            &NewConversation {
                title: "q".into(),
                agents: vec![t.w1.id.clone()],
            },
            &k,
        )
        .unwrap()
        .value;
    let k = w.key();
    let post = NewMessage {
        conversation: cv.id,
        acting: Acting::Human,
        body: "hello".into(),
        reply_to: None,
        idempotency: IdempotencyKey::Key(k),
    };
    w.store.post_message(&alice, &post).unwrap();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    assert_eq!(w.count("SELECT count(*) FROM wakes"), 1);
    let wake = w.open_wake(&t.w1_ep).unwrap();
    assert_eq!(wake.origin, WakeOrigin::Message);
    assert_eq!(wake.delivery_count, 1);
    assert_eq!(task.current_attempt.unwrap().wake_id, wake.id);
    assert_eq!(w.causes("agent_task_attempt", &task.id), 1);
}

#[test]
fn a_message_coalesces_into_a_task_wake_and_sets_its_first_delivery() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    w.task(&alice, &t.boss(), &t.w1, None, true);
    let k = w.key();
    let cv = w
        .store
        .create_conversation(
            &alice,
            &NewConversation {
                title: "q".into(),
                agents: vec![t.w1.id.clone()],
            },
            &k,
        )
        .unwrap()
        .value;
    let k = w.key();
    let post = NewMessage {
        conversation: cv.id,
        acting: Acting::Human,
        body: "hello".into(),
        reply_to: None,
        idempotency: IdempotencyKey::Key(k),
    };
    w.store.post_message(&alice, &post).unwrap();
    let wake = w.open_wake(&t.w1_ep).unwrap();
    assert!(matches!(wake.origin, WakeOrigin::AgentTaskAttempt(_)));
    assert_eq!(
        (wake.delivery_count, wake.first_delivery_order),
        (1, wake.high_water_order)
    );
    assert!(wake.first_delivery_order >= 1);
}

#[test]
fn cancel_is_desired_state_and_only_creator_owner_or_controller_may() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    // The assignee may not cancel (it fails the attempt instead).
    let before = w.bytes();
    let err = w
        .store
        .cancel_agent_task(&alice, &Acting::Agent(t.w1_ep.clone()), &task.id)
        .unwrap_err();
    assert!(matches!(err, ConversationError::NotPermitted { .. }), "{err:?}");
    assert_eq!(w.bytes(), before);
    let c = w.store.cancel_agent_task(&alice, &t.boss(), &task.id).unwrap();
    assert!(c.state_changed);
    assert_eq!(c.value.state, TaskState::Cancelled);
    assert_eq!(c.value.current_attempt.unwrap().state, TaskAttemptState::Cancelled);
    let before = w.bytes();
    let again = w.store.cancel_agent_task(&alice, &Acting::Human, &task.id).unwrap();
    assert!(!again.state_changed);
    assert_eq!(w.bytes(), before);
    // A cancelled attempt cannot be completed.
    let err = w
        .complete(&alice, &t.w1_ep, &task, TaskOutcome::Succeeded, "x")
        .unwrap_err();
    assert!(matches!(
        err,
        ConversationError::InvalidTaskAttemptState {
            state: TaskAttemptState::Cancelled,
            ..
        }
    ));
}

#[test]
fn a_finished_task_cannot_be_cancelled() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let task = w.task(&alice, &t.boss(), &t.w1, None, true);
    w.complete(&alice, &t.w1_ep, &task, TaskOutcome::Succeeded, "done")
        .unwrap();
    let before = w.bytes();
    let err = w.store.cancel_agent_task(&alice, &t.boss(), &task.id).unwrap_err();
    assert!(
        matches!(
            err,
            ConversationError::InvalidTaskState {
                state: TaskState::Succeeded,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(w.bytes(), before);
}

#[test]
fn listing_filters_within_what_the_actor_sees() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let a = w.task(&alice, &t.boss(), &t.w1, None, true);
    let b = w.task(&alice, &t.boss(), &t.w2, None, false);
    let c = w.task(&alice, &Acting::Human, &t.w2, None, false);
    let all = w
        .store
        .list_agent_tasks(&alice, &Acting::Human, &TaskQuery::default(), 10)
        .unwrap();
    assert_eq!(all.len(), 3);
    let mine = w
        .store
        .list_agent_tasks(&alice, &t.boss(), &TaskQuery::default(), 10)
        .unwrap();
    let mut ids: Vec<_> = mine.iter().map(|t| t.id.clone()).collect();
    ids.sort();
    let mut want = vec![a.id.clone(), b.id.clone()];
    want.sort();
    assert_eq!(ids, want);
    // W1 sees only its own; it cannot read the human's task for W2.
    let w1 = Acting::Agent(t.w1_ep.clone());
    let seen = w
        .store
        .list_agent_tasks(&alice, &w1, &TaskQuery::default(), 10)
        .unwrap();
    assert_eq!(
        seen.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        vec![a.id.clone()]
    );
    let err = w.store.get_agent_task(&alice, &w1, &c.id).unwrap_err();
    assert!(matches!(err, ConversationError::TaskNotFound(_)));
    let open = TaskQuery {
        state: Some(TaskState::Open),
        assignee: Some(t.w2.id.clone()),
        ..TaskQuery::default()
    };
    assert_eq!(
        w.store
            .list_agent_tasks(&alice, &Acting::Human, &open, 10)
            .unwrap()
            .len(),
        2
    );
    // Paging by id.
    let first = w
        .store
        .list_agent_tasks(&alice, &Acting::Human, &TaskQuery::default(), 2)
        .unwrap();
    let rest = TaskQuery {
        after: Some(first[1].id.clone()),
        ..TaskQuery::default()
    };
    assert_eq!(
        w.store
            .list_agent_tasks(&alice, &Acting::Human, &rest, 10)
            .unwrap()
            .len(),
        1
    );
    // The operator sees every task.
    assert_eq!(w.store.operator_tasks(None, 10).unwrap().len(), 3);
    assert_eq!(w.store.operator_task(&a.id).unwrap().id, a.id);
}
