//! Each delegation write reports exactly whom its transaction woke (`Mutation::woken`), which
//! its caller schedules: the assignee of an attempt started, the waiter of a wait that fired,
//! the target of an attention event — and nobody for a replay, a no-op or a write that wakes
//! no one.

use super::*;

#[test]
fn a_task_started_wakes_its_assignee_and_a_replay_or_an_unstarted_task_nobody() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let new = World::new_task(&t.w1, None, true);
    let created = w.store.create_agent_task(&alice, &t.boss(), &new, "k-task").unwrap();
    assert_eq!(created.woken, vec![t.w1.id.clone()]);
    let replayed = w.store.create_agent_task(&alice, &t.boss(), &new, "k-task").unwrap();
    assert!(replayed.replayed);
    assert_eq!(replayed.woken, Vec::<String>::new());
    let unstarted = World::new_task(&t.w2, None, false);
    let quiet = w
        .store
        .create_agent_task(&alice, &t.boss(), &unstarted, "k-quiet")
        .unwrap();
    assert_eq!(quiet.woken, Vec::<String>::new());
    let started = w.store.start_task_attempt(&alice, &t.boss(), &quiet.value.id).unwrap();
    assert_eq!(started.woken, vec![t.w2.id.clone()]);
}

#[test]
fn an_ending_wakes_its_waiter_and_its_controller_once_each_and_its_retry_nobody() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let g = w.goal(&alice, &Acting::Human, Some(&t.w2));
    let for_goal = w.task(&alice, &Acting::Human, &t.w1, Some(&g), true);
    let by_boss = w.task(&alice, &t.boss(), &t.w1, None, true);
    let k = w.key();
    let new = NewWait {
        sources: vec![by_boss.id.clone()],
        mode: WaitMode::All,
        goal: None,
    };
    let registered = w.store.register_agent_wait(&alice, &t.boss_ep, &new, &k).unwrap();
    assert_eq!(
        registered.woken,
        Vec::<String>::new(),
        "a wait not yet holding wakes nobody"
    );
    // The goal's task ends: its controller gets the attention event's wake.
    let done = w
        .complete(&alice, &t.w1_ep, &for_goal, TaskOutcome::Succeeded, "r")
        .unwrap();
    assert_eq!(done.woken, vec![t.w2.id.clone()]);
    // The boss's task ends: the boss, both its creator (attention) and its waiter, once.
    let done = w
        .complete(&alice, &t.w1_ep, &by_boss, TaskOutcome::Failed, "r")
        .unwrap();
    assert_eq!(done.woken, vec![t.boss.id.clone()]);
    let again = w
        .complete(&alice, &t.w1_ep, &by_boss, TaskOutcome::Failed, "r")
        .unwrap();
    assert_eq!(again.woken, Vec::<String>::new());
    // A wait registered on what already holds fires at registration: it wakes its own agent.
    let k = w.key();
    let late = w.store.register_agent_wait(&alice, &t.boss_ep, &new, &k).unwrap();
    assert_eq!(
        (late.value.state, late.woken),
        (WaitState::Triggered, vec![t.boss.id.clone()])
    );
}

#[test]
fn a_refused_write_reports_nothing_and_leaves_no_collection_behind() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let mut new = World::new_task(&t.w1, None, true);
    new.assignee = "agt_missing".into();
    w.store.create_agent_task(&alice, &t.boss(), &new, "k-bad").unwrap_err();
    let goal = w.store.create_goal(
        &alice,
        &Acting::Human,
        &NewGoal {
            title: "g".into(),
            completion_intent: "done".into(),
            plan: vec![],
            controller: None,
        },
        "k-goal",
    );
    assert_eq!(
        goal.unwrap().woken,
        Vec::<String>::new(),
        "creating a goal wakes nobody"
    );
}
