//! MCP tasks end to end against a real `ahp serve`: `activate`, `ask_agent` and
//! `create_agent_task` answer with a task when the client declares the extension (2026-07-28)
//! and as before when it does not; `tasks/get`, `tasks/cancel`, `tasks/update` with the errors
//! the extension specifies; another principal's task, and one of the other surface, read as
//! missing; and a task survives a `kill -9` of the host between the question and the reply.

use std::path::Path;
use std::time::Duration;

use ahp_store::TokenScope;
use serde_json::{Value, json};

use crate::common::{call, call_declaring_tasks, task_ended, task_request, token};
use crate::mcp_http::{Server, principal, serve};

/// A data directory with the turn-prober registered and the operator's policy.
fn data_dir() -> tempfile::TempDir {
    crate::agents::data_dir(ahp_guests::TURN_PROBER, "turn-prober")
}

/// A pushed turn-prober transfer at `url`; its id.
async fn pushed(dir: &Path, url: &str, key: Option<&str>) -> String {
    let snap = ahp_host::testing::snapshot(2, ahp_host::testing::inventory());
    let t = call(url, key, "snapshot_state", serde_json::to_value(&snap).unwrap()).await["transferId"]
        .as_str()
        .unwrap()
        .to_owned();
    let provision = json!({"transferId": t, "token": token(dir, &t, TokenScope::ProvisionRuntime),
                           "tier": "small", "budgetMicroUsd": 5_000_000, "component": "turn-prober"});
    call(url, key, "provision_runtime", provision).await;
    call(url, key, "push_state", json!({"transferId": t})).await;
    t
}

/// The task id of a `tools/call` answered with a task (panics otherwise).
fn task_of(answer: &Value) -> String {
    let r = &answer["result"];
    assert_eq!(r["resultType"], "task", "{answer}");
    assert_eq!(r["status"], "working", "{answer}");
    assert!(
        r["ttlMs"].as_u64().is_some_and(|t| t > 0) && r["pollIntervalMs"].as_u64().is_some(),
        "{r}"
    );
    assert!(r.get("result").is_none() && r.get("error").is_none(), "{r}");
    r["taskId"].as_str().unwrap().to_owned()
}

fn error_code(answer: &Value) -> i64 {
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {answer}"))
}

