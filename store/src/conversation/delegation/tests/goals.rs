use super::*;

fn checkpoint(goal: &Goal, revision: u64, note: &str) -> GoalCheckpoint {
    GoalCheckpoint {
        goal: goal.id.clone(),
        expected_revision: revision,
        plan: vec![PlanStep {
            title: "build".into(),
            status: StepStatus::Done,
        }],
        note: note.into(),
    }
}

#[test]
fn a_goal_keeps_its_intent_and_checkpoints_are_revision_fenced() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let g = w.goal(&alice, &Acting::Human, Some(&t.boss));
    assert_eq!(
        (g.revision, g.state, g.controller_agent_id.as_deref()),
        (1, GoalState::Active, Some(t.boss.id.as_str()))
    );
    let c = w
        .store
        .checkpoint_goal(&alice, &t.boss(), &checkpoint(&g, 1, "built"), "c1")
        .unwrap();
    assert!(c.state_changed);
    assert_eq!((c.value.revision, c.value.note.as_str()), (2, "built"));
    assert_eq!(c.value.plan[0].status, StepStatus::Done);
    assert_eq!(c.value.completion_intent, g.completion_intent);
    // A stale revision conflicts and changes nothing.
    let before = w.bytes();
    let err = w
        .store
        .checkpoint_goal(&alice, &t.boss(), &checkpoint(&g, 1, "again"), "c2")
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConversationError::GoalRevisionConflict {
                expected: 1,
                current: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(w.bytes(), before);
    // The exact retry is a replay, even though the revision moved on.
    let again = w
        .store
        .checkpoint_goal(&alice, &t.boss(), &checkpoint(&g, 1, "built"), "c1")
        .unwrap();
    assert!(again.replayed);
    assert_eq!(again.value.revision, 2);
    assert_eq!(w.bytes(), before);
}

#[test]
fn complete_and_abandon_are_explicit_and_desired_state() {
    let mut w = world();
    let alice = w.alice.clone();
    let g = w.goal(&alice, &Acting::Human, None);
    let done = w.store.complete_goal(&alice, &Acting::Human, &g.id).unwrap();
    assert!(done.state_changed);
    assert_eq!(done.value.state, GoalState::Completed);
    let before = w.bytes();
    assert!(
        !w.store
            .complete_goal(&alice, &Acting::Human, &g.id)
            .unwrap()
            .state_changed
    );
    let err = w.store.abandon_goal(&alice, &Acting::Human, &g.id).unwrap_err();
    assert!(matches!(
        err,
        ConversationError::InvalidGoalState {
            state: GoalState::Completed,
            ..
        }
    ));
    let err = w
        .store
        .checkpoint_goal(&alice, &Acting::Human, &checkpoint(&g, 1, "x"), "c")
        .unwrap_err();
    assert!(matches!(err, ConversationError::InvalidGoalState { .. }));
    assert_eq!(w.bytes(), before);
    let g2 = w.goal(&alice, &Acting::Human, None);
    assert_eq!(
        w.store
            .abandon_goal(&alice, &Acting::Human, &g2.id)
            .unwrap()
            .value
            .state,
        GoalState::Abandoned
    );
}

#[test]
fn tasks_correlate_only_to_active_goals_the_creator_sees() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let g = w.goal(&alice, &Acting::Human, None);
    // The boss neither created nor controls it: not found.
    let before = w.bytes();
    let k = w.key();
    let err = w
        .store
        .create_agent_task(&alice, &t.boss(), &World::new_task(&t.w1, Some(&g), false), &k)
        .unwrap_err();
    assert!(matches!(err, ConversationError::GoalNotFound(_)), "{err:?}");
    assert_eq!(w.bytes(), before);
    let task = w.task(&alice, &Acting::Human, &t.w1, Some(&g), false);
    assert_eq!(task.goal_id.as_deref(), Some(g.id.as_str()));
    w.store.complete_goal(&alice, &Acting::Human, &g.id).unwrap();
    let k = w.key();
    let err = w
        .store
        .create_agent_task(&alice, &Acting::Human, &World::new_task(&t.w1, Some(&g), false), &k)
        .unwrap_err();
    assert!(matches!(err, ConversationError::InvalidGoalState { .. }), "{err:?}");
}

#[test]
fn goals_are_read_by_their_creator_and_controller_and_listed() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let g = w.goal(&alice, &t.boss(), Some(&t.w1));
    assert_eq!(
        w.store
            .get_goal(&alice, &Acting::Agent(t.w1_ep.clone()), &g.id)
            .unwrap()
            .id,
        g.id
    );
    assert_eq!(
        w.store
            .get_goal(&alice, &t.boss(), &g.id)
            .unwrap()
            .creator_agent_id
            .as_deref(),
        Some(t.boss.id.as_str())
    );
    let err = w
        .store
        .get_goal(&alice, &Acting::Agent(t.w2_ep.clone()), &g.id)
        .unwrap_err();
    assert!(matches!(err, ConversationError::GoalNotFound(_)));
    assert_eq!(w.store.list_goals(&alice, &Acting::Human, None, 10).unwrap().len(), 1);
    assert_eq!(
        w.store
            .list_goals(&alice, &Acting::Agent(t.w2_ep.clone()), None, 10)
            .unwrap()
            .len(),
        0
    );
    assert_eq!(w.store.operator_goals(None, 10).unwrap().len(), 1);
    assert_eq!(w.store.operator_goal(&g.id).unwrap(), g);
}
