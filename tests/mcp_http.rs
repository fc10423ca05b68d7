//! The MCP transfer server over Streamable HTTP: bearer keys, scopes, Host validation, and
//! both protocol eras, against the real `ahp serve --http`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

/// A running `ahp serve --http 127.0.0.1:0`, killed on drop.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn serve(dir: &Path, extra: &[&str]) -> Server {
    let (server, mut stderr) = serve_logging(dir, extra, "warn");
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    server
}

/// `ahp serve --http` with `RUST_LOG=log`; the caller owns the rest of its stderr.
fn serve_logging(dir: &Path, extra: &[&str], log: &str) -> (Server, BufReader<std::process::ChildStderr>) {
    serve_with_env(dir, extra, log, &[])
}

/// [`serve_logging`] with `env` set for the process too.
pub(crate) fn serve_with_env(
    dir: &Path,
    extra: &[&str],
    log: &str,
    env: &[(&str, &str)],
) -> (Server, BufReader<std::process::ChildStderr>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .env("RUST_LOG", log)
        .envs(env.iter().copied())
        .arg("--data-dir")
        .arg(dir)
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(extra)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("MCP over HTTP at") {
        line.clear();
        assert_ne!(
            stderr.read_line(&mut line).unwrap(),
            0,
            "the server exited before listening"
        );
    }
    let url = line.trim().rsplit(' ').next().unwrap().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "unexpected line {line:?}");
    (Server { child, url }, stderr)
}

pub(crate) fn principal(dir: &Path, name: &str, scopes: &[&str]) -> String {
    let mut args = vec!["principal", "add", name, "--scope"];
    args.extend_from_slice(scopes);
    let out = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir)
        .args(&args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

const STATELESS: &str = "2026-07-28";

fn meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities
    })
}

/// A stateless (2026-07-28) request; `name` is the tool for `tools/call`.
pub(crate) async fn stateless(
    url: &str,
    key: Option<&str>,
    method: &str,
    name: Option<&str>,
    params: Value,
) -> reqwest::Response {
    stateless_with(url, key, method, name, params, json!({})).await
}

/// [`stateless`] from a client declaring `capabilities` (e.g. the tasks extension); `name` is
/// the tool of a `tools/call` or the task of a `tasks/*` (the `Mcp-Name` header).
pub(crate) async fn stateless_with(
    url: &str,
    key: Option<&str>,
    method: &str,
    name: Option<&str>,
    params: Value,
    capabilities: Value,
) -> reqwest::Response {
    let mut params = params;
    params["_meta"] = meta(capabilities);
    let mut req = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", STATELESS)
        .header("Mcp-Method", method)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if let Some(name) = name {
        req = req.header("Mcp-Name", name);
    }
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    req.send().await.unwrap()
}

/// The JSON-RPC message in a response body, whether sent as JSON or as one SSE event.
pub(crate) async fn message(r: reqwest::Response) -> Value {
    let text = r.text().await.unwrap();
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .unwrap_or(text.as_str())
        .to_owned();
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn www_authenticate(r: &reqwest::Response) -> String {
    r.headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn requests_need_a_key_with_the_right_scope() {
    let dir = tempfile::tempdir().unwrap();
    let reader = principal(dir.path(), "dashboard", &["transfer:read"]);
    let writer = principal(dir.path(), "orchestrator", &["transfer:read", "transfer:write"]);
    let server = serve(dir.path(), &[]);
    let url = server.url.clone();

    let r = stateless(&url, None, "tools/list", None, json!({})).await;
    assert_eq!(r.status(), 401);
    assert!(www_authenticate(&r).starts_with("Bearer"), "{:?}", r.headers());

    let r = stateless(&url, Some("ahp_key_0000"), "tools/list", None, json!({})).await;
    assert_eq!(r.status(), 401);
    assert!(www_authenticate(&r).contains("invalid_token"));

    let push = json!({"name": "push_state", "arguments": {"transferId": "tr_ffffffffffffffffffffffff"}});
    let r = stateless(&url, Some(&reader), "tools/call", Some("push_state"), push.clone()).await;
    assert_eq!(r.status(), 403);
    assert!(
        www_authenticate(&r).contains(r#"error="insufficient_scope""#),
        "{:?}",
        r.headers()
    );
    assert!(www_authenticate(&r).contains("transfer:write"));

    // The read key may read; the write key reaches the tool, whose own error is a tool result.
    let status = json!({"name": "get_status", "arguments": {"transferId": "tr_ffffffffffffffffffffffff"}});
    let r = stateless(&url, Some(&reader), "tools/call", Some("get_status"), status).await;
    assert_eq!(r.status(), 200);
    let m = message(r).await;
    assert_eq!(m["result"]["isError"], true, "{m}");
    assert!(
        m["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not found")
    );
    let r = stateless(&url, Some(&writer), "tools/call", Some("push_state"), push).await;
    assert_eq!(r.status(), 200);
    assert_eq!(message(r).await["result"]["isError"], true);

    // A revoked key stops working at once.
    let out = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["principal", "revoke", "dashboard"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        stateless(&url, Some(&reader), "tools/list", None, json!({}))
            .await
            .status(),
        401
    );
}

#[tokio::test]
async fn both_protocol_eras_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let key = principal(dir.path(), "orchestrator", &["transfer:read", "transfer:write"]);
    let server = serve(dir.path(), &[]);

    // 2026-07-28: stateless, no session.
    let r = stateless(&server.url, Some(&key), "tools/list", None, json!({})).await;
    assert_eq!(r.status(), 200);
    let tools = message(r).await;
    let mut names: Vec<_> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "activate",
            "get_status",
            "provision_runtime",
            "push_state",
            "report_usage",
            "snapshot_state"
        ]
    );

    // 2025-11-25: an initialize opens a session.
    let r = reqwest::Client::new()
        .post(&server.url)
        .bearer_auth(&key)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("mcp-session-id"));
    let init = message(r).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "ahp");
}

