//! The MCP App carrier against the real `ahp serve`, over `/mcp/conversations` (stateless era):
//! the cards and their resources as a chat host lists and reads them, a View's bind → acquire →
//! prepare → finish and the turn's exact consume, a second prepare refused, the View told to
//! bind again after a restart, and the Goal Plan card's one stalled attention.
//! (`.ci/apps` drives the same through a real MCP Apps host in headless Chromium.)

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_conversations::{Surface, key, message, post};
use crate::mcp_http::{Server, serve};

const VIEW: &str = "ahp_host_binding_0123456789abcdef0123456789abcdef";

fn surface(server: &Server, key: &str) -> Surface {
    Surface::Http {
        url: format!("{}/conversations", server.url),
        key: key.to_owned(),
    }
}

fn with(acting: &Value, extra: Value) -> Value {
    let mut v = acting.clone();
    v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    v
}

/// An agent, attached, in a conversation with its owner: (acting, conversation id).
async fn agent(s: &Surface) -> (Value, String) {
    let a = s
        .ok(
            "create_agent_identity",
            json!({"handle": "helper", "displayName": "Helper", "description": "", "specialties": [],
                   "idempotencyKey": "agent"}),
        )
        .await;
    let agent = a["agentId"].as_str().unwrap().to_owned();
    let ep = s
        .ok(
            "attach_agent_endpoint",
            json!({"agentId": agent, "leaseSeconds": 600, "idempotencyKey": "attach"}),
        )
        .await;
    let acting = json!({"agentId": agent, "endpointId": ep["endpointId"], "controllerGeneration": 1});
    let cv = s
        .ok(
            "create_conversation",
            json!({"title": "t", "agentIds": [agent], "idempotencyKey": "cv"}),
        )
        .await;
    (acting, cv["conversationId"].as_str().unwrap().to_owned())
}

async fn ready(s: &Surface) -> bool {
    let l = s.ok("list_agent_identities", json!({})).await;
    l["agents"][0]["productionAutoResumeAvailable"] == true
}