fn conversations(server: &Server) -> String {
    format!("{}/conversations", server.url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activate_ask_and_delegate_answer_with_durable_tasks() {
    let dir = data_dir();
    let all = [
        "transfer:read",
        "transfer:write",
        "communication:read",
        "communication:manage",
    ];
    let alice = principal(dir.path(), "alice", &all);
    let bob = principal(dir.path(), "bob", &all);
    let server = serve(dir.path(), &[]);
    let (url, conv) = (server.url.clone(), conversations(&server));
    let key = Some(alice.as_str());

    // activate, as a task: it ends with the transfer active.
    let t = pushed(dir.path(), &url, key).await;
    let args = json!({"transferId": t, "token": token(dir.path(), &t, TokenScope::Activate)});
    let activation = task_of(&call_declaring_tasks(&url, key, "activate", args).await);
    let ended = task_ended(&url, key, &activation, Duration::from_secs(30)).await;
    let result = &ended["result"];
    assert_eq!(
        (result["status"].as_str(), result["resultType"].as_str()),
        (Some("completed"), Some("complete"))
    );
    assert_eq!(result["result"]["structuredContent"]["status"], "active", "{ended}");
    let agent = result["result"]["structuredContent"]["agentId"]
        .as_str()
        .unwrap()
        .to_owned();

    // Another principal's task, an unknown one and the other surface's read as missing;
    // a client that did not declare the extension is told what it lacks.
    assert_eq!(
        error_code(&task_request(&url, Some(&bob), "tasks/get", &activation, true).await),
        -32602
    );
    assert_eq!(
        error_code(&task_request(&url, key, "tasks/get", "mtk_000000000000000000000000", true).await),
        -32602
    );
    assert_eq!(
        error_code(&task_request(&conv, key, "tasks/get", &activation, true).await),
        -32602
    );
    assert_eq!(
        error_code(&task_request(&url, key, "tasks/get", &activation, false).await),
        -32021
    );
    // An ended task's cancel and update are acknowledged and change nothing.
    let ack = task_request(&url, key, "tasks/cancel", &activation, true).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    assert_eq!(task_request(&url, key, "tasks/get", &activation, true).await, ended);

    // ask_agent as a task: the prober's reply completes it.
    let cv = call(
        &conv,
        key,
        "create_conversation",
        json!({"title": "tasks", "agentIds": [agent], "idempotencyKey": "open"}),
    )
    .await["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let ask = |body: &str, k: &str| json!({"conversationId": cv, "body": body, "idempotencyKey": k});
    let asked = task_of(&call_declaring_tasks(&conv, key, "ask_agent", ask("what now?", "q1")).await);
    let ended = task_ended(&conv, key, &asked, Duration::from_secs(30)).await;
    let answer = &ended["result"]["result"]["structuredContent"];
    assert_eq!(answer["question"]["body"], "what now?", "{ended}");
    assert_eq!(answer["reply"]["body"], "echo: what now?", "{ended}");
    assert_eq!(answer["taskId"], asked.as_str());
    // A question cannot be withdrawn: cancel says so on the task (here already ended: nothing).
    // Without the extension ask_agent waits for the reply itself.
    let sync = call(&conv, key, "ask_agent", ask("and then?", "q2")).await;
    assert_eq!(sync["reply"]["body"], "echo: and then?", "{sync}");
    // A retry with the same key asks nothing new.
    let again = call(&conv, key, "ask_agent", ask("and then?", "q2")).await;
    assert_eq!(
        (&again["question"]["messageId"], &again["taskId"]),
        (&sync["question"]["messageId"], &sync["taskId"])
    );

    // create_agent_task as a task: an unstarted agent task is cancelled, and its task reads so.
    let new = json!({"assigneeAgentId": agent, "title": "later", "instructions": "wait", "start": false,
                     "idempotencyKey": "task-1"});
    let delegated = task_of(&call_declaring_tasks(&conv, key, "create_agent_task", new).await);
    let working = task_request(&conv, key, "tasks/get", &delegated, true).await;
    assert_eq!(working["result"]["status"], "working", "{working}");
    let ack = task_request(&conv, key, "tasks/cancel", &delegated, true).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let cancelled = task_request(&conv, key, "tasks/get", &delegated, true).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    // Bob cannot cancel Alice's.
    assert_eq!(
        error_code(&task_request(&conv, Some(&bob), "tasks/cancel", &delegated, true).await),
        -32602
    );
    // Without the extension create_agent_task answers as before: the agent task itself.
    let plain = json!({"assigneeAgentId": agent, "title": "plain", "instructions": "x", "start": false,
                       "idempotencyKey": "task-2"});
    let sync = call(&conv, key, "create_agent_task", plain).await;
    assert!(sync["taskId"].as_str().unwrap().starts_with("tsk_"), "{sync}");
    assert_eq!(sync["task"]["state"], "open", "{sync}");
    drop(server);
}

/// The review's crash, with a task: the host is killed (`kill -9`) after the question was posted
/// and before the agent replied; after the restart the reply — whenever the agent's next turn
/// makes it — completes the task, once, and the store's invariant check finds nothing wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_agent_task_survives_a_kill_between_the_question_and_the_reply() {
    let dir = data_dir();
    let server = serve(dir.path(), &["--auth", "none"]);
    let url = server.url.clone();
    let t = pushed(dir.path(), &url, None).await;
    let args = json!({"transferId": t, "token": token(dir.path(), &t, TokenScope::Activate)});
    let agent = call(&url, None, "activate", args).await["agentId"]
        .as_str()
        .unwrap()
        .to_owned();
    let conv = conversations(&server);
    let cv = call(
        &conv,
        None,
        "create_conversation",
        json!({"title": "crash", "agentIds": [agent], "idempotencyKey": "open"}),
    )
    .await["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    // The prober sleeps 4 s before it replies: the host dies in that window.
    let ask = json!({"conversationId": cv, "body": "slowly 4000 hold", "idempotencyKey": "q"});
    let asked = task_of(&call_declaring_tasks(&conv, None, "ask_agent", ask).await);
    // A question cannot be withdrawn: the cancel is acknowledged and says so on the task.
    task_request(&conv, None, "tasks/cancel", &asked, true).await;
    let noted = task_request(&conv, None, "tasks/get", &asked, true).await;
    assert_eq!(noted["result"]["status"], "working", "{noted}");
    assert!(
        noted["result"]["statusMessage"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot be withdrawn"),
        "{noted}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut server = server;
    server.child.kill().unwrap();
    server.child.wait().unwrap();

    let server = serve(dir.path(), &["--auth", "none"]);
    let conv = conversations(&server);
    // Still working, read from the store by the new process.
    let got = task_request(&conv, None, "tasks/get", &asked, true).await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    // The next message gives the agent a turn; it answers what was left.
    crate::common::post(&conv, None, &cv, "nudge", "nudge").await;
    let ended = task_ended(&conv, None, &asked, Duration::from_secs(40)).await;
    let answer = &ended["result"]["result"]["structuredContent"];
    assert_eq!(answer["reply"]["body"], "echo: slowly 4000 hold", "{ended}");
    drop(server);
    let violations = ahp_store::delegation::check_delegation_invariants(dir.path().join("ahp.db")).unwrap();
    assert!(violations.is_empty(), "{violations:?}");
    let db = rusqlite::Connection::open(dir.path().join("ahp.db")).unwrap();
    let question: String = db
        .query_row("SELECT awaits_id FROM mcp_tasks WHERE id = ?1", [&asked], |r| r.get(0))
        .unwrap();
    let replies: i64 = db
        .query_row("SELECT count(*) FROM messages WHERE reply_to = ?1", [&question], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(replies, 1, "answered once");
}
