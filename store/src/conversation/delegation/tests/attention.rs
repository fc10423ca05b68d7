use super::*;

fn events(w: &mut World) -> i64 {
    w.count("SELECT count(*) FROM attention_events")
}

#[test]
fn a_terminal_attempt_of_a_goal_task_wakes_the_goal_controller_once() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let controller = w.agent(&alice);
    let controller_ep = w.attach(&alice, &controller);
    let g = w.goal(&alice, &Acting::Human, Some(&controller));
    let task = w.task(&alice, &Acting::Human, &t.w1, Some(&g), true);
    w.complete(&alice, &t.w1_ep, &task, TaskOutcome::Succeeded, "r")
        .unwrap();
    let list = w
        .store
        .list_attention_events(&alice, &Acting::Agent(controller_ep.clone()), None, 10)
        .unwrap();
    assert_eq!(list.len(), 1);
    let e = &list[0];
    assert_eq!(
        (e.kind, e.task_state),
        (AttentionKind::AgentTaskTerminal, Some(TaskState::Succeeded))
    );
    assert_eq!(e.epoch, None);
    assert_eq!(
        (e.goal_id.as_str(), e.task_id.as_deref().unwrap()),
        (g.id.as_str(), task.id.as_str())
    );
    assert_eq!(e.target_agent_id.as_deref(), Some(controller.id.as_str()));
    let wake = w.open_wake(&controller_ep).unwrap();
    assert_eq!(wake.origin, WakeOrigin::AttentionEvent(e.id.clone()));
    assert_eq!(e.wake_id.as_deref(), Some(wake.id.as_str()));
    // Nobody else is woken.
    assert!(w.open_wake(&t.boss_ep).is_none());
    // The exact completion retry makes no second event.
    w.complete(&alice, &t.w1_ep, &task, TaskOutcome::Succeeded, "r")
        .unwrap();
    assert_eq!(events(&mut w), 1);
    assert_eq!(w.causes("attention_event", &e.id), 1);
    let one = w.store.get_attention_event(&alice, &Acting::Human, &e.id).unwrap();
    assert_eq!(&one, e);
}

#[test]
fn without_a_controller_the_creator_is_woken_and_a_human_creator_gets_the_event_only() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let g = w.goal(&alice, &t.boss(), None);
    let by_boss = w.task(&alice, &t.boss(), &t.w1, Some(&g), true);
    w.complete(&alice, &t.w1_ep, &by_boss, TaskOutcome::Failed, "r")
        .unwrap();
    let e = w.store.list_attention_events(&alice, &t.boss(), None, 10).unwrap();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].target_agent_id.as_deref(), Some(t.boss.id.as_str()));
    assert!(matches!(
        w.open_wake(&t.boss_ep).unwrap().origin,
        WakeOrigin::AttentionEvent(_)
    ));
    // Events list by creation time (ties by id): the second is a moment later.
    w.clock.advance(std::time::Duration::from_micros(1));
    let g2 = w.goal(&alice, &Acting::Human, None);
    let by_human = w.task(&alice, &Acting::Human, &t.w2, Some(&g2), true);
    w.complete(&alice, &t.w2_ep, &by_human, TaskOutcome::Succeeded, "r")
        .unwrap();
    let all = w.store.list_attention_events(&alice, &Acting::Human, None, 10).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!((all[1].target_agent_id.clone(), all[1].wake_id.clone()), (None, None));
    // Cursor paging.
    let rest = w
        .store
        .list_attention_events(&alice, &Acting::Human, Some(&all[0].id), 10)
        .unwrap();
    assert_eq!(rest.len(), 1);
}

#[test]
fn no_goal_or_a_closed_goal_or_a_cancel_makes_no_attention() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let plain = w.task(&alice, &t.boss(), &t.w1, None, true);
    w.complete(&alice, &t.w1_ep, &plain, TaskOutcome::Succeeded, "r")
        .unwrap();
    let g = w.goal(&alice, &t.boss(), Some(&t.boss));
    let late = w.task(&alice, &t.boss(), &t.w2, Some(&g), true);
    let cancelled = w.task(&alice, &t.boss(), &t.w1, Some(&g), true);
    w.store.cancel_agent_task(&alice, &t.boss(), &cancelled.id).unwrap();
    w.store.complete_goal(&alice, &t.boss(), &g.id).unwrap();
    w.complete(&alice, &t.w2_ep, &late, TaskOutcome::Succeeded, "r")
        .unwrap();
    assert_eq!(events(&mut w), 0);
    assert!(w.open_wake(&t.boss_ep).is_none());
}

#[test]
fn a_goal_scoped_all_wait_suppresses_attention_and_makes_the_single_wake() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let g = w.goal(&alice, &t.boss(), Some(&t.boss));
    let a = w.task(&alice, &t.boss(), &t.w1, Some(&g), true);
    let b = w.task(&alice, &t.boss(), &t.w2, Some(&g), true);
    let wait = w.wait(&alice, &t.boss_ep, &[&a, &b], WaitMode::All, Some(&g)).unwrap();
    w.complete(&alice, &t.w1_ep, &a, TaskOutcome::Succeeded, "1").unwrap();
    // The partial makes neither kind of wake.
    assert_eq!(events(&mut w), 0);
    assert!(w.open_wake(&t.boss_ep).is_none());
    w.complete(&alice, &t.w2_ep, &b, TaskOutcome::Succeeded, "2").unwrap();
    assert_eq!(events(&mut w), 0);
    assert_eq!(
        w.open_wake(&t.boss_ep).unwrap().origin,
        WakeOrigin::Wait(wait.id.clone())
    );
    assert_eq!(
        w.count("SELECT count(*) FROM wake_causes WHERE origin <> 'agent_task_attempt'"),
        1
    );
}