#[tokio::test]
async fn a_view_carries_a_wake_once_and_only_the_turns_consume_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let key = key(dir.path(), "alice", &["communication:read", "communication:manage"]);
    let server = serve(dir.path(), &[]);
    let s = surface(&server, &key);
    let url = format!("{}/conversations", server.url);

    // What a chat host lists and reads: the cards, the presenting tool, the app-only tools.
    let tools = message(
        &post(&url, &key, "tools/list", None, json!({}))
            .await
            .text()
            .await
            .unwrap(),
    );
    let tools = tools["result"]["tools"].as_array().unwrap().clone();
    let meta = |name: &str| tools.iter().find(|t| t["name"] == name).unwrap()["_meta"].clone();
    assert_eq!(
        meta("present_agent_continuation")["ui"]["resourceUri"],
        "ui://ahp/agent-continuation/v1"
    );
    for app_only in [
        "agent_continuation_bind",
        "agent_continuation_recover",
        "agent_continuation_state",
        "agent_continuation_acquire",
        "agent_continuation_prepare",
        "agent_continuation_finish",
        "agent_continuation_unbind",
        "agent_continuation_recover_endpoint",
        "goal_plan_observe",
    ] {
        assert_eq!(meta(app_only)["ui"]["visibility"], json!(["app"]), "{app_only}");
    }
    let read = message(
        &post(
            &url,
            &key,
            "resources/read",
            Some("ui://ahp/agent-continuation/v1"),
            json!({"uri": "ui://ahp/agent-continuation/v1"}),
        )
        .await
        .text()
        .await
        .unwrap(),
    );
    let card = &read["result"]["contents"][0];
    assert!(card.is_object(), "{read}");
    assert_eq!(card["mimeType"], "text/html;profile=mcp-app");
    let html = card["text"].as_str().unwrap();
    assert!(html.contains("default-src 'none'; script-src 'sha256-") && !html.contains(" src="));
    let missing = message(
        &post(
            &url,
            &key,
            "resources/read",
            Some("ui://ahp/nothing"),
            json!({"uri": "ui://ahp/nothing"}),
        )
        .await
        .text()
        .await
        .unwrap(),
    );
    assert!(missing["error"].is_object(), "{missing}");

    let (acting, cv) = agent(&s).await;
    // Every App tool's answer is checked against the outputSchema it lists.
    let c = crate::mcp_delegation::Checked::new(&url, &key).await;
    let presented = c
        .ok(
            "present_agent_continuation",
            json!({"agentId": acting["agentId"], "endpointId": acting["endpointId"], "expectedControllerGeneration": 1}),
        )
        .await;
    assert_eq!(presented["endpointId"], acting["endpointId"]);
    assert_eq!(
        s.refused(
            "present_agent_continuation",
            json!({"agentId": acting["agentId"], "endpointId": acting["endpointId"], "expectedControllerGeneration": 2}),
        )
        .await,
        "stale_endpoint"
    );
    assert!(!ready(&s).await, "presented is not bound");

    let view = with(&acting, json!({"bindingId": VIEW}));
    let bound = c.ok("agent_continuation_bind", view.clone()).await;
    assert_eq!(
        (bound["hostBinding"]["bound"].as_bool(), bound["outcome"].as_str()),
        (Some(true), Some("bound"))
    );
    assert!(ready(&s).await, "a bound View makes the agent resumable by itself");
    let idle = c.ok("agent_continuation_acquire", view.clone()).await;
    assert_eq!(idle["kind"], "idle");

    s.ok(
        "post_message",
        json!({"conversationId": cv, "body": "hello", "idempotencyKey": "m1"}),
    )
    .await;
    let state = c.ok("agent_continuation_state", view.clone()).await;
    assert_eq!(
        (state["wakePending"].as_bool(), state["recovery"].clone()),
        (Some(true), Value::Null)
    );
    let claimed = c.ok("agent_continuation_acquire", view.clone()).await;
    assert_eq!(claimed["kind"], "claimed");
    let attempt = claimed["attempt"]["attemptId"].as_str().unwrap().to_owned();
    let prepared = c
        .ok("agent_continuation_prepare", with(&view, json!({"attemptId": attempt})))
        .await;
    let m = &prepared["output"]["app_protocol"]["automatic_message"];
    let token = m["consumeToken"].as_str().unwrap();
    assert!(token.starts_with("wct_") && m["text"].as_str().unwrap().contains(token));
    assert!(m["text"].as_str().unwrap().len() <= 4096);
    assert_eq!(m["attemptId"], attempt.as_str());
    // Never a second fence crossing for the attempt.
    assert_eq!(
        s.refused("agent_continuation_prepare", with(&view, json!({"attemptId": attempt})))
            .await,
        "invalid_state"
    );
    // Another View cannot finish it.
    let other = with(&acting, json!({"bindingId": VIEW.replace("0123", "ffff")}));
    assert_eq!(
        s.refused(
            "agent_continuation_finish",
            with(&other, json!({"attemptId": attempt, "outcome": "dispatch_accepted"}))
        )
        .await,
        "not_found"
    );
    let finished = c
        .ok(
            "agent_continuation_finish",
            with(&view, json!({"attemptId": attempt, "outcome": "dispatch_accepted"})),
        )
        .await;
    assert_eq!(finished["attempt"]["state"], "accepted");
    // The turn the host ran proves itself: the exact consume.
    let consumed = s
        .ok(
            "consume_agent_wake",
            with(&acting, json!({"wakeId": m["wakeId"], "consumeToken": token})),
        )
        .await;
    assert_eq!(consumed["stateChanged"], true);
    assert_eq!(c.ok("agent_continuation_acquire", view.clone()).await["kind"], "idle");
    let unbound = c.ok("agent_continuation_unbind", view.clone()).await;
    assert_eq!(unbound["stateChanged"], true);
    assert!(!ready(&s).await);
}

