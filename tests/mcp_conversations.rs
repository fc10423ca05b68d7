//! The conversation tools against the real `ahp serve`: the whole conversation flow over HTTP
//! (`/mcp/conversations`, raw JSON-RPC in the stateless era) and over stdio (rmcp's client, `--surface
//! conversations`), existence hiding byte for byte between two keys, each scope's 403, bounds at
//! the limit and one past it, and the operator's CLI reading what the tools wrote.

use std::path::Path;
use std::process::Command;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};

use crate::mcp_http::Server;

pub(crate) fn ahp(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `ahp serve --http 127.0.0.1:0` on `dir` (its `url` ends in `/mcp`).
pub(crate) fn serve(dir: &Path) -> Server {
    crate::mcp_http::serve(dir, &[])
}

pub(crate) fn key(dir: &Path, name: &str, scopes: &[&str]) -> String {
    let mut args = vec!["principal", "add", name];
    for s in scopes {
        args.extend(["--scope", s]);
    }
    ahp(dir, &args).trim().to_owned()
}

const STATELESS: &str = "2026-07-28";

/// One stateless (2026-07-28) request to `url`.
pub(crate) async fn post(
    url: &str,
    key: &str,
    method: &str,
    name: Option<&str>,
    mut params: Value,
) -> reqwest::Response {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let mut req = reqwest::Client::new()
        .post(url)
        .bearer_auth(key)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", STATELESS)
        .header("Mcp-Method", method)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if let Some(name) = name {
        req = req.header("Mcp-Name", name);
    }
    req.send().await.unwrap()
}

/// The JSON-RPC message of a response, whether sent as JSON or as one SSE event.
pub(crate) fn message(text: &str) -> Value {
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .unwrap_or(text);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Where the tools are called: HTTP with a key, or an rmcp client over stdio.
pub(crate) enum Surface {
    Http { url: String, key: String },
    Stdio(RunningService<RoleClient, ()>),
}

/// A tool call's outcome: `Ok(structuredContent)` or `Err(structuredContent of the tool error)`.
pub(crate) type Outcome = Result<Value, Value>;

impl Surface {
    async fn stdio(dir: &Path) -> Self {
        let cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ahp")).configure(|c| {
            c.arg("--data-dir")
                .arg(dir)
                .args(["serve", "--stdio", "--surface", "conversations"]);
        });
        Self::Stdio(().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap())
    }

    pub(crate) async fn call(&self, tool: &str, args: Value) -> Outcome {
        let (is_error, structured) = match self {
            Self::Http { url, key } => {
                let r = post(
                    url,
                    key,
                    "tools/call",
                    Some(tool),
                    json!({"name": tool, "arguments": args}),
                )
                .await;
                assert_eq!(r.status(), 200, "{tool}");
                let m = message(&r.text().await.unwrap());
                let result = &m["result"];
                assert!(result.is_object(), "{tool}: {m}");
                (result["isError"] == true, result["structuredContent"].clone())
            }
            Self::Stdio(client) => {
                let params =
                    CallToolRequestParams::new(tool.to_owned()).with_arguments(args.as_object().unwrap().clone());
                let r = client.call_tool(params).await.unwrap();
                (r.is_error == Some(true), r.structured_content.unwrap_or(Value::Null))
            }
        };
        assert!(structured.is_object(), "{tool} returned no structured content");
        if is_error { Err(structured) } else { Ok(structured) }
    }

    pub(crate) async fn ok(&self, tool: &str, args: Value) -> Value {
        self.call(tool, args)
            .await
            .unwrap_or_else(|e| panic!("{tool} failed: {e}"))
    }

    /// The `kind` of a refused call.
    pub(crate) async fn refused(&self, tool: &str, args: Value) -> String {
        let e = self.call(tool, args).await.expect_err(tool);
        assert!(e["message"].is_string(), "{e}");
        e["kind"].as_str().unwrap().to_owned()
    }
}

/// The ids the conversation flow produced.
struct Flow {
    agent: String,
    conversation: String,
}

