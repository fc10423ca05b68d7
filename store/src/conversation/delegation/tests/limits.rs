use super::*;
use crate::conversation::delegation::bounds::*;

#[test]
fn wait_sources_at_the_limit_and_one_past() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let tasks: Vec<AgentTask> = (0..=MAX_WAIT_SOURCES)
        .map(|_| w.task(&alice, &t.boss(), &t.w1, None, false))
        .collect();
    let refs: Vec<&AgentTask> = tasks.iter().collect();
    assert!(
        w.wait(&alice, &t.boss_ep, &refs[..MAX_WAIT_SOURCES], WaitMode::All, None)
            .is_ok()
    );
    let before = w.bytes();
    let err = w.wait(&alice, &t.boss_ep, &refs, WaitMode::All, None).unwrap_err();
    assert!(
        matches!(err, ConversationError::InvalidInput { field: "sources", .. }),
        "{err:?}"
    );
    let err = w.wait(&alice, &t.boss_ep, &[], WaitMode::All, None).unwrap_err();
    assert!(matches!(err, ConversationError::InvalidInput { field: "sources", .. }));
    assert_eq!(w.bytes(), before);
}

#[test]
fn open_tasks_per_agent_at_the_limit_and_one_past() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let mut last = None;
    for _ in 0..MAX_OPEN_TASKS_PER_AGENT {
        last = Some(w.task(&alice, &Acting::Human, &t.w1, None, false));
    }
    let before = w.bytes();
    let k = w.key();
    let err = w
        .store
        .create_agent_task(&alice, &Acting::Human, &World::new_task(&t.w1, None, false), &k)
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConversationError::LimitReached {
                limit: MAX_OPEN_TASKS_PER_AGENT,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(w.bytes(), before);
    // Another assignee is unaffected, and a finished task frees a place.
    w.task(&alice, &Acting::Human, &t.w2, None, false);
    w.store
        .cancel_agent_task(&alice, &Acting::Human, &last.unwrap().id)
        .unwrap();
    w.task(&alice, &Acting::Human, &t.w1, None, false);
}

#[test]
fn instructions_and_titles_at_the_limit_and_one_past() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let mut new = World::new_task(&t.w1, None, false);
    new.instructions = "i".repeat(MAX_TASK_INSTRUCTIONS_BYTES);
    new.title = "t".repeat(MAX_TITLE_BYTES);
    let k = w.key();
    w.store.create_agent_task(&alice, &Acting::Human, &new, &k).unwrap();
    let before = w.bytes();
    for field in ["instructions", "title"] {
        let mut past = new.clone();
        match field {
            "instructions" => past.instructions.push('i'),
            _ => past.title.push('t'),
        }
        let k = w.key();
        let err = w
            .store
            .create_agent_task(&alice, &Acting::Human, &past, &k)
            .unwrap_err();
        assert!(
            matches!(err, ConversationError::InvalidInput { field: f, .. } if f == field),
            "{err:?}"
        );
    }
    let mut blank = new.clone();
    blank.instructions = " ".into();
    let k = w.key();
    assert!(w.store.create_agent_task(&alice, &Acting::Human, &blank, &k).is_err());
    assert_eq!(w.bytes(), before);
}

#[test]
fn results_at_the_limit_and_one_past() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let a = w.task(&alice, &t.boss(), &t.w1, None, true);
    let before = w.bytes();
    let err = w
        .complete(
            &alice,
            &t.w1_ep,
            &a,
            TaskOutcome::Succeeded,
            &"r".repeat(MAX_TASK_RESULT_BYTES + 1),
        )
        .unwrap_err();
    assert!(
        matches!(err, ConversationError::InvalidInput { field: "result", .. }),
        "{err:?}"
    );
    assert_eq!(w.bytes(), before);
    let done = w
        .complete(
            &alice,
            &t.w1_ep,
            &a,
            TaskOutcome::Succeeded,
            &"r".repeat(MAX_TASK_RESULT_BYTES),
        )
        .unwrap()
        .value;
    assert_eq!(done.result.unwrap().len(), MAX_TASK_RESULT_BYTES);
}