#[tokio::test]
async fn a_waiting_acquire_ends_at_the_post_and_never_outlasts_its_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let alice_key = key(dir.path(), "alice", &["communication:read", "communication:manage"]);
    let bob_key = key(dir.path(), "bob", &["communication:read", "communication:manage"]);
    let server = serve(dir.path(), &[]);
    let s = surface(&server, &alice_key);
    let c = crate::mcp_delegation::Checked::new(&format!("{}/conversations", server.url), &alice_key).await;
    let (acting, cv) = agent(&s).await;
    let view = with(&acting, json!({"bindingId": VIEW}));
    c.ok("agent_continuation_bind", view.clone()).await;

    // One past the longest wait is refused, and claims nothing.
    assert_eq!(
        s.refused("agent_continuation_acquire", with(&view, json!({"waitSeconds": 26})))
            .await,
        "invalid"
    );
    // A View that holds no binding is refused at once: only a bound View waits.
    let t0 = std::time::Instant::now();
    let stranger = with(
        &acting,
        json!({"bindingId": VIEW.replace("0123", "ffff"), "waitSeconds": 25}),
    );
    assert_eq!(s.refused("agent_continuation_acquire", stranger).await, "app_not_bound");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // Nothing pending: the wait runs its length, then answers idle.
    let t0 = std::time::Instant::now();
    let idle = c
        .ok("agent_continuation_acquire", with(&view, json!({"waitSeconds": 1})))
        .await;
    assert_eq!(idle["kind"], "idle");
    assert!(t0.elapsed() >= Duration::from_millis(900), "{:?}", t0.elapsed());

    // The longest wait, ended by a post a moment later: the wake is claimed at the post's commit,
    // not at the card's next heartbeat (the look without a signal is every 2 s).
    let t0 = std::time::Instant::now();
    let (claimed, posted_at) = tokio::join!(
        c.ok("agent_continuation_acquire", with(&view, json!({"waitSeconds": 25}))),
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            s.ok(
                "post_message",
                json!({"conversationId": cv, "body": "hello", "idempotencyKey": "m1"}),
            )
            .await;
            t0.elapsed()
        }
    );
    let took = t0.elapsed();
    assert_eq!(claimed["kind"], "claimed", "{claimed}");
    assert!(
        took < posted_at + Duration::from_millis(1000),
        "claimed {took:?} after the start, the post committed at {posted_at:?}"
    );
    // With the attempt open, a wait answers at once with it.
    let t0 = std::time::Instant::now();
    let open = c
        .ok("agent_continuation_acquire", with(&view, json!({"waitSeconds": 25})))
        .await;
    assert_eq!(
        (open["kind"].as_str(), open["attempt"]["attemptId"].clone()),
        (Some("open"), claimed["attempt"]["attemptId"].clone())
    );
    assert!(t0.elapsed() < Duration::from_secs(2));

    // Another principal's agent on a 4 s lease, nothing pending: the wait is cut to half of what
    // is left, so the card's next state call renews the endpoint before it lapses.
    let bob = surface(&server, &bob_key);
    let agent = bob
        .ok(
            "create_agent_identity",
            json!({"handle": "short", "displayName": "Short", "description": "", "specialties": [],
                   "idempotencyKey": "short"}),
        )
        .await["agentId"]
        .clone();
    let ep = bob
        .ok(
            "attach_agent_endpoint",
            json!({"agentId": agent, "leaseSeconds": 4, "idempotencyKey": "attach-short"}),
        )
        .await;
    let short = json!({"agentId": agent, "endpointId": ep["endpointId"], "controllerGeneration": 1, "bindingId": VIEW});
    bob.ok("agent_continuation_bind", short.clone()).await;
    let t0 = std::time::Instant::now();
    let got = bob
        .ok("agent_continuation_acquire", with(&short, json!({"waitSeconds": 25})))
        .await;
    assert_eq!(got["kind"], "idle");
    let waited = t0.elapsed();
    // About 2 s (half of the 4 s the bind left): far below the 25 s asked, and below the lease.
    assert!(
        waited >= Duration::from_millis(1000) && waited < Duration::from_millis(3500),
        "{waited:?}"
    );
    let state = bob.ok("agent_continuation_state", short.clone()).await;
    assert_eq!(state["hostBinding"]["bound"], true, "{state}");
    assert_eq!(state["endpoint"]["state"], "attached", "{state}");
}