#[test]
fn a_foreign_host_header_is_refused() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let key = principal(dir.path(), "orchestrator", &["transfer:read"]);
    let server = serve(dir.path(), &[]);
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    // DNS rebinding: a browser page on evil.example resolved to 127.0.0.1 sends its own Host.
    let status_for = |host: &str| {
        // A bodiless request, so the server can answer and close without unread input.
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        write!(
            s,
            "GET /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\nAccept: text/event-stream\r\n\
             MCP-Protocol-Version: 2025-11-25\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = vec![0u8; 64];
        let n = s.read(&mut response).unwrap();
        String::from_utf8_lossy(&response[..n])
            .split(' ')
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(status_for("evil.example"), "403");
    assert_ne!(status_for(&addr), "403", "the server's own address must be accepted");
}

#[test]
fn auth_none_is_refused_off_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["serve", "--http", "0.0.0.0:0", "--auth", "none"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("only on a loopback address"));
}

#[tokio::test]
async fn a_stderr_nobody_reads_never_stops_the_server() {
    // Trace logging writes kilobytes per request; a pipe buffer holds 64 KiB. A server that
    // wrote its log synchronously would block on the full pipe and stop answering.
    let dir = tempfile::tempdir().unwrap();
    let (server, stderr) = serve_logging(dir.path(), &["--auth", "none"], "trace");
    let status = json!({"name": "get_status", "arguments": {"transferId": "tr_ffffffffffffffffffffffff"}});
    for i in 0..300 {
        let r = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            stateless(&server.url, None, "tools/call", Some("get_status"), status.clone()),
        )
        .await
        .unwrap_or_else(|_| panic!("request {i} got no answer: the server is blocked on its log"));
        assert_eq!(r.status(), 200);
        assert_eq!(message(r).await["result"]["isError"], true);
    }
    // And with the pipe closed altogether.
    drop(stderr);
    let r = stateless(&server.url, None, "tools/list", None, json!({})).await;
    assert_eq!(r.status(), 200);
    assert_eq!(message(r).await["result"]["tools"].as_array().unwrap().len(), 6);
}