/// The whole conversation flow: create agent → attach → create conversation → human posts → agent reads
/// inbox and transcript → agent replies through its endpoint → consume delivery → bootstrap with
/// explicit activation → consume wake, with replays, conflicts and the desired-state retries.
async fn seed_flow(s: &Surface) -> Flow {
    let card = json!({"handle": "forecaster", "displayName": "Forecaster", "description": "Plans stock.",
                      "specialties": ["inventory"], "idempotencyKey": "agent-1"});
    let created = s.ok("create_agent_identity", card.clone()).await;
    assert_eq!(
        (created["replayed"].as_bool(), created["stateChanged"].as_bool()),
        (Some(false), Some(true))
    );
    let agent = created["agentId"].as_str().unwrap().to_owned();
    assert!(agent.starts_with("agt_"));
    let again = s.ok("create_agent_identity", card.clone()).await;
    assert_eq!(
        (again["replayed"].as_bool(), again["stateChanged"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(again["agentId"], agent.as_str());
    let mut changed = card.clone();
    changed["handle"] = json!("other");
    assert_eq!(s.refused("create_agent_identity", changed).await, "conflict");

    let ep = s
        .ok(
            "attach_agent_endpoint",
            json!({"agentId": agent, "leaseSeconds": 600, "idempotencyKey": "attach-1"}),
        )
        .await;
    let endpoint = ep["endpointId"].as_str().unwrap().to_owned();
    assert_eq!(ep["controllerGeneration"], 1);
    let acting = json!({"agentId": agent, "endpointId": endpoint, "controllerGeneration": 1});
    let with = |extra: Value| {
        let mut v = acting.clone();
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    };

    let cv = s
        .ok(
            "create_conversation",
            json!({"title": "Q3 stock", "agentIds": [agent], "idempotencyKey": "cv-1"}),
        )
        .await;
    let conversation = cv["conversationId"].as_str().unwrap().to_owned();
    assert_eq!(cv["conversation"]["agentIds"], json!([agent]));

    let ask = json!({"conversationId": conversation, "body": "How much stock for Q3?", "idempotencyKey": "ask-1"});
    let asked = s.ok("post_message", ask.clone()).await;
    assert_eq!(
        (asked["seq"].as_u64(), asked["message"]["authorKind"].as_str()),
        (Some(1), Some("human"))
    );
    let question = asked["messageId"].as_str().unwrap().to_owned();
    let replay = s.ok("post_message", ask.clone()).await;
    assert_eq!(
        (replay["replayed"].as_bool(), replay["messageId"].as_str()),
        (Some(true), Some(question.as_str()))
    );
    let mut reworded = ask.clone();
    reworded["body"] = json!("Different words, same key");
    assert_eq!(s.refused("post_message", reworded).await, "conflict");

    let inbox = s.ok("list_agent_inbox", acting.clone()).await;
    let deliveries = inbox["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0]["message"]["body"], "How much stock for Q3?");
    let read = s
        .ok("read_conversation", with(json!({"conversationId": conversation})))
        .await;
    assert_eq!(read["messages"].as_array().unwrap().len(), 1);

    let reply = s
        .ok(
            "post_message",
            with(
                json!({"conversationId": conversation, "body": "About 40 units.", "replyTo": question,
                        "idempotencyKey": "reply-1"}),
            ),
        )
        .await;
    assert_eq!(reply["seq"], 2);
    assert_eq!(reply["message"]["authorKind"], "agent");
    assert_eq!(reply["message"]["endpointId"], endpoint.as_str());

    let consume = with(json!({"messageId": question}));
    let consumed = s.ok("consume_agent_delivery", consume.clone()).await;
    assert_eq!(
        (consumed["stateChanged"].as_bool(), consumed["state"].as_str()),
        (Some(true), Some("consumed"))
    );
    assert_eq!(s.ok("consume_agent_delivery", consume).await["stateChanged"], false);
    let listed = s.ok("list_agent_identities", json!({})).await;
    let me = &listed["agents"][0];
    assert_eq!(
        (me["queuedCount"].as_u64(), me["activeEndpointCount"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(me["productionAutoResumeAvailable"], false, "no carrier is held for it");

    // Another question makes a pending wake, which the running turn activates explicitly.
    s.ok(
        "post_message",
        json!({"conversationId": conversation, "body": "And Q4?", "idempotencyKey": "ask-2"}),
    )
    .await;
    let boot = s
        .ok(
            "bootstrap_agent_conversation",
            with(json!({"conversationId": conversation})),
        )
        .await;
    assert_eq!(
        (boot["queuedCount"].as_u64(), boot["wake"]["state"].as_str()),
        (Some(1), Some("pending"))
    );
    assert!(boot["activation"].is_null());
    assert!(
        !boot.to_string().contains("And Q4?"),
        "bootstrap carries no message body"
    );
    let wake = boot["wake"]["wakeId"].as_str().unwrap().to_owned();
    let activate = with(json!({"wakeId": wake, "activationIdempotencyKey": "activate-1"}));
    let act = s.ok("bootstrap_agent_conversation", activate.clone()).await;
    assert_eq!(act["activation"]["stateChanged"], true);
    assert_eq!(act["wake"]["state"], "dispatched");
    let token = act["activation"]["consumeToken"].as_str().unwrap().to_owned();
    let retried = s.ok("bootstrap_agent_conversation", activate).await;
    assert_eq!(retried["activation"]["replayed"], true);
    assert_eq!(
        retried["activation"]["consumeToken"],
        token.as_str(),
        "an exact retry recovers the token"
    );
    let answer = s
        .ok(
            "post_message",
            with(json!({"conversationId": conversation, "body": "Q4: 55 units.", "wakeId": wake, "operationIndex": 0})),
        )
        .await;
    assert_eq!(answer["seq"], 4);
    let woken = s
        .ok(
            "consume_agent_wake",
            with(json!({"wakeId": wake, "consumeToken": token})),
        )
        .await;
    assert_eq!(
        (woken["wake"]["state"].as_str(), woken["stateChanged"].as_bool()),
        (Some("consumed"), Some(true))
    );

    // The card is revision-checked.
    let update = json!({"agentId": agent, "expectedProfileRevision": 1, "handle": "forecaster",
                        "displayName": "Stock forecaster"});
    assert_eq!(
        s.ok("update_agent_identity", update.clone()).await["agent"]["profileRevision"],
        2
    );
    let mut stale = update.clone();
    stale["displayName"] = json!("Again");
    assert_eq!(s.refused("update_agent_identity", stale).await, "conflict");

    // Closed: no posts, reads still work.
    let closed = s
        .ok("close_conversation", json!({"conversationId": conversation}))
        .await;
    assert_eq!(closed["conversation"]["state"], "closed");
    let late = json!({"conversationId": conversation, "body": "late", "idempotencyKey": "late-1"});
    assert_eq!(s.refused("post_message", late).await, "closed");
    let all = s.ok("read_conversation", json!({"conversationId": conversation})).await;
    assert_eq!(all["messages"].as_array().unwrap().len(), 4);

    // Detach is desired-state idempotent; the endpoint then acts for no one.
    let detach = json!({"agentId": agent, "endpointId": endpoint});
    assert_eq!(
        s.ok("detach_agent_endpoint", detach.clone()).await["stateChanged"],
        true
    );
    assert_eq!(s.ok("detach_agent_endpoint", detach).await["stateChanged"], false);
    assert_eq!(s.refused("list_agent_inbox", acting.clone()).await, "stale_endpoint");
    Flow { agent, conversation }
}

async fn tool_names(url: &str, key: &str) -> Vec<String> {
    let r = post(url, key, "tools/list", None, json!({})).await;
    assert_eq!(r.status(), 200);
    let m = message(&r.text().await.unwrap());
    let mut names: Vec<String> = m["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert!(t["outputSchema"].is_object(), "{} has no outputSchema", t["name"]);
            t["name"].as_str().unwrap().to_owned()
        })
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn the_seed_flow_over_http_with_scopes_and_two_surfaces() {
    let dir = tempfile::tempdir().unwrap();
    let full = key(
        dir.path(),
        "coordinator",
        &["communication:read", "communication:manage"],
    );
    let server = serve(dir.path());
    let url = format!("{}/conversations", server.url);
    let names = tool_names(&url, &full).await;
    assert_eq!(names.len(), 38, "{names:?}");
    assert!(names.contains(&"bootstrap_agent_conversation".to_owned()));
    // /mcp still lists exactly the six transfer tools (every key may list).
    assert_eq!(tool_names(&server.url, &full).await.len(), 6);

    let s = Surface::Http {
        url: url.clone(),
        key: full.clone(),
    };
    let flow = seed_flow(&s).await;

    // The operator's CLI reads what the tools wrote.
    let agents = ahp(dir.path(), &["agent", "list"]);
    assert!(
        agents.contains(&flow.agent) && agents.contains("Stock forecaster"),
        "{agents}"
    );
    let shown = ahp(dir.path(), &["conversation", "show", &flow.conversation]);
    assert!(
        shown.contains("How much stock for Q3?") && shown.contains("Q4: 55 units."),
        "{shown}"
    );
    assert!(ahp(dir.path(), &["conversation", "list"]).contains("closed"));

    // The legacy era (initialize → session) is served too.
    let r = reqwest::Client::new()
        .post(&url)
        .bearer_auth(&full)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("mcp-session-id"));
    assert_eq!(
        message(&r.text().await.unwrap())["result"]["serverInfo"]["name"],
        "ahp-conversations"
    );
}

#[tokio::test]
async fn each_scope_is_its_own_403() {
    let dir = tempfile::tempdir().unwrap();
    let reader = key(dir.path(), "reader", &["communication:read"]);
    let manager = key(dir.path(), "manager", &["communication:manage"]);
    let transfers = key(dir.path(), "orchestrator", &["transfer:read", "transfer:write"]);
    let server = serve(dir.path());
    let url = format!("{}/conversations", server.url);
    let call = |name: &str, args: Value| json!({"name": name, "arguments": args});
    let challenge = |r: &reqwest::Response| {
        r.headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let create = call("create_conversation", json!({"title": "t", "idempotencyKey": "k"}));
    let r = post(&url, &reader, "tools/call", Some("create_conversation"), create.clone()).await;
    assert_eq!(r.status(), 403);
    assert!(challenge(&r).contains("insufficient_scope") && challenge(&r).contains("communication:manage"));
    let list = call("list_conversations", json!({}));
    let r = post(&url, &manager, "tools/call", Some("list_conversations"), list.clone()).await;
    assert_eq!(r.status(), 403);
    assert!(challenge(&r).contains("communication:read"));
    for (k, body, name) in [
        (&transfers, &list, "list_conversations"),
        (&transfers, &create, "create_conversation"),
    ] {
        assert_eq!(
            post(&url, k, "tools/call", Some(name), body.clone()).await.status(),
            403
        );
    }
    // A communication key is no transfer key, either.
    let status = call("get_status", json!({"transferId": "tr_ffffffffffffffffffffffff"}));
    let r = post(&server.url, &reader, "tools/call", Some("get_status"), status).await;
    assert_eq!(r.status(), 403);
    // And each key reaches its own tools; a manage-only key's create is not a 403.
    let r = post(&url, &manager, "tools/call", Some("create_conversation"), create).await;
    assert_eq!(r.status(), 200);
    let r = post(&url, &reader, "tools/call", Some("list_conversations"), list).await;
    assert_eq!(
        message(&r.text().await.unwrap())["result"]["structuredContent"]["conversations"],
        json!([])
    );
}

#[tokio::test]
async fn foreign_and_missing_ids_are_byte_identical_over_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let scopes = ["communication:read", "communication:manage"];
    let alice = key(dir.path(), "alice", &scopes);
    let bob = key(dir.path(), "bob", &scopes);
    let server = serve(dir.path());
    let url = format!("{}/conversations", server.url);
    let a = Surface::Http {
        url: url.clone(),
        key: alice,
    };
    let agent = a
        .ok(
            "create_agent_identity",
            json!({"handle": "a", "displayName": "A", "idempotencyKey": "a"}),
        )
        .await["agentId"]
        .as_str()
        .unwrap()
        .to_owned();
    let ep = a
        .ok(
            "attach_agent_endpoint",
            json!({"agentId": agent, "idempotencyKey": "e"}),
        )
        .await["endpointId"]
        .as_str()
        .unwrap()
        .to_owned();
    let cv = a
        .ok(
            "create_conversation",
            json!({"title": "t", "agentIds": [agent], "idempotencyKey": "c"}),
        )
        .await["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let msg = a
        .ok(
            "post_message",
            json!({"conversationId": cv, "body": "hi", "idempotencyKey": "p"}),
        )
        .await["messageId"]
        .as_str()
        .unwrap()
        .to_owned();
    // A missing id of each kind: well-formed, never created.
    let missing = |prefix: &str| format!("{prefix}{}", "0".repeat(24));
    let (no_agent, no_ep, no_cv, no_msg) = (missing("agt_"), missing("ep_"), missing("cv_"), missing("msg_"));
    let probes = |agent: &str, ep: &str, cv: &str, msg: &str| {
        vec![
            ("read_conversation", json!({"conversationId": cv})),
            (
                "post_message",
                json!({"conversationId": cv, "body": "x", "idempotencyKey": "bob"}),
            ),
            ("close_conversation", json!({"conversationId": cv})),
            (
                "update_agent_identity",
                json!({"agentId": agent, "expectedProfileRevision": 1, "handle": "b", "displayName": "B"}),
            ),
            (
                "attach_agent_endpoint",
                json!({"agentId": agent, "idempotencyKey": "bob-e"}),
            ),
            ("detach_agent_endpoint", json!({"agentId": agent, "endpointId": ep})),
            (
                "list_agent_inbox",
                json!({"agentId": agent, "endpointId": ep, "controllerGeneration": 1}),
            ),
            (
                "consume_agent_delivery",
                json!({"agentId": agent, "endpointId": ep, "controllerGeneration": 1, "messageId": msg}),
            ),
        ]
    };
    let foreign = probes(&agent, &ep, &cv, &msg);
    let absent = probes(&no_agent, &no_ep, &no_cv, &no_msg);
    for ((tool, f), (_, m)) in foreign.into_iter().zip(absent) {
        // The JSON-RPC payload as sent (SSE framing aside), byte for byte.
        let (url, bob) = (&url, &bob);
        let body = move |args: Value| async move {
            let r = post(
                url,
                bob,
                "tools/call",
                Some(tool),
                json!({"name": tool, "arguments": args}),
            )
            .await;
            assert_eq!(r.status(), 200);
            let text = r.text().await.unwrap();
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .find(|d| !d.is_empty())
                .unwrap_or(&text)
                .to_owned()
        };
        let (f, m) = (body(f).await, body(m).await);
        assert_eq!(f, m, "{tool}: a foreign id and a missing one differ");
        assert_eq!(
            message(&f)["result"]["structuredContent"]["kind"],
            "not_found",
            "{tool}"
        );
    }
}

#[tokio::test]
async fn bounds_at_the_limit_and_one_past_it_over_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let k = key(dir.path(), "k", &["communication:read", "communication:manage"]);
    let server = serve(dir.path());
    let s = Surface::Http {
        url: format!("{}/conversations", server.url),
        key: k,
    };
    let title = |n: usize| "t".repeat(n);
    let cv = s
        .ok(
            "create_conversation",
            json!({"title": title(200), "idempotencyKey": "k".repeat(128)}),
        )
        .await["conversationId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        s.refused(
            "create_conversation",
            json!({"title": title(201), "idempotencyKey": "x"})
        )
        .await,
        "invalid"
    );
    assert_eq!(
        s.refused(
            "create_conversation",
            json!({"title": "t", "idempotencyKey": "k".repeat(129)})
        )
        .await,
        "invalid"
    );
    let body = |n: usize, key: &str| json!({"conversationId": cv, "body": "b".repeat(n), "idempotencyKey": key});
    assert_eq!(s.ok("post_message", body(64 * 1024, "max")).await["seq"], 1);
    assert_eq!(s.refused("post_message", body(64 * 1024 + 1, "over")).await, "invalid");
    let page = |n: usize| json!({"conversationId": cv, "limit": n});
    assert_eq!(
        s.ok("read_conversation", page(200)).await["messages"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(s.refused("read_conversation", page(201)).await, "invalid");
    let card = |n: usize| json!({"handle": "h", "displayName": "d", "specialties": (0..n).map(|i| format!("s{i}")).collect::<Vec<_>>(), "idempotencyKey": format!("c{n}")});
    s.ok("create_agent_identity", card(16)).await;
    assert_eq!(s.refused("create_agent_identity", card(17)).await, "invalid");
    // The refusals changed nothing: one conversation, one message, one agent.
    assert_eq!(
        s.ok("list_conversations", json!({})).await["conversations"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        s.ok("list_agent_identities", json!({})).await["agents"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn the_seed_flow_over_stdio_as_the_operator_with_replay_after_reconnect() {
    let dir = tempfile::tempdir().unwrap();
    let s = Surface::stdio(dir.path()).await;
    let names: Vec<String> = match &s {
        Surface::Stdio(c) => c
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect(),
        Surface::Http { .. } => unreachable!(),
    };
    assert_eq!(names.len(), 38, "{names:?}");
    let flow = seed_flow(&s).await;
    if let Surface::Stdio(c) = s {
        c.cancel().await.unwrap();
    }
    // A new process, the same operator principal: the exact retry replays with the same ids.
    let s = Surface::stdio(dir.path()).await;
    let card = json!({"handle": "forecaster", "displayName": "Forecaster", "description": "Plans stock.",
                      "specialties": ["inventory"], "idempotencyKey": "agent-1"});
    let again = s.ok("create_agent_identity", card).await;
    assert_eq!(
        (again["replayed"].as_bool(), again["agentId"].as_str()),
        (Some(true), Some(flow.agent.as_str()))
    );
    let ask = json!({"conversationId": flow.conversation, "body": "How much stock for Q3?", "idempotencyKey": "ask-1"});
    let replay = s.ok("post_message", ask).await;
    assert_eq!(
        (replay["replayed"].as_bool(), replay["seq"].as_u64()),
        (Some(true), Some(1))
    );
    if let Surface::Stdio(c) = s {
        c.cancel().await.unwrap();
    }
    // The transfer surface is still the default over stdio.
    let cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ahp")).configure(|c| {
        c.arg("--data-dir").arg(dir.path()).args(["serve", "--stdio"]);
    });
    let c = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    assert_eq!(c.list_all_tools().await.unwrap().len(), 6);
    c.cancel().await.unwrap();
}