#[tokio::test]
async fn after_a_restart_the_view_is_told_to_bind_again_and_then_carries_on() {
    let dir = tempfile::tempdir().unwrap();
    let key = key(dir.path(), "alice", &["communication:read", "communication:manage"]);
    let server = serve(dir.path(), &[]);
    let s = surface(&server, &key);
    let (acting, cv) = agent(&s).await;
    let view = with(&acting, json!({"bindingId": VIEW}));
    s.ok("agent_continuation_bind", view.clone()).await;
    drop(server);

    let server = serve(dir.path(), &[]);
    let s = surface(&server, &key);
    let state = s.ok("agent_continuation_state", view.clone()).await;
    assert_eq!(state["hostBinding"]["bound"], false);
    assert_eq!(state["holder"], "this_view");
    assert_eq!(state["recovery"]["kind"], "host_binding_missing_in_process");
    assert!(!ready(&s).await, "nothing carries it in this process");
    assert_eq!(
        s.refused("agent_continuation_acquire", view.clone()).await,
        "app_not_bound"
    );
    // Only a View the store names recovers; then the binding is this process's again.
    let stranger = with(&acting, json!({"bindingId": VIEW.replace("0123", "ffff")}));
    assert_eq!(s.refused("agent_continuation_recover", stranger).await, "app_not_bound");
    let again = s.ok("agent_continuation_recover", view.clone()).await;
    assert_eq!(again["outcome"], "renewed");
    assert_eq!(
        s.refused("agent_continuation_recover", view.clone()).await,
        "app_not_bound"
    );
    assert!(ready(&s).await);
    s.ok(
        "post_message",
        json!({"conversationId": cv, "body": "hi", "idempotencyKey": "m1"}),
    )
    .await;
    assert_eq!(
        s.ok("agent_continuation_acquire", view.clone()).await["kind"],
        "claimed"
    );
}