#[test]
fn plan_steps_and_goal_texts_at_the_limit_and_one_past() {
    let mut w = world();
    let alice = w.alice.clone();
    let step = |n: usize| PlanStep {
        title: "s".repeat(n),
        status: StepStatus::Pending,
    };
    let new = NewGoal {
        title: "g".into(),
        completion_intent: "c".repeat(MAX_COMPLETION_INTENT_BYTES),
        plan: (0..MAX_PLAN_STEPS).map(|_| step(MAX_PLAN_STEP_BYTES)).collect(),
        controller: None,
    };
    let g = w.store.create_goal(&alice, &Acting::Human, &new, "g1").unwrap().value;
    let before = w.bytes();
    let mut more = new.clone();
    more.plan.push(step(1));
    let err = w.store.create_goal(&alice, &Acting::Human, &more, "g2").unwrap_err();
    assert!(
        matches!(err, ConversationError::InvalidInput { field: "plan", .. }),
        "{err:?}"
    );
    let mut long = new.clone();
    long.plan[0] = step(MAX_PLAN_STEP_BYTES + 1);
    assert!(w.store.create_goal(&alice, &Acting::Human, &long, "g3").is_err());
    let mut intent = new.clone();
    intent.completion_intent.push('c');
    let err = w.store.create_goal(&alice, &Acting::Human, &intent, "g4").unwrap_err();
    assert!(matches!(
        err,
        ConversationError::InvalidInput {
            field: "completionIntent",
            ..
        }
    ));
    let cp = |plan: Vec<PlanStep>, note: String| GoalCheckpoint {
        goal: g.id.clone(),
        expected_revision: 1,
        plan,
        note,
    };
    let too_many = (0..=MAX_PLAN_STEPS).map(|_| step(1)).collect();
    assert!(
        w.store
            .checkpoint_goal(&alice, &Acting::Human, &cp(too_many, String::new()), "c1")
            .is_err()
    );
    let err = w
        .store
        .checkpoint_goal(
            &alice,
            &Acting::Human,
            &cp(vec![], "n".repeat(MAX_CHECKPOINT_NOTE_BYTES + 1)),
            "c2",
        )
        .unwrap_err();
    assert!(matches!(err, ConversationError::InvalidInput { field: "note", .. }));
    assert_eq!(w.bytes(), before);
    let full = (0..MAX_PLAN_STEPS).map(|_| step(1)).collect();
    let ok = w
        .store
        .checkpoint_goal(
            &alice,
            &Acting::Human,
            &cp(full, "n".repeat(MAX_CHECKPOINT_NOTE_BYTES)),
            "c3",
        )
        .unwrap();
    assert_eq!(ok.value.plan.len(), MAX_PLAN_STEPS);
}

#[test]
fn waiting_waits_per_agent_at_the_limit_and_one_past() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let a = w.task(&alice, &t.boss(), &t.w1, None, false);
    for _ in 0..MAX_WAITING_WAITS_PER_AGENT {
        w.wait(&alice, &t.boss_ep, &[&a], WaitMode::Any, None).unwrap();
    }
    let before = w.bytes();
    let err = w.wait(&alice, &t.boss_ep, &[&a], WaitMode::Any, None).unwrap_err();
    assert!(
        matches!(
            err,
            ConversationError::LimitReached {
                limit: MAX_WAITING_WAITS_PER_AGENT,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(w.bytes(), before);
}

#[test]
fn attempts_per_task_at_the_limit_and_one_past() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let a = w.task(&alice, &t.boss(), &t.w1, None, true);
    for _ in 1..MAX_ATTEMPTS_PER_TASK {
        w.attach(&alice, &t.w1); // revokes the pre-fence attempt
        w.store.start_task_attempt(&alice, &Acting::Human, &a.id).unwrap();
    }
    w.attach(&alice, &t.w1);
    let before = w.bytes();
    let err = w.store.start_task_attempt(&alice, &Acting::Human, &a.id).unwrap_err();
    assert!(
        matches!(
            err,
            ConversationError::LimitReached {
                limit: MAX_ATTEMPTS_PER_TASK,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(w.bytes(), before);
}
