//! The host's endpoint is the host's, against the real `ahp serve --http`: the owner of a
//! transferred agent sees its endpoint id and generation, and tries every agent-acting call
//! through it over MCP — each is refused with the stable kind `host_held` — while the agent keeps
//! answering the owner from its sandbox, and the console says so.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ahp_store::TokenScope;
use serde_json::{Value, json};

use crate::common::{call, post, result, token};
use crate::console::{base, get, sign_in};
use crate::mcp_http::{principal, serve};

/// A data directory with the turn prober registered and the operator's policy.
fn data_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    ahp_host::testing::policy().save(dir.path()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["component", "add", ahp_guests::TURN_PROBER, "--name", "turn-prober"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    dir
}

/// Snapshot → provision → push → activate over `/mcp`; returns (transfer, agentId).
async fn activate(dir: &Path, url: &str, key: &str) -> (String, String) {
    let snap = ahp_host::testing::snapshot(2, ahp_host::testing::inventory());
    let staged = call(url, Some(key), "snapshot_state", serde_json::to_value(&snap).unwrap()).await;
    let t = staged["transferId"].as_str().unwrap().to_owned();
    let provision = json!({"transferId": t, "token": token(dir, &t, TokenScope::ProvisionRuntime),
                           "tier": "small", "budgetMicroUsd": 5_000_000, "component": "turn-prober"});
    call(url, Some(key), "provision_runtime", provision).await;
    call(url, Some(key), "push_state", json!({"transferId": t})).await;
    let activate = json!({"transferId": t, "token": token(dir, &t, TokenScope::Activate)});
    let a = call(url, Some(key), "activate", activate).await;
    assert_eq!(a["status"], "active", "{a}");
    (t, a["agentId"].as_str().unwrap().to_owned())
}

async fn transcript(url: &str, key: &str, cv: &str) -> Vec<Value> {
    let r = call(
        url,
        Some(key),
        "read_conversation",
        json!({"conversationId": cv, "limit": 200}),
    )
    .await;
    r["messages"].as_array().unwrap().clone()
}

/// Waits until `cv` holds a message with `body`; returns the transcript.
async fn wait_for_body(url: &str, key: &str, cv: &str, body: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = transcript(url, key, cv).await;
        if t.iter().any(|m| m["body"] == body) {
            return t;
        }
        assert!(Instant::now() < deadline, "no {body:?} within 60 s: {t:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The agent's pending wake, read straight from the database (waiting for it to appear).
async fn pending_wake(dir: &Path, agent: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let db = rusqlite::Connection::open(dir.join("ahp.db")).unwrap();
        let found: Option<String> = db
            .query_row(
                "SELECT id FROM wakes WHERE agent_id = ?1 AND state = 'pending'",
                [agent],
                |r| r.get(0),
            )
            .ok();
        if let Some(w) = found {
            return w;
        }
        assert!(Instant::now() < deadline, "no pending wake");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_cannot_act_as_its_transferred_agent_and_the_agent_keeps_answering() {
    let dir = data_dir();
    let scopes = [
        "transfer:read",
        "transfer:write",
        "communication:read",
        "communication:manage",
    ];
    let owner = principal(dir.path(), "orchestrator", &scopes);
    let server = serve(dir.path(), &[]);
    let (url, key) = (server.url.clone(), owner.as_str());
    let conversations = format!("{url}/conversations");
    let (_, agent) = activate(dir.path(), &url, key).await;

    // The owner sees its agent's endpoint id and generation.
    let listing = call(&conversations, Some(key), "list_agent_identities", json!({})).await;
    let mine = &listing["agents"][0];
    assert_eq!(mine["agentId"], agent.as_str(), "{listing}");
    let endpoint = mine["endpointId"].as_str().unwrap().to_owned();
    let generation = mine["agent"]["controllerGeneration"].as_u64().unwrap();
    let acting = json!({"agentId": agent, "endpointId": endpoint, "controllerGeneration": generation});
    let with = |extra: Value| {
        let mut args = acting.clone();
        args.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        args
    };

    // The owner talks to the agent as the human; the agent answers from its sandbox.
    let opened = json!({"title": "questions", "agentIds": [agent], "idempotencyKey": "open"});
    let cv = call(&conversations, Some(key), "create_conversation", opened).await["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    post(&conversations, Some(key), &cv, "one", "q1").await;
    wait_for_body(&conversations, key, &cv, "echo: one").await;
    // A turn that sleeps keeps the next message's wake pending while the owner tries.
    post(&conversations, Some(key), &cv, "reply-then-sleep 8000", "q2").await;
    wait_for_body(&conversations, key, &cv, "replied").await;
    let question = post(&conversations, Some(key), &cv, "two", "q3").await;
    let wake = pending_wake(dir.path(), &agent).await;
    let before = transcript(&conversations, key, &cv).await;

    // Every caller-side call through the host's endpoint is refused, with one stable kind.
    let attempts = [
        (
            "post_message",
            json!({"conversationId": cv, "body": "forged", "idempotencyKey": "forged", "replyTo": question}),
        ),
        (
            "post_message",
            json!({"conversationId": cv, "body": "forged", "wakeId": wake, "operationIndex": 0}),
        ),
        ("list_agent_inbox", json!({"queuedOnly": false})),
        ("read_conversation", json!({"conversationId": cv})),
        ("consume_agent_delivery", json!({"messageId": question})),
        (
            "consume_agent_wake",
            json!({"wakeId": wake, "consumeToken": format!("wct_{}", "0".repeat(64))}),
        ),
        ("bootstrap_agent_conversation", json!({"conversationId": cv})),
        (
            "bootstrap_agent_conversation",
            json!({"wakeId": wake, "activationIdempotencyKey": "fence-it"}),
        ),
    ];
    for (tool, extra) in attempts {
        let r = result(&conversations, Some(key), tool, with(extra.clone())).await;
        assert_eq!(r["isError"], true, "{tool} {extra}: {r}");
        assert_eq!(r["structuredContent"]["kind"], "host_held", "{tool} {extra}: {r}");
    }
    let attach = json!({"agentId": agent, "idempotencyKey": "take-over"});
    let detach = json!({"agentId": agent, "endpointId": endpoint});
    for (tool, args) in [("attach_agent_endpoint", attach), ("detach_agent_endpoint", detach)] {
        let r = result(&conversations, Some(key), tool, args).await;
        assert_eq!(r["structuredContent"]["kind"], "host_held", "{tool}: {r}");
    }

    // Nothing moved: the transcript, the pending wake, the endpoint and its generation.
    assert_eq!(transcript(&conversations, key, &cv).await, before);
    assert_eq!(pending_wake(dir.path(), &agent).await, wake);
    let listing = call(&conversations, Some(key), "list_agent_identities", json!({})).await;
    assert_eq!(listing["agents"][0]["endpointId"], endpoint.as_str());
    assert_eq!(listing["agents"][0]["agent"]["controllerGeneration"], generation);

    // The agent keeps answering the owner, through the same endpoint and generation: its next
    // turn runs for the wake the refusals left pending. (The prober acts on its first queued
    // message, which the sleeping turn left queued, so it answers that one again.)
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        let t = transcript(&conversations, key, &cv).await;
        if let Some(m) = t[before.len()..].iter().find(|m| m["authorKind"] == "agent") {
            break m.clone();
        }
        assert!(Instant::now() < deadline, "no answer after the refusals: {t:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(answer["endpointId"], endpoint.as_str(), "{answer}");
    assert_eq!(answer["controllerGeneration"], generation, "{answer}");
    let t = transcript(&conversations, key, &cv).await;
    assert!(t.iter().all(|m| m["body"] != "forged"), "{t:?}");

    // The console tells where each answer came from: the sandbox, since no one else can post
    // through that endpoint.
    let base = base(&server);
    let cookie = sign_in(&base, key).await;
    let page = get(&format!("{base}/console/conversations/{cv}"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("replied from its sandbox"), "{page}");
    assert!(!page.contains("posted through a client"), "{page}");
}