/// The text of a tool error in a `tools/call` response.
fn tool_error_text(m: &Value) -> String {
    assert_eq!(m["result"]["isError"], true, "expected a tool error: {m}");
    m["result"]["content"][0]["text"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn report_usage_needs_the_meter_scope_and_never_takes_compute() {
    let dir = tempfile::tempdir().unwrap();
    let writer = principal(dir.path(), "orchestrator", &["transfer:read", "transfer:write"]);
    // A transfer is metered by its owner: this key creates the transfer and reports on it.
    let meter = principal(
        dir.path(),
        "billing",
        &["transfer:read", "transfer:write", "transfer:meter"],
    );
    let server = serve(dir.path(), &[]);
    let url = server.url.clone();
    let snapshot = json!({"name": "snapshot_state", "arguments": {
        "sourceHost": "laptop-7", "systemPrompt": "p", "messageHistory": [], "toolState": {}, "mcpConfig": []}});
    let m = message(stateless(&url, Some(&meter), "tools/call", Some("snapshot_state"), snapshot).await).await;
    let t = m["result"]["structuredContent"]["transferId"]
        .as_str()
        .unwrap()
        .to_owned();
    let report =
        |kind: &str| json!({"name": "report_usage", "arguments": {"transferId": t, "amountMicroUsd": 5, "kind": kind}});
    let events = || async {
        let get = json!({"name": "get_status", "arguments": {"transferId": t}});
        let m = message(stateless(&url, Some(&meter), "tools/call", Some("get_status"), get).await).await;
        m["result"]["structuredContent"]["events"].clone()
    };
    let before = events().await;
    assert_eq!(before[0]["kind"], "snapshot_created", "{before}");

    // transfer:write no longer implies metering.
    let r = stateless(
        &url,
        Some(&writer),
        "tools/call",
        Some("report_usage"),
        report("model_tokens"),
    )
    .await;
    assert_eq!(r.status(), 403);
    let challenge = www_authenticate(&r);
    assert!(
        challenge.contains(r#"error="insufficient_scope""#) && challenge.contains("transfer:meter"),
        "{challenge}"
    );

    // The meter key reaches the tool, which refuses the host-reserved kind before anything else.
    let r = stateless(
        &url,
        Some(&meter),
        "tools/call",
        Some("report_usage"),
        report("compute"),
    )
    .await;
    assert_eq!(r.status(), 200);
    let refused = tool_error_text(&message(r).await);
    assert!(refused.contains("reserved to the host"), "{refused}");
    // Another kind gets as far as the state machine (a staged transfer has nothing running).
    let r = stateless(
        &url,
        Some(&meter),
        "tools/call",
        Some("report_usage"),
        report("model_tokens"),
    )
    .await;
    let staged = tool_error_text(&message(r).await);
    assert!(staged.contains("it is staged"), "{staged}");
    assert_eq!(events().await, before, "a refused report changed the audit log");
}

/// The whole body of a stateless `tools/call` response, as it came over the wire.
async fn raw_call(url: &str, key: &str, tool: &str, arguments: Value) -> String {
    let call = json!({"name": tool, "arguments": arguments});
    let r = stateless(url, Some(key), "tools/call", Some(tool), call).await;
    assert_eq!(r.status(), 200);
    r.text().await.unwrap()
}

#[tokio::test]
async fn another_principals_transfer_reads_exactly_like_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let scopes = ["transfer:read", "transfer:write", "transfer:meter"];
    let alice = principal(dir.path(), "alice", &scopes);
    let mallory = principal(dir.path(), "mallory", &scopes);
    let server = serve(dir.path(), &[]);
    let url = server.url.clone();
    let snapshot = json!({"sourceHost": "laptop-7", "systemPrompt": "p", "messageHistory": [], "toolState": {},
                          "mcpConfig": []});
    let created = message(
        stateless(
            &url,
            Some(&alice),
            "tools/call",
            Some("snapshot_state"),
            json!({"name": "snapshot_state", "arguments": snapshot}),
        )
        .await,
    )
    .await;
    let t = created["result"]["structuredContent"]["transferId"]
        .as_str()
        .unwrap()
        .to_owned();
    let checksum = created["result"]["structuredContent"]["checksum"]
        .as_str()
        .unwrap()
        .to_owned();
    let missing = "tr_ffffffffffffffffffffffff";
    let calls = |id: &str| {
        [
            ("get_status", json!({"transferId": id})),
            ("get_status", json!({"transferId": id, "limit": 1, "before": 1})),
            ("push_state", json!({"transferId": id})),
            ("push_state", json!({"transferId": id, "checksum": checksum})),
            (
                "report_usage",
                json!({"transferId": id, "amountMicroUsd": 5, "kind": "model_tokens"}),
            ),
        ]
    };
    let own_events = || async {
        let m = message(
            stateless(
                &url,
                Some(&alice),
                "tools/call",
                Some("get_status"),
                json!({"name": "get_status", "arguments": {"transferId": t}}),
            )
            .await,
        )
        .await;
        m["result"]["structuredContent"].clone()
    };
    let before = own_events().await;
    assert_eq!(before["status"], "staged");

    for ((tool, foreign), (_, unknown)) in calls(&t).into_iter().zip(calls(missing)) {
        let foreign = raw_call(&url, &mallory, tool, foreign).await.replace(&t, "<id>");
        let unknown = raw_call(&url, &mallory, tool, unknown).await.replace(missing, "<id>");
        assert_eq!(
            foreign, unknown,
            "{tool}: a foreign id must answer byte for byte as a missing one"
        );
        assert!(foreign.contains("transfer <id> not found"), "{foreign}");
    }
    assert_eq!(
        own_events().await,
        before,
        "a refused call changed the owner's transfer"
    );

    // The owner gets through to the state machine with the same calls.
    let pushed = raw_call(&url, &alice, "push_state", json!({"transferId": t})).await;
    assert!(pushed.contains("cannot push"), "{pushed}");
    // So does the operator's metering surface, the CLI, while the server runs.
    let out = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir.path())
        .args([
            "transfer",
            "report-usage",
            &t,
            "--amount",
            "5",
            "--kind",
            "model_tokens",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("it is staged"), "{stderr}");
}

#[tokio::test]
async fn get_status_pages_the_event_log_and_refuses_bad_cursors() {
    let dir = tempfile::tempdir().unwrap();
    let key = principal(dir.path(), "orchestrator", &["transfer:read", "transfer:write"]);
    let server = serve(dir.path(), &[]);
    let url = server.url.clone();
    let snapshot = json!({"sourceHost": "laptop-7", "systemPrompt": "p", "messageHistory": [], "toolState": {},
                          "mcpConfig": []});
    let call = |tool: &'static str, arguments: Value| {
        let url = url.clone();
        let key = key.clone();
        async move {
            let params = json!({"name": tool, "arguments": arguments});
            message(stateless(&url, Some(&key), "tools/call", Some(tool), params).await).await["result"].clone()
        }
    };
    let t = call("snapshot_state", snapshot).await["structuredContent"]["transferId"]
        .as_str()
        .unwrap()
        .to_owned();
    let key_file = ahp_store::TokenKey::from_env_or_file(dir.path()).unwrap();
    let now = ahp_store::Clock::now(&ahp_store::SystemClock);
    let token = ahp_store::issue_transfer_token(
        &key_file,
        &t,
        ahp_store::TokenScope::ProvisionRuntime,
        now,
        ahp_store::DEFAULT_TOKEN_TTL,
    )
    .unwrap();
    let provision = json!({"transferId": t, "token": token, "tier": "nano", "budgetMicroUsd": 1000,
                           "component": "forecaster"});
    assert_ne!(call("provision_runtime", provision).await["isError"], true);
    assert_ne!(call("push_state", json!({"transferId": t})).await["isError"], true);

    // Newest first counted, oldest first within the page, one page at a time.
    let mut kinds = Vec::new();
    let mut before = Value::Null;
    loop {
        let mut args = json!({"transferId": t, "limit": 1});
        if !before.is_null() {
            args["before"] = before.clone();
        }
        let s = call("get_status", args).await["structuredContent"].clone();
        let events = s["events"].as_array().unwrap();
        assert_eq!(events.len(), 1, "{s}");
        kinds.insert(0, events[0]["kind"].as_str().unwrap().to_owned());
        before = s["nextBefore"].clone();
        if before.is_null() {
            break;
        }
        assert_eq!(before, events[0]["id"], "the cursor is the page's oldest event");
    }
    assert_eq!(kinds, ["snapshot_created", "runtime_provisioned", "state_pushed"]);
    let whole = call("get_status", json!({"transferId": t})).await["structuredContent"].clone();
    assert_eq!(whole["events"].as_array().unwrap().len(), 3);
    assert_eq!(whole["nextBefore"], Value::Null);
    let first = whole["events"][0]["id"].as_i64().unwrap();

    // The limit holds at its bound and refuses one past it.
    let at_limit = call("get_status", json!({"transferId": t, "limit": 500})).await;
    assert_ne!(at_limit["isError"], true, "{at_limit}");
    for limit in [0, 501] {
        let refused = call("get_status", json!({"transferId": t, "limit": limit})).await;
        assert_eq!(refused["isError"], true, "{limit}: {refused}");
        let text = refused["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("limit") && text.contains("1 to 500"), "{text}");
    }
    // A cursor must be an event of this transfer.
    for before in [first + 1_000, 0, -5] {
        let refused = call("get_status", json!({"transferId": t, "before": before})).await;
        assert_eq!(refused["isError"], true, "{before}: {refused}");
        let text = refused["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("before") && text.contains("nextBefore"), "{text}");
    }
    // Older than the first event there is nothing.
    let empty = call("get_status", json!({"transferId": t, "before": first})).await;
    assert_eq!(empty["structuredContent"]["events"], json!([]));
    assert_eq!(empty["structuredContent"]["nextBefore"], Value::Null);
}
