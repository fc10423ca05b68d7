//! MCP tasks: created in the commit of their work, ended exactly once in the commit of the event
//! that ends it, owned by their creator, bounded in number and time.

use super::*;
use crate::conversation::delegation::{NewTask, TaskCompletion, TaskOutcome};
use crate::conversation::mcp_task::{MAX_MCP_TASKS_PER_OWNER, MCP_TASK_TTL_MS, McpTaskStatus};

fn ask(w: &mut World, cv: &Conversation, body: &str) -> (TranscriptMessage, mcp_task::McpTask) {
    let alice = w.alice.clone();
    let q = w.new_post(cv, Acting::Human, body);
    let (posted, task) = w.store.ask_agent(&alice, &q).unwrap();
    (posted.value, task)
}

#[test]
fn a_question_is_answered_once_by_the_agents_next_reply_in_its_commit() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    let cv = w.conversation(&alice, &[&a]);
    let q = w.new_post(&cv, Acting::Human, "what is 2+2?");
    let (posted, task) = w.store.ask_agent(&alice, &q).unwrap();
    let question = posted.value;
    assert_eq!((task.status, task.tool.as_str()), (McpTaskStatus::Working, "ask_agent"));
    assert!(task.id.starts_with("mtk_"));
    // The question is a post like any other: the agent has it queued.
    assert_eq!(w.store.read_inbox(&alice, &actor, 0, 10, true).unwrap().len(), 1);
    // Another human message answers nothing.
    w.post(&alice, &cv, Acting::Human, "still there?").unwrap();
    assert_eq!(
        w.store.mcp_task(alice.principal(), &task.id).unwrap().unwrap().status,
        McpTaskStatus::Working
    );
    // The agent's reply ends it, answered by that reply.
    let reply = w.post(&alice, &cv, Acting::Agent(actor.clone()), "4").unwrap();
    let ended = w.store.mcp_task(alice.principal(), &task.id).unwrap().unwrap();
    assert_eq!(
        (ended.status, ended.answer.as_deref()),
        (McpTaskStatus::Completed, Some(reply.id.as_str()))
    );
    // A later reply changes nothing: ended once.
    w.post(&alice, &cv, Acting::Agent(actor), "also 4").unwrap();
    assert_eq!(w.store.mcp_task(alice.principal(), &task.id).unwrap().unwrap(), ended);
    assert_eq!(w.count("SELECT ends FROM mcp_tasks"), 1);
    // Replaying the ask returns the same question and the same (ended) task, creating nothing.
    let (again, same) = w.store.ask_agent(&alice, &q).unwrap();
    assert!(again.replayed);
    assert_eq!((again.value.id, same), (question.id, ended));
    assert_eq!(w.count("SELECT count(*) FROM mcp_tasks"), 1);
    assert!(w.violations().is_empty(), "{:?}", w.violations());
}

#[test]
fn a_reply_to_another_message_answers_no_other_question() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    let cv = w.conversation(&alice, &[&a]);
    let (first, t1) = ask(&mut w, &cv, "first?");
    let (_, t2) = ask(&mut w, &cv, "second?");
    // A reply to the first question answers it alone.
    let mut reply = w.new_post(&cv, Acting::Agent(actor.clone()), "to the first");
    reply.reply_to = Some(first.id.clone());
    let r1 = w.store.post_message(&alice, &reply).unwrap().value;
    let read = |w: &mut World, id: &str| w.store.mcp_task(alice.principal(), id).unwrap().unwrap();
    assert_eq!(read(&mut w, &t1.id).answer.as_deref(), Some(r1.id.as_str()));
    assert_eq!(read(&mut w, &t2.id).status, McpTaskStatus::Working);
    // A message replying to nothing answers every question asked before it.
    let r2 = w.post(&alice, &cv, Acting::Agent(actor), "to all").unwrap();
    assert_eq!(read(&mut w, &t2.id).answer.as_deref(), Some(r2.id.as_str()));
    assert_eq!(
        read(&mut w, &t1.id).answer.as_deref(),
        Some(r1.id.as_str()),
        "ended once"
    );
    assert!(w.violations().is_empty());
}

#[test]
fn a_task_is_its_creators_alone_and_lives_its_ttl() {
    let mut w = world();
    let (alice, bob) = (w.alice.clone(), w.bob.clone());
    let a = w.agent(&alice);
    let cv = w.conversation(&alice, &[&a]);
    let (_, task) = ask(&mut w, &cv, "q");
    assert_eq!(
        w.store.mcp_task(bob.principal(), &task.id).unwrap(),
        None,
        "another's reads as missing"
    );
    assert!(matches!(
        w.store.note_mcp_task(bob.principal(), &task.id, "x"),
        Err(Error::InvalidInput { .. })
    ));
    for bad in ["", "mtk_", "mtk_zz", "tsk_000000000000000000000000"] {
        assert_eq!(w.store.mcp_task(alice.principal(), bad).unwrap(), None, "{bad:?}");
    }
    let noted = w
        .store
        .note_mcp_task(alice.principal(), &task.id, "cannot be cancelled")
        .unwrap();
    assert_eq!(noted.status_message.as_deref(), Some("cannot be cancelled"));
    // Readable until its TTL, missing from then on, and deleted by the reaper.
    w.clock.advance(Duration::from_millis(MCP_TASK_TTL_MS - 1));
    assert!(w.store.mcp_task(alice.principal(), &task.id).unwrap().is_some());
    assert_eq!(w.store.reap_mcp_tasks().unwrap(), 0);
    w.clock.advance(Duration::from_millis(1));
    assert_eq!(w.store.mcp_task(alice.principal(), &task.id).unwrap(), None);
    assert_eq!(w.store.reap_mcp_tasks().unwrap(), 1);
    assert_eq!(w.count("SELECT count(*) FROM mcp_tasks"), 0);
}

