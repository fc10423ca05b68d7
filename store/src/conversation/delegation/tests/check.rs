//! The independent SQL check: clean after ordinary work, and it finds forged duplicates.

use super::*;
use crate::conversation::delegation::check::violations;

#[test]
fn the_check_is_clean_after_ordinary_work_and_finds_forged_duplicates() {
    let mut w = world();
    let t = w.team();
    let alice = w.alice.clone();
    let g = w.goal(&alice, &t.boss(), Some(&t.boss));
    let a = w.task(&alice, &t.boss(), &t.w1, Some(&g), true);
    let b = w.task(&alice, &t.boss(), &t.w2, None, true);
    let wait = w.wait(&alice, &t.boss_ep, &[&b], WaitMode::All, None).unwrap();
    w.complete(&alice, &t.w1_ep, &a, TaskOutcome::Succeeded, "1").unwrap();
    w.complete(&alice, &t.w2_ep, &b, TaskOutcome::Succeeded, "2").unwrap();
    assert_eq!(violations(&w.store.autocommit()).unwrap(), vec![]);
    // The schema itself refuses a second firing of the wait.
    let conn = w.store.autocommit();
    let wake: String = conn
        .query_row("SELECT wake_id FROM agent_waits WHERE id = ?1", [&wait.id], |r| {
            r.get(0)
        })
        .unwrap();
    let again = "INSERT INTO wake_causes (wake_id, origin, subject_id, created_at) VALUES (?1, 'wait', ?2, 0)";
    assert!(conn.execute(again, [&wake, &wait.id]).is_err());
    // Without that index (a corrupted or hand-edited database), the check still finds it.
    conn.execute_batch("DROP INDEX wake_causes_once").unwrap();
    conn.execute(again, [&wake, &wait.id]).unwrap();
    let event: String = conn
        .query_row("SELECT id FROM attention_events", [], |r| r.get(0))
        .unwrap();
    conn.execute(
        "INSERT INTO wake_causes (wake_id, origin, subject_id, created_at) VALUES (?1, 'attention_event', ?2, 0)",
        [&wake, &event],
    )
    .unwrap();
    let found = violations(&w.store.autocommit()).unwrap();
    let rules: Vec<&str> = found.iter().map(|v| v.rule).collect();
    assert!(rules.contains(&"wait_fired_twice"), "{found:?}");
    assert!(rules.contains(&"triggered_wait_without_one_wake"), "{found:?}");
    assert!(rules.contains(&"attention_without_one_wake"), "{found:?}");
    assert!(found.iter().any(|v| v.subject == wait.id));
}

#[test]
fn the_check_reads_a_database_file_read_only() {
    if crate::testing::skip_on_postgres("the check's own read-only connection opens a SQLite file") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ahp.db");
    let alice = Caller::full("account:alice").unwrap();
    {
        let mut store = Store::open(&path).unwrap();
        let card = AgentCard {
            handle: "a".into(),
            display_name: "A".into(),
            description: String::new(),
            specialties: vec![],
        };
        let a = store.create_agent(&alice, &card, "a").unwrap().value;
        let ep = AgentActor::of(&store.attach_endpoint(&alice, &a.id, LEASE, "e").unwrap().value);
        let new = NewTask {
            assignee: a.id.clone(),
            title: "t".into(),
            instructions: "i".into(),
            goal: None,
            start: true,
        };
        let task = store
            .create_agent_task(&alice, &Acting::Human, &new, "t")
            .unwrap()
            .value;
        let wait = NewWait {
            sources: vec![task.id.clone()],
            mode: WaitMode::Any,
            goal: None,
        };
        store.register_agent_wait(&alice, &ep, &wait, "w").unwrap();
        let done = TaskCompletion {
            attempt: task.current_attempt.unwrap().id,
            outcome: TaskOutcome::Succeeded,
            result: "r".into(),
        };
        store.complete_task_attempt(&alice, &ep, &done).unwrap();
    }
    assert_eq!(check_delegation_invariants(&path).unwrap(), vec![]);
    // A file that is not there is an error, not "no violations".
    assert!(check_delegation_invariants(dir.path().join("missing.db")).is_err());
}