#[tokio::test]
async fn a_quiet_goal_under_its_card_wakes_its_app_carried_controller_once() {
    let dir = tempfile::tempdir().unwrap();
    let key = key(dir.path(), "alice", &["communication:read", "communication:manage"]);
    let server = serve(dir.path(), &["--goal-quiet-period", "2s"]);
    let s = surface(&server, &key);
    let (acting, _cv) = agent(&s).await;
    s.ok("agent_continuation_bind", with(&acting, json!({"bindingId": VIEW})))
        .await;
    let goal = s
        .ok(
            "create_goal",
            json!({"title": "ship", "completionIntent": "shipped", "plan": [{"title": "build", "status": "pending"}],
                   "controllerAgentId": acting["agentId"], "idempotencyKey": "g"}),
        )
        .await;
    let goal = goal["goalId"].as_str().unwrap().to_owned();
    let presented = s.ok("present_goal_plan", json!({"goalId": goal})).await;
    assert_eq!(presented["resourceUri"], "ui://ahp/goal-plan/v1");
    // The card observes every half second for four seconds: one stall, however many refreshes.
    let mut stalled = Vec::new();
    for _ in 0..8 {
        let o = s.ok("goal_plan_observe", json!({"goalId": goal})).await;
        assert_eq!(o["goal"]["plan"][0]["title"], "build");
        stalled.push(o["stalled"]["attentionEventId"].clone());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let events: std::collections::BTreeSet<String> =
        stalled.iter().filter_map(|e| e.as_str().map(str::to_owned)).collect();
    assert_eq!(events.len(), 1, "{stalled:?}");
    assert!(stalled[0].is_null(), "not stalled at the first observation");
    // The controller's wake is the stall's.
    let boot = s.ok("bootstrap_agent_conversation", acting.clone()).await;
    assert_eq!(boot["wake"]["state"], "pending", "{boot}");
}

/// The delegation case: a sandboxed coordinator (`examples/coordinator`, a transferred agent)
/// hands a human's question to a worker an App card carries; the card delivers the task's wake
/// once, the chat's turn (here: the test) consumes it exactly and completes the attempt, and the
/// coordinator's wait fires: its answer carries the App agent's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_coordinators_task_is_carried_by_the_app_card_and_its_wait_fires() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["component", "add", ahp_guests::COORDINATOR, "--name", "coordinator"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let scopes = [
        "transfer:read",
        "transfer:write",
        "communication:read",
        "communication:manage",
    ];
    let key = key(dir.path(), "orchestrator", &scopes);
    let server = serve(dir.path(), &[]);
    let s = surface(&server, &key);
    let (acting, _) = agent(&s).await;
    let view = with(&acting, json!({"bindingId": VIEW}));
    s.ok("agent_continuation_bind", view.clone()).await;
    let coordinator = crate::delegation::transfer(
        dir.path(),
        &server.url,
        Some(&key),
        "coordinator",
        json!({"workers": [acting["agentId"]], "waitMode": "all"}),
    )
    .await;
    let cv = s
        .ok(
            "create_conversation",
            json!({"title": "shipping", "agentIds": [coordinator.agent], "idempotencyKey": "cv-coordinator"}),
        )
        .await["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    s.ok(
        "post_message",
        json!({"conversationId": cv, "body": "Which warehouse ships first?", "idempotencyKey": "q"}),
    )
    .await;

    // The card's heartbeat until the coordinator's task wakes the App agent.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let attempt = loop {
        let got = s.ok("agent_continuation_acquire", view.clone()).await;
        if got["kind"] == "claimed" {
            break got["attempt"]["attemptId"].as_str().unwrap().to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the coordinator's task never woke the App agent"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let prepared = s
        .ok("agent_continuation_prepare", with(&view, json!({"attemptId": attempt})))
        .await;
    let m = prepared["output"]["app_protocol"]["automatic_message"].clone();
    s.ok(
        "agent_continuation_finish",
        with(&view, json!({"attemptId": attempt, "outcome": "dispatch_accepted"})),
    )
    .await;
    // The chat's turn: bootstrap, the exact consume, the task, its completion.
    s.ok(
        "bootstrap_agent_conversation",
        with(&acting, json!({"wakeId": m["wakeId"]})),
    )
    .await;
    s.ok(
        "consume_agent_wake",
        with(
            &acting,
            json!({"wakeId": m["wakeId"], "consumeToken": m["consumeToken"]}),
        ),
    )
    .await;
    let tasks = s
        .ok(
            "list_agent_tasks",
            with(&acting, json!({"assigneeAgentId": acting["agentId"]})),
        )
        .await;
    let task = &tasks["tasks"][0];
    assert_eq!(task["creatorAgentId"], coordinator.agent.as_str(), "{tasks}");
    let task_attempt = task["currentAttempt"]["attemptId"].as_str().unwrap().to_owned();
    s.ok(
        "complete_agent_task_attempt",
        with(
            &acting,
            json!({"attemptId": task_attempt, "outcome": "succeeded", "result": "Rotterdam ships first"}),
        ),
    )
    .await;
    // The coordinator's wait fires: its one answer carries the App agent's result.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let t = s.ok("read_conversation", json!({"conversationId": cv})).await;
        let messages = t["messages"].as_array().unwrap();
        if messages.len() == 2 {
            let answer = messages[1]["body"].as_str().unwrap();
            assert!(answer.contains("Rotterdam ships first"), "{answer}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no answer: {t}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t = s.ok("read_conversation", json!({"conversationId": cv})).await;
    assert_eq!(t["messages"].as_array().unwrap().len(), 2, "answered once");
}
