//! Existence hiding: another principal's task, attempt, wait, goal and attention event ids
//! answer exactly like nonexistent ones (Display and Debug, byte for byte), and change nothing.

use super::*;
use crate::id::new_id;

fn observed(err: &ConversationError, id: &str) -> (String, String) {
    (
        err.to_string().replace(id, "<id>"),
        format!("{err:?}").replace(id, "<id>"),
    )
}

fn assert_same<T: std::fmt::Debug>(
    foreign: ConversationResult<T>,
    foreign_id: &str,
    missing: ConversationResult<T>,
    missing_id: &str,
) {
    let f = foreign.expect_err("foreign id must fail");
    let m = missing.expect_err("nonexistent id must fail");
    assert_eq!(observed(&f, foreign_id), observed(&m, missing_id));
}

#[test]
fn foreign_and_nonexistent_ids_are_indistinguishable() {
    let mut w = world();
    let t = w.team();
    let (alice, bob) = (w.alice.clone(), w.bob.clone());
    // Alice's world: a goal, a running task of it, a wait over it, and an attention event.
    let g = w.goal(&alice, &t.boss(), Some(&t.boss));
    let task = w.task(&alice, &t.boss(), &t.w1, Some(&g), true);
    let done = w.task(&alice, &t.boss(), &t.w2, Some(&g), true);
    w.complete(&alice, &t.w2_ep, &done, TaskOutcome::Succeeded, "secret result")
        .unwrap();
    let wait = w.wait(&alice, &t.boss_ep, &[&task], WaitMode::All, None).unwrap();
    let event = w
        .store
        .list_attention_events(&alice, &Acting::Human, None, 1)
        .unwrap()
        .remove(0);
    let attempt = task.current_attempt.clone().unwrap();
    // Bob acts as himself and through his own agent.
    let b = w.agent(&bob);
    let b_ep = w.attach(&bob, &b);
    let before = w.bytes();
    for acting in [Acting::Human, Acting::Agent(b_ep.clone())] {
        let missing = new_id(TASK_ID_PREFIX);
        assert_same(
            w.store.get_agent_task(&bob, &acting, &task.id),
            &task.id,
            w.store.get_agent_task(&bob, &acting, &missing),
            &missing,
        );
        assert_same(
            w.store.cancel_agent_task(&bob, &acting, &task.id),
            &task.id,
            w.store.cancel_agent_task(&bob, &acting, &missing),
            &missing,
        );
        assert_same(
            w.store.start_task_attempt(&bob, &acting, &task.id),
            &task.id,
            w.store.start_task_attempt(&bob, &acting, &missing),
            &missing,
        );
        assert_same(
            w.store.task_attempts(&bob, &acting, &task.id),
            &task.id,
            w.store.task_attempts(&bob, &acting, &missing),
            &missing,
        );
        let missing = new_id(WAIT_ID_PREFIX);
        assert_same(
            w.store.read_agent_wait(&bob, &acting, &wait.id),
            &wait.id,
            w.store.read_agent_wait(&bob, &acting, &missing),
            &missing,
        );
        assert_same(
            w.store.cancel_agent_wait(&bob, &acting, &wait.id),
            &wait.id,
            w.store.cancel_agent_wait(&bob, &acting, &missing),
            &missing,
        );
        let missing = new_id(GOAL_ID_PREFIX);
        assert_same(
            w.store.get_goal(&bob, &acting, &g.id),
            &g.id,
            w.store.get_goal(&bob, &acting, &missing),
            &missing,
        );
        assert_same(
            w.store.complete_goal(&bob, &acting, &g.id),
            &g.id,
            w.store.complete_goal(&bob, &acting, &missing),
            &missing,
        );
        let cp = |goal: &str| GoalCheckpoint {
            goal: goal.to_owned(),
            expected_revision: 1,
            plan: vec![],
            note: String::new(),
        };
        assert_same(
            w.store.checkpoint_goal(&bob, &acting, &cp(&g.id), "cp-a"),
            &g.id,
            w.store.checkpoint_goal(&bob, &acting, &cp(&missing), "cp-b"),
            &missing,
        );
        let missing = new_id(ATTENTION_EVENT_ID_PREFIX);
        assert_same(
            w.store.get_attention_event(&bob, &acting, &event.id),
            &event.id,
            w.store.get_attention_event(&bob, &acting, &missing),
            &missing,
        );
        // A foreign goal for a new task, and a foreign task as a wait source.
        let missing = new_id(GOAL_ID_PREFIX);
        let with_goal = |goal: &str| NewTask {
            assignee: b.id.clone(),
            title: "x".into(),
            instructions: "x".into(),
            goal: Some(goal.to_owned()),
            start: false,
        };
        assert_same(
            w.store.create_agent_task(&bob, &acting, &with_goal(&g.id), "t-a"),
            &g.id,
            w.store.create_agent_task(&bob, &acting, &with_goal(&missing), "t-b"),
            &missing,
        );
        // Lists show nothing of alice's.
        assert!(
            w.store
                .list_agent_tasks(&bob, &acting, &TaskQuery::default(), 10)
                .unwrap()
                .is_empty()
        );
        assert!(w.store.list_goals(&bob, &acting, None, 10).unwrap().is_empty());
        assert!(
            w.store
                .list_agent_waits(&bob, &acting, None, None, 10)
                .unwrap()
                .is_empty()
        );
        assert!(
            w.store
                .list_attention_events(&bob, &acting, None, 10)
                .unwrap()
                .is_empty()
        );
    }
    let missing = new_id(TASK_ID_PREFIX);
    let source = |task: &str| NewWait {
        sources: vec![task.to_owned()],
        mode: WaitMode::Any,
        goal: None,
    };
    assert_same(
        w.store.register_agent_wait(&bob, &b_ep, &source(&task.id), "w-a"),
        &task.id,
        w.store.register_agent_wait(&bob, &b_ep, &source(&missing), "w-b"),
        &missing,
    );
    // An attempt of alice's worker, completed by bob's agent.
    let missing = new_id(TASK_ATTEMPT_ID_PREFIX);
    let finish = |attempt: &str| TaskCompletion {
        attempt: attempt.to_owned(),
        outcome: TaskOutcome::Succeeded,
        result: "x".into(),
    };
    assert_same(
        w.store.complete_task_attempt(&bob, &b_ep, &finish(&attempt.id)),
        &attempt.id,
        w.store.complete_task_attempt(&bob, &b_ep, &finish(&missing)),
        &missing,
    );
    // Nothing changed, except bob's own idempotency-free refusals (none write).
    assert_eq!(w.bytes(), before);
}
