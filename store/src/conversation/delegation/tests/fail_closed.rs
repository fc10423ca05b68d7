//! Unknown persisted states and origins fail closed: they are refused as corrupt rows, never
//! read as some known state.

use super::*;

#[test]
fn unknown_task_wait_goal_and_wake_origin_values_fail_closed() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let g = w.goal(&alice, &t.boss(), Some(&t.boss));
    let task = w.task(&alice, &t.boss(), &t.w1, Some(&g), true);
    let wait = w.wait(&alice, &t.boss_ep, &[&task], WaitMode::All, None).unwrap();
    let conn = w.store.autocommit();
    conn.execute("UPDATE agent_tasks SET state = 'paused'", []).unwrap();
    conn.execute("UPDATE goals SET state = 'archived'", []).unwrap();
    conn.execute("UPDATE agent_waits SET mode = 'most'", []).unwrap();
    conn.execute("UPDATE wakes SET origin = 'timer', origin_id = 'x'", [])
        .unwrap();
    let corrupt = |r: ConversationResult<()>, table: &str| match r {
        Err(ConversationError::CorruptRow { table: t, .. }) => assert_eq!(t, table),
        other => panic!("expected a corrupt {table} row, got {other:?}"),
    };
    corrupt(
        w.store.get_agent_task(&alice, &t.boss(), &task.id).map(drop),
        "agent_tasks",
    );
    corrupt(w.store.get_goal(&alice, &t.boss(), &g.id).map(drop), "goals");
    corrupt(
        w.store.read_agent_wait(&alice, &t.boss(), &wait.id).map(drop),
        "agent_waits",
    );
    corrupt(w.store.list_wakes(&alice, &t.w1_ep, 10).map(drop), "wakes");
    // A completion over a task in an unknown state is refused and changes nothing.
    let before = w.bytes();
    assert!(
        w.complete(&alice, &t.w1_ep, &task, TaskOutcome::Succeeded, "r")
            .is_err()
    );
    assert_eq!(w.bytes(), before);
}