#[test]
fn a_triggered_scoped_any_wait_still_suppresses_and_its_cancel_restores_only_future_attention() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let g = w.goal(&alice, &t.boss(), Some(&t.boss));
    let a = w.task(&alice, &t.boss(), &t.w1, Some(&g), true);
    let b = w.task(&alice, &t.boss(), &t.w2, Some(&g), true);
    let c = w.task(&alice, &t.boss(), &t.w2, Some(&g), true);
    let wait = w
        .wait(&alice, &t.boss_ep, &[&a, &b, &c], WaitMode::Any, Some(&g))
        .unwrap();
    w.complete(&alice, &t.w1_ep, &a, TaskOutcome::Succeeded, "1").unwrap();
    w.complete(&alice, &t.w2_ep, &b, TaskOutcome::Succeeded, "2").unwrap();
    assert_eq!(events(&mut w), 0, "triggered still routes its sources");
    w.store.cancel_agent_wait(&alice, &t.boss(), &wait.id).unwrap();
    assert_eq!(events(&mut w), 0, "no backfill of suppressed attention");
    w.complete(&alice, &t.w2_ep, &c, TaskOutcome::Succeeded, "3").unwrap();
    let e = w.store.list_attention_events(&alice, &t.boss(), None, 10).unwrap();
    assert_eq!(
        e.iter().map(|e| e.task_id.clone()).collect::<Vec<_>>(),
        vec![Some(c.id.clone())]
    );
}

#[test]
fn a_generic_wait_does_not_change_attention_routing() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let g = w.goal(&alice, &t.boss(), Some(&t.boss));
    let a = w.task(&alice, &t.boss(), &t.w1, Some(&g), true);
    let wait = w.wait(&alice, &t.boss_ep, &[&a], WaitMode::All, None).unwrap();
    w.complete(&alice, &t.w1_ep, &a, TaskOutcome::Succeeded, "1").unwrap();
    assert_eq!(events(&mut w), 1);
    // Both causes coalesced into the boss's one open wake.
    let wake = w.open_wake(&t.boss_ep).unwrap();
    let causes = w.store.wake_causes(&alice, &t.boss_ep, &wake.id).unwrap();
    assert_eq!(causes.len(), 2);
    assert!(causes.iter().any(|c| c.origin == WakeOrigin::Wait(wait.id.clone())));
}

#[test]
fn scoped_registration_must_precede_terminal_facts_and_come_from_the_controller() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let g = w.goal(&alice, &t.boss(), Some(&t.boss));
    let a = w.task(&alice, &t.boss(), &t.w1, Some(&g), true);
    let other = w.task(&alice, &t.boss(), &t.w1, None, true);
    w.complete(&alice, &t.w1_ep, &a, TaskOutcome::Succeeded, "1").unwrap();
    let before = w.bytes();
    let err = w.wait(&alice, &t.boss_ep, &[&a], WaitMode::Any, Some(&g)).unwrap_err();
    assert!(
        matches!(
            err,
            ConversationError::WaitSourceRefused {
                reason: "it is already terminal",
                ..
            }
        ),
        "{err:?}"
    );
    let err = w
        .wait(&alice, &t.boss_ep, &[&other], WaitMode::Any, Some(&g))
        .unwrap_err();
    assert!(matches!(
        err,
        ConversationError::WaitSourceRefused {
            reason: "it does not serve the goal",
            ..
        }
    ));
    // W1 sees the goal's tasks (it is assigned) but is not the controller, nor can it see the goal.
    let b = w.task(&alice, &t.boss(), &t.w1, Some(&g), false);
    let err = w.wait(&alice, &t.w1_ep, &[&b], WaitMode::Any, Some(&g)).unwrap_err();
    assert!(matches!(err, ConversationError::GoalNotFound(_)), "{err:?}");
    let g2 = w.goal(&alice, &Acting::Agent(t.w1_ep.clone()), Some(&t.boss));
    let c = w.task(&alice, &Acting::Agent(t.w1_ep.clone()), &t.w2, Some(&g2), false);
    let before2 = w.bytes();
    let err = w.wait(&alice, &t.w1_ep, &[&c], WaitMode::Any, Some(&g2)).unwrap_err();
    assert!(matches!(err, ConversationError::NotPermitted { .. }), "{err:?}");
    assert_eq!(w.bytes(), before2);
    assert_ne!(before, before2);
}

#[test]
fn an_attempt_whose_outcome_became_unknown_wakes_the_goal_controller() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let controller = w.agent(&alice);
    let controller_ep = w.attach(&alice, &controller);
    let g = w.goal(&alice, &Acting::Human, Some(&controller));
    let task = w.task(&alice, &Acting::Human, &t.w1, Some(&g), true);
    let ticket = w.dispatch(&t.w1_ep);
    // The worker's turn could not be confirmed (its host lost it mid-turn).
    w.store
        .finish_turn(&alice, &t.w1_ep, &ticket, DispatchOutcome::Unknown)
        .unwrap();
    let list = w
        .store
        .list_attention_events(&alice, &Acting::Agent(controller_ep.clone()), None, 10)
        .unwrap();
    assert_eq!(list.len(), 1);
    let e = &list[0];
    assert_eq!(
        (e.kind, e.task_state, e.task_id.as_deref()),
        (
            AttentionKind::AgentTaskTerminal,
            Some(TaskState::Failed),
            Some(task.id.as_str())
        )
    );
    let wake = w.open_wake(&controller_ep).unwrap();
    assert_eq!(wake.origin, WakeOrigin::AttentionEvent(e.id.clone()));
    assert_eq!(events(&mut w), 1);
}