#[test]
fn unexpired_tasks_per_owner_are_bounded_at_the_limit_and_one_past() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let cv = w.conversation(&alice, &[&a]);
    // Fill to one below the bound directly, then the last one by asking.
    let owner = alice.principal().as_str().to_owned();
    for i in 1..MAX_MCP_TASKS_PER_OWNER {
        w.store
            .autocommit()
            .execute(
                "INSERT INTO mcp_tasks (id, owner_principal, tool, awaits_kind, awaits_id, status, created_at, updated_at, expires_at, ends)
                 VALUES (?1, ?2, 'ask_agent', 'agent_task', ?1, 'completed', 0, 0, 9000000000000000, 1)",
                (format!("mtk_{i:024x}"), &owner),
            )
            .unwrap();
    }
    ask(&mut w, &cv, "the last one");
    let before = w.bytes();
    let q = w.new_post(&cv, Acting::Human, "one past");
    let e = w.store.ask_agent(&alice, &q).unwrap_err();
    assert!(matches!(e, Error::LimitReached { .. }), "{e}");
    assert_eq!(w.bytes(), before, "a refused ask posts nothing");
    // Another principal is not bounded by Alice's tasks.
    let bob = w.bob.clone();
    let b = w.agent(&bob);
    let bcv = w.conversation(&bob, &[&b]);
    let q = w.new_post(&bcv, Acting::Human, "bob's");
    w.store.ask_agent(&bob, &q).unwrap();
}

#[test]
fn an_agent_tasks_mcp_task_ends_with_it_and_only_then() {
    let mut w = world();
    let alice = w.alice.clone();
    let a = w.agent(&alice);
    let actor = w.attach(&alice, &a);
    let new = |start| NewTask {
        assignee: a.id.clone(),
        title: "job".into(),
        instructions: "do it".into(),
        goal: None,
        start,
    };
    let k = w.key();
    let m = w
        .store
        .create_agent_task_tracked(&alice, &Acting::Human, &new(true), &k, true)
        .unwrap();
    let (started, tracked) = (m.value.0, m.value.1.unwrap());
    assert_eq!(
        (tracked.status, tracked.tool.as_str()),
        (McpTaskStatus::Working, "create_agent_task")
    );
    // A replay returns the same MCP task.
    let again = w
        .store
        .create_agent_task_tracked(&alice, &Acting::Human, &new(true), &k, true)
        .unwrap();
    assert!(again.replayed);
    assert_eq!(again.value.1.as_ref(), Some(&tracked));
    // The assignee finishes: the MCP task completes in that commit.
    let done = TaskCompletion {
        attempt: started.current_attempt.unwrap().id,
        outcome: TaskOutcome::Failed,
        result: "could not".into(),
    };
    w.store.complete_task_attempt(&alice, &actor, &done).unwrap();
    let ended = w.store.mcp_task(alice.principal(), &tracked.id).unwrap().unwrap();
    assert_eq!(
        (ended.status, ended.answer),
        (McpTaskStatus::Completed, Some(started.id.clone()))
    );
    // An unstarted task cancelled: the MCP task reads cancelled.
    let k = w.key();
    let m = w
        .store
        .create_agent_task_tracked(&alice, &Acting::Human, &new(false), &k, true)
        .unwrap();
    let (open, tracked) = (m.value.0, m.value.1.unwrap());
    w.store.cancel_agent_task(&alice, &Acting::Human, &open.id).unwrap();
    let cancelled = w.store.mcp_task(alice.principal(), &tracked.id).unwrap().unwrap();
    assert_eq!(cancelled.status, McpTaskStatus::Cancelled);
    // Untracked creation makes no MCP task.
    w.task_untracked(&a);
    assert_eq!(w.count("SELECT count(*) FROM mcp_tasks"), 2);
    assert!(w.violations().is_empty());
}

impl World {
    fn task_untracked(&mut self, assignee: &Agent) {
        let alice = self.alice.clone();
        let k = self.key();
        let new = NewTask {
            assignee: assignee.id.clone(),
            title: "plain".into(),
            instructions: "x".into(),
            goal: None,
            start: false,
        };
        self.store.create_agent_task(&alice, &Acting::Human, &new, &k).unwrap();
    }
}
