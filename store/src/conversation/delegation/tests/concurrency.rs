//! Eight workers on separate connections finishing the eight sources of one `all` wait at
//! once: exactly one of the eight transactions sees the condition hold, and the wait fires once.
//! On either backend: nine `Store`s over one database.

use std::sync::{Arc, Barrier};
use std::thread;

use super::*;
use crate::testing::TestDb;

const WORKERS: usize = 8;

#[test]
fn concurrent_last_facts_fire_an_all_wait_exactly_once() {
    let db = Arc::new(TestDb::new());
    let alice = Caller::full("account:alice").unwrap();
    let card = |h: &str| AgentCard {
        handle: h.into(),
        display_name: h.into(),
        description: String::new(),
        specialties: vec![],
    };
    let (workers, tasks, wait) = {
        let mut store = db.open().unwrap();
        let attach = |store: &mut Store, i: usize| {
            let a = store.create_agent(&alice, &card("a"), &format!("a-{i}")).unwrap().value;
            AgentActor::of(
                &store
                    .attach_endpoint(&alice, &a.id, LEASE, &format!("e-{i}"))
                    .unwrap()
                    .value,
            )
        };
        let boss = attach(&mut store, 0);
        let workers: Vec<AgentActor> = (1..=WORKERS).map(|i| attach(&mut store, i)).collect();
        let tasks: Vec<AgentTask> = workers
            .iter()
            .enumerate()
            .map(|(i, wk)| {
                let new = NewTask {
                    assignee: wk.agent.clone(),
                    title: "t".into(),
                    instructions: "i".into(),
                    goal: None,
                    start: true,
                };
                store
                    .create_agent_task(&alice, &Acting::Agent(boss.clone()), &new, &format!("t-{i}"))
                    .unwrap()
                    .value
            })
            .collect();
        let new = NewWait {
            sources: tasks.iter().map(|t| t.id.clone()).collect(),
            mode: WaitMode::All,
            goal: None,
        };
        let wait = store.register_agent_wait(&alice, &boss, &new, "w").unwrap().value;
        (workers, tasks, wait)
    };
    let barrier = Arc::new(Barrier::new(WORKERS));
    let handles: Vec<_> = workers
        .into_iter()
        .zip(tasks)
        .map(|(actor, task)| {
            let (db, alice, barrier) = (db.clone(), alice.clone(), barrier.clone());
            thread::spawn(move || {
                let mut store = db.open().unwrap();
                let done = TaskCompletion {
                    attempt: task.current_attempt.unwrap().id,
                    outcome: TaskOutcome::Succeeded,
                    result: "r".into(),
                };
                barrier.wait();
                // A writer that waited past busy_timeout retries: the retry is the first commit
                // or an exact replay, never a second terminal fact.
                loop {
                    match store.complete_task_attempt(&alice, &actor, &done) {
                        Ok(m) => break m.value.state,
                        Err(e) if e.is_transient() => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), TaskState::Succeeded);
    }
    let mut store = db.open().unwrap();
    let conn = store.autocommit();
    assert_eq!(
        crate::conversation::delegation::check::violations(&conn).unwrap(),
        vec![]
    );
    let fired: i64 = conn
        .query_row(
            "SELECT count(*) FROM wake_causes WHERE origin = 'wait' AND subject_id = ?1",
            [&wait.id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(fired, 1);
    let state: String = conn
        .query_row("SELECT state FROM agent_waits WHERE id = ?1", [&wait.id], |r| r.get(0))
        .unwrap();
    assert_eq!(state, "triggered");
}
