//! Call tasks: the host's own run of a tool reports through its task — asks for input, collects
//! the client's answers key by key, ends once (a cancel and a late result cannot both win) —
//! every JSON bounded before it is written, every task its owner's alone.

use serde_json::json;

use super::*;
use crate::conversation::mcp_call::{
    MAX_MCP_CALL_INPUT_KEY_BYTES, MAX_MCP_CALL_INPUT_REQUESTS, MAX_MCP_CALL_JSON_BYTES,
};
use crate::conversation::mcp_task::{Awaited, JsonObject, McpTaskStatus};

fn object(v: serde_json::Value) -> JsonObject {
    v.as_object().cloned().unwrap()
}

fn elicit(message: &str) -> serde_json::Value {
    json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": {"type": "object"}}})
}

#[test]
fn a_run_asks_collects_the_answers_key_by_key_then_ends_once() {
    let mut w = world();
    let alice = w.alice.clone();
    let task = w.store.create_mcp_call(alice.principal(), "multi_input").unwrap();
    assert_eq!((task.status, &task.awaited), (McpTaskStatus::Working, &Awaited::Call));
    let asked = w
        .store
        .ask_mcp_call_input(
            alice.principal(),
            &task.id,
            &object(json!({"a": elicit("a?"), "b": elicit("b?")})),
        )
        .unwrap();
    assert_eq!(asked.status, McpTaskStatus::InputRequired);
    assert_eq!(asked.input_requests.as_ref().map(JsonObject::len), Some(2));

    // An answer to a key never asked is ignored; one to `a` leaves `b` pending.
    let p = alice.principal();
    let ignored = w
        .store
        .answer_mcp_call_input(p, &task.id, &object(json!({"zzz": {"action": "accept"}})))
        .unwrap();
    assert_eq!(ignored, asked);
    let half = w
        .store
        .answer_mcp_call_input(
            p,
            &task.id,
            &object(json!({"a": {"action": "accept", "content": {"x": 1}}})),
        )
        .unwrap();
    assert_eq!(half.status, McpTaskStatus::InputRequired);
    assert_eq!(half.input_requests.unwrap().keys().collect::<Vec<_>>(), ["b"]);
    // `a` again (already answered) is ignored: the first answer stays.
    w.store
        .answer_mcp_call_input(p, &task.id, &object(json!({"a": {"action": "decline"}})))
        .unwrap();
    let done = w
        .store
        .answer_mcp_call_input(p, &task.id, &object(json!({"b": {"action": "accept"}})))
        .unwrap();
    assert_eq!((done.status, done.input_requests), (McpTaskStatus::Working, None));
    assert_eq!(
        done.input_responses.unwrap(),
        object(json!({"a": {"action": "accept", "content": {"x": 1}}, "b": {"action": "accept"}}))
    );

    let result = object(json!({"content": [{"type": "text", "text": "done"}], "isError": false}));
    assert!(
        w.store
            .end_mcp_call(p, &task.id, McpTaskStatus::Completed, &result)
            .unwrap()
    );
    // A cancel after the end, or a second end, changes nothing.
    assert!(!w.store.cancel_mcp_call(p, &task.id).unwrap());
    assert!(
        !w.store
            .end_mcp_call(p, &task.id, McpTaskStatus::Failed, &object(json!({})))
            .unwrap()
    );
    let ended = w.store.mcp_task(p, &task.id).unwrap().unwrap();
    assert_eq!((ended.status, ended.outcome), (McpTaskStatus::Completed, Some(result)));
    // Answers to an ended task are ignored too.
    let after = w
        .store
        .answer_mcp_call_input(p, &task.id, &object(json!({"b": 1})))
        .unwrap();
    assert_eq!(after.status, McpTaskStatus::Completed);
    assert_eq!(w.count("SELECT ends FROM mcp_tasks"), 1);
    assert!(w.violations().is_empty(), "{:?}", w.violations());
}

#[test]
fn a_cancel_wins_over_a_late_result_and_a_parked_run_can_be_cancelled() {
    let mut w = world();
    let p = w.alice.principal().clone();
    let slow = w.store.create_mcp_call(&p, "slow_compute").unwrap();
    assert!(w.store.cancel_mcp_call(&p, &slow.id).unwrap());
    let late = object(json!({"content": [{"type": "text", "text": "late"}]}));
    assert!(
        !w.store
            .end_mcp_call(&p, &slow.id, McpTaskStatus::Completed, &late)
            .unwrap()
    );
    let read = w.store.mcp_task(&p, &slow.id).unwrap().unwrap();
    assert_eq!((read.status, read.outcome), (McpTaskStatus::Cancelled, None));

    let parked = w.store.create_mcp_call(&p, "confirm_delete").unwrap();
    w.store
        .ask_mcp_call_input(&p, &parked.id, &object(json!({"c": elicit("sure?")})))
        .unwrap();
    assert!(w.store.cancel_mcp_call(&p, &parked.id).unwrap());
    let read = w.store.mcp_task(&p, &parked.id).unwrap().unwrap();
    assert_eq!((read.status, read.input_requests), (McpTaskStatus::Cancelled, None));
    // A run that asks again after the cancel is refused.
    let again = w
        .store
        .ask_mcp_call_input(&p, &parked.id, &object(json!({"c": elicit("sure?")})));
    assert!(
        matches!(again, Err(ConversationError::InvalidInput { field: "taskId", .. })),
        "{again:?}"
    );
    assert!(w.violations().is_empty(), "{:?}", w.violations());
}

