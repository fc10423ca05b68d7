//! The worker's task scenario, shared by its Rust twin (`sandbox::delegation`'s `worker`,
//! `examples/worker`) and its Python twin (`python.rs`, `examples/python-worker`): the same
//! tasks, messages and assertions for either component, and the operator's helpers they use.
#![allow(dead_code)]

use ahp_host::host::Host;
use ahp_host::shared_store::StoreLock;
use ahp_host::store::conversation::{self, Caller, IdempotencyKey, NewMessage, TranscriptMessage};
use ahp_host::store::delegation::{self, AgentTask, NewTask, TaskAttemptState, TaskState};

/// Creates a task for `assignee` as the operator (a human), started: the assignee gets a
/// wake. Returns its id.
pub(crate) fn task_for(host: &Host, caller: &Caller, assignee: &str, text: &str, key: &str) -> String {
    let new = NewTask {
        assignee: assignee.to_owned(),
        title: format!("task {key}"),
        instructions: text.to_owned(),
        goal: None,
        start: true,
    };
    let mut store = host.store().locked();
    store
        .create_agent_task(caller, &delegation::Acting::Human, &new, key)
        .unwrap()
        .value
        .id
}

/// The task `id` as the operator sees it.
pub(crate) fn task(host: &Host, caller: &Caller, id: &str) -> AgentTask {
    host.store()
        .locked()
        .get_agent_task(caller, &delegation::Acting::Human, id)
        .unwrap()
}

/// Posts `body` to `cv` as the operator, a human; returns the message's id.
pub(crate) fn post(host: &Host, caller: &Caller, cv: &str, body: &str, key: &str) -> String {
    let new = NewMessage {
        conversation: cv.to_owned(),
        acting: conversation::Acting::Human,
        body: body.to_owned(),
        reply_to: None,
        idempotency: IdempotencyKey::Key(key.to_owned()),
    };
    host.store().locked().post_message(caller, &new).unwrap().value.id
}

/// The first 200 messages of `cv`, as the operator reads them.
pub(crate) fn transcript(host: &Host, caller: &Caller, cv: &str) -> Vec<TranscriptMessage> {
    host.store()
        .locked()
        .read_transcript(caller, &conversation::Acting::Human, cv, 0, 200)
        .unwrap()
}

/// What both twins do with the job `reverse`, as `agent` whose conversation with the operator
/// is `cv`: a task attempt's wake is done and its result handed in; two attempts coalesced into
/// one wake are both done in its one turn (the paged task list); a task cancelled before its
/// turn hands nothing in and the turn succeeds; a human's message gets the job's result as a
/// reply.
pub(crate) fn reverses_its_tasks(host: &Host, caller: &Caller, agent: &str, cv: &str) {
    let agents = host.agents();
    let first = task_for(host, caller, agent, "one two  three", "t-1");
    assert_eq!(task(host, caller, &first).state, TaskState::Running);
    let drive = agents.drive(agent).unwrap();
    assert_eq!((drive.consumed, drive.unknown), (1, 0), "{drive:?}");
    let done = task(host, caller, &first);
    assert_eq!(done.state, TaskState::Succeeded);
    assert_eq!(done.result.as_deref(), Some("reverse: three two one"));
    assert_eq!(done.current_attempt.map(|a| a.state), Some(TaskAttemptState::Succeeded));

    let second = task_for(host, caller, agent, "a b", "t-2");
    let third = task_for(host, caller, agent, "c d", "t-3");
    let drive = agents.drive(agent).unwrap();
    assert_eq!(drive.consumed, 1, "one wake: {drive:?}");
    assert_eq!(task(host, caller, &second).result.as_deref(), Some("reverse: b a"));
    assert_eq!(task(host, caller, &third).result.as_deref(), Some("reverse: d c"));

    let cancelled = task_for(host, caller, agent, "too late", "t-4");
    host.store()
        .locked()
        .cancel_agent_task(caller, &delegation::Acting::Human, &cancelled)
        .unwrap();
    let drive = agents.drive(agent).unwrap();
    assert_eq!((drive.consumed, drive.unknown), (1, 0), "{drive:?}");
    let after = task(host, caller, &cancelled);
    assert_eq!((after.state, after.result), (TaskState::Cancelled, None));

    let question = post(host, caller, cv, "left right", "m-1");
    agents.drive(agent).unwrap();
    let t = transcript(host, caller, cv);
    assert_eq!(t.len(), 2);
    assert_eq!(t[1].body, "reverse: right left");
    assert_eq!(t[1].reply_to.as_deref(), Some(question.as_str()));
}
