//! The MCP transfer server over Streamable HTTP: bearer keys, scopes, Host validation, and
//! both protocol eras, against the real `ahp serve --http`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

/// A running `ahp serve --http 127.0.0.1:0`, killed on drop.
pub(crate) struct Server {
    child: Child,
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
    let mut child = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .env("RUST_LOG", log)
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

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
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
    let mut params = params;
    params["_meta"] = meta();
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