#[test]
fn another_principal_and_other_kinds_of_task_read_as_missing() {
    let mut w = world();
    let (alice, bob) = (w.alice.principal().clone(), w.bob.principal().clone());
    let task = w.store.create_mcp_call(&alice, "slow_compute").unwrap();
    let missing =
        |r: Result<bool, ConversationError>| matches!(r, Err(ConversationError::InvalidInput { field: "taskId", .. }));
    assert!(missing(w.store.cancel_mcp_call(&bob, &task.id)));
    assert!(missing(w.store.end_mcp_call(
        &bob,
        &task.id,
        McpTaskStatus::Completed,
        &JsonObject::new()
    )));
    assert!(missing(w.store.cancel_mcp_call(&alice, "mtk_not-a-task")));
    assert!(
        w.store
            .answer_mcp_call_input(&bob, &task.id, &JsonObject::new())
            .is_err()
    );
    assert_eq!(w.store.mcp_task(&bob, &task.id).unwrap(), None);
    // Still working for its owner: nothing above changed it.
    assert_eq!(
        w.store.mcp_task(&alice, &task.id).unwrap().unwrap().status,
        McpTaskStatus::Working
    );
}

#[test]
fn requests_answers_and_outcomes_are_bounded_before_anything_is_written() {
    let mut w = world();
    let p = w.alice.principal().clone();
    let task = w.store.create_mcp_call(&p, "multi_input").unwrap();
    let invalid =
        |r: Result<mcp_task::McpTask, ConversationError>| matches!(r, Err(ConversationError::InvalidInput { .. }));
    let many = |n: usize| {
        object(json!(
            (0..n).map(|i| (format!("k{i}"), elicit("?"))).collect::<JsonObject>()
        ))
    };
    // The number of requests: none and one past the bound are refused, the bound is taken.
    assert!(invalid(w.store.ask_mcp_call_input(&p, &task.id, &JsonObject::new())));
    assert!(invalid(w.store.ask_mcp_call_input(
        &p,
        &task.id,
        &many(MAX_MCP_CALL_INPUT_REQUESTS + 1)
    )));
    // A key's length, at the bound and one past.
    let key = |n: usize| object(json!({ "k".repeat(n): elicit("?") }));
    assert!(invalid(w.store.ask_mcp_call_input(
        &p,
        &task.id,
        &key(MAX_MCP_CALL_INPUT_KEY_BYTES + 1)
    )));
    assert!(invalid(w.store.ask_mcp_call_input(&p, &task.id, &key(0))));
    // The requests' size: one byte past the bound is refused.
    let sized = |total: usize| {
        let skeleton = serde_json::to_string(&json!({"k": ""})).unwrap().len();
        object(json!({"k": "x".repeat(total - skeleton)}))
    };
    assert_eq!(
        serde_json::to_string(&sized(MAX_MCP_CALL_JSON_BYTES)).unwrap().len(),
        MAX_MCP_CALL_JSON_BYTES
    );
    assert!(invalid(w.store.ask_mcp_call_input(
        &p,
        &task.id,
        &sized(MAX_MCP_CALL_JSON_BYTES + 1)
    )));
    assert_eq!(
        w.store.mcp_task(&p, &task.id).unwrap().unwrap().status,
        McpTaskStatus::Working
    );
    w.store
        .ask_mcp_call_input(&p, &task.id, &sized(MAX_MCP_CALL_JSON_BYTES))
        .unwrap();
    // The bound on the number of requests is taken too.
    let fresh = w.store.create_mcp_call(&p, "multi_input").unwrap();
    let asked = w
        .store
        .ask_mcp_call_input(&p, &fresh.id, &many(MAX_MCP_CALL_INPUT_REQUESTS))
        .unwrap();
    assert_eq!(asked.input_requests.unwrap().len(), MAX_MCP_CALL_INPUT_REQUESTS);

    // An answer that would make the collected answers too large is refused and keeps nothing.
    let huge = object(json!({"k0": "x".repeat(MAX_MCP_CALL_JSON_BYTES)}));
    assert!(invalid(w.store.answer_mcp_call_input(&p, &fresh.id, &huge)));
    let read = w.store.mcp_task(&p, &fresh.id).unwrap().unwrap();
    assert_eq!(
        (read.input_requests.unwrap().len(), read.input_responses),
        (MAX_MCP_CALL_INPUT_REQUESTS, None)
    );
    // An outcome past the bound is refused; the task still works.
    let big = object(json!({"text": "x".repeat(MAX_MCP_CALL_JSON_BYTES)}));
    let end = w.store.end_mcp_call(&p, &fresh.id, McpTaskStatus::Completed, &big);
    assert!(
        matches!(end, Err(ConversationError::InvalidInput { field: "outcome", .. })),
        "{end:?}"
    );
    let status = w
        .store
        .end_mcp_call(&p, &fresh.id, McpTaskStatus::Working, &JsonObject::new());
    assert!(matches!(
        status,
        Err(ConversationError::InvalidInput { field: "status", .. })
    ));
    assert_eq!(
        w.store.mcp_task(&p, &fresh.id).unwrap().unwrap().status,
        McpTaskStatus::InputRequired
    );
}
