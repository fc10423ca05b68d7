//! Scopes follow the route that serves the request, against the real `ahp serve --http`.
//!
//! Every spelling of the two MCP paths a client or an attacker might send, with a key of each
//! scope and none, over both protocol eras, calling a tool of each surface: a call either
//! reaches exactly the tool set whose scope table authorized it, or is refused (401, 403, 404).
//! Only `/mcp` and `/mcp/conversations` themselves are served; every other spelling is
//! refused before any MCP service sees it. The requests go over a raw TCP
//! stream, so that no client library normalizes the path (`/./`, `..`, `//`, `%2F`) first.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::mcp_http::{principal, serve};

const LEGACY: &str = "2025-11-25";
const STATELESS: &str = "2026-07-28";
const TRANSFERS: &str = "/mcp";
const CONVERSATIONS: &str = "/mcp/conversations";

/// The paths tried; only the first two are served.
const SPELLINGS: [&str; 24] = [
    TRANSFERS,
    CONVERSATIONS,
    "/mcp/",
    "/mcp/conversations/",
    "/mcp/conversationsX",
    "/mcp/conversations%2F",
    "/mcp/conversations%2f",
    "/mcp%2Fconversations",
    "/mcp%2fconversations",
    "/mcp/conversations/extra",
    "/mcp/conversations/..",
    "/mcp/conversations/.",
    "/mcp/./conversations",
    "/mcp/../mcp/conversations",
    "/mcp//conversations",
    "//mcp",
    "//mcp/conversations",
    "/MCP",
    "/MCP/Conversations",
    "/mcp/Conversations",
    "/mcp/x",
    "/mcpx",
    "/mcp/conversations;x",
    "/mcp/%63onversations",
];

/// The scope sets tried: one key per scope, and no key at all.
const SCOPES: [Option<&str>; 6] = [
    Some("transfer:read"),
    Some("transfer:write"),
    Some("transfer:meter"),
    Some("communication:read"),
    Some("communication:manage"),
    None,
];

/// The tool sets a call can reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Surface {
    Transfers,
    Conversations,
}

/// A tool of one surface, its arguments, and the scope that surface's table gives it.
struct Tool {
    name: &'static str,
    surface: Surface,
    scope: &'static str,
    arguments: Value,
}

fn tools() -> Vec<Tool> {
    let missing = "tr_ffffffffffffffffffffffff";
    let snapshot =
        json!({"sourceHost": "h", "systemPrompt": "p", "messageHistory": [], "toolState": {}, "mcpConfig": []});
    let tool = |name, surface, scope, arguments| Tool {
        name,
        surface,
        scope,
        arguments,
    };
    vec![
        tool(
            "get_status",
            Surface::Transfers,
            "transfer:read",
            json!({"transferId": missing}),
        ),
        tool("snapshot_state", Surface::Transfers, "transfer:write", snapshot),
        tool(
            "report_usage",
            Surface::Transfers,
            "transfer:meter",
            json!({"transferId": missing, "amountMicroUsd": 1}),
        ),
        tool(
            "list_conversations",
            Surface::Conversations,
            "communication:read",
            json!({}),
        ),
        tool(
            "close_conversation",
            Surface::Conversations,
            "communication:manage",
            json!({"conversationId": "cv_ffffffffffffffffffffffff"}),
        ),
        tool(
            "get_goal",
            Surface::Conversations,
            "communication:read",
            json!({"goalId": "goal_ffffffffffffffffffffffff"}),
        ),
        tool(
            "cancel_agent_wait",
            Surface::Conversations,
            "communication:manage",
            json!({"waitId": "wait_ffffffffffffffffffffffff"}),
        ),
    ]
}

/// An HTTP response as it came off the wire.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }

    /// The JSON-RPC message in the body (plain JSON or the first SSE `data:` event).
    fn message(&self) -> Value {
        let data = self
            .body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|d| !d.is_empty())
            .unwrap_or(self.body.as_str());
        serde_json::from_str(data).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

/// Decodes a chunked body.
fn dechunk(mut raw: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = raw.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        raw = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// POSTs `body` to `path` exactly as spelled, with `headers`, and reads the whole answer.
async fn post(addr: &str, path: &str, headers: &[(&str, String)], body: &Value) -> Answer {
    let body = body.to_string();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut raw))
        .await
        .unwrap_or_else(|_| panic!("POST {path}: no complete answer within 10 s"))
        .unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw.as_str(), ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut answer = Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    };
    if answer
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        answer.body = dechunk(body);
    }
    answer
}

fn auth(key: Option<&str>) -> Vec<(&'static str, String)> {
    key.map(|k| vec![("Authorization", format!("Bearer {k}"))])
        .unwrap_or_default()
}

/// A `tools/call` in the stateless era: its `_meta` and headers carry the protocol.
async fn call_stateless(addr: &str, path: &str, key: Option<&str>, tool: &Tool) -> Answer {
    let mut headers = auth(key);
    headers.push(("MCP-Protocol-Version", STATELESS.into()));
    headers.push(("Mcp-Method", "tools/call".into()));
    headers.push(("Mcp-Name", tool.name.into()));
    let params = json!({"name": tool.name, "arguments": tool.arguments, "_meta": {
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    post(addr, path, &headers, &body).await
}

/// Opens a 2025-11-25 session at `path` (`initialize`, then `notifications/initialized`), or
/// `None` if the path refuses it.
async fn open_session(addr: &str, path: &str, key: Option<&str>) -> Option<String> {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}});
    let answer = post(addr, path, &auth(key), &init).await;
    if answer.status != 200 {
        return None;
    }
    let session = answer.header("mcp-session-id").expect("an initialize opens a session");
    let mut headers = auth(key);
    headers.push(("Mcp-Session-Id", session.clone()));
    headers.push(("MCP-Protocol-Version", LEGACY.into()));
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let answer = post(addr, path, &headers, &initialized).await;
    assert_eq!(answer.status, 202, "notifications/initialized at {path}: {answer:?}");
    Some(session)
}

/// A `tools/call` in the session era, in `session` (or in none).
async fn call_in_session(addr: &str, path: &str, key: Option<&str>, session: Option<&str>, tool: &Tool) -> Answer {
    let mut headers = auth(key);
    headers.push(("MCP-Protocol-Version", LEGACY.into()));
    if let Some(session) = session {
        headers.push(("Mcp-Session-Id", session.to_owned()));
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": tool.name, "arguments": tool.arguments}});
    post(addr, path, &headers, &body).await
}

/// What became of one call.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The tool ran (its result, possibly a tool error, came back).
    Reached,
    /// The call got through the gate to a surface without the tool (a JSON-RPC error).
    Unknown,
    /// Refused with this status before any tool ran.
    Refused(u16),
}

fn outcome(answer: &Answer) -> Outcome {
    match answer.status {
        200 => {
            let m = answer.message();
            if m.get("result").is_some() {
                Outcome::Reached
            } else {
                assert!(m.get("error").is_some(), "neither a result nor an error: {m}");
                Outcome::Unknown
            }
        }
        401 | 403 | 404 => Outcome::Refused(answer.status),
        other => panic!("unexpected status {other}: {answer:?}"),
    }
}

/// What a call should come to.
#[derive(Debug, PartialEq, Eq)]
enum Want {
    /// Exactly this.
    Exactly(Outcome),
    /// Refused, whoever answers: a path no surface serves matches no route, and the server's
    /// fallback refuses it (`404`, or `403` from the console's Host/Origin guard, which fronts
    /// the fallback).
    Refusal,
}

impl Want {
    fn admits(&self, got: &Outcome) -> bool {
        match self {
            Self::Exactly(want) => want == got,
            Self::Refusal => matches!(got, Outcome::Refused(_)),
        }
    }
}

/// What the call should come to: at a served path, the tool of that surface runs when the key
/// holds the scope that surface's table gives it; everything else is refused.
fn expected(path: &str, scope: Option<&str>, tool: &Tool) -> Want {
    let served = match path {
        TRANSFERS => Surface::Transfers,
        CONVERSATIONS => Surface::Conversations,
        _ => return Want::Refusal,
    };
    let Some(scope) = scope else {
        return Want::Exactly(Outcome::Refused(401));
    };
    // A name the surface does not know needs its widest scope.
    let needs = match (served, tool.surface == served) {
        (_, true) => tool.scope,
        (Surface::Transfers, false) => "transfer:write",
        (Surface::Conversations, false) => "communication:manage",
    };
    Want::Exactly(match (scope == needs, tool.surface == served) {
        (false, _) => Outcome::Refused(403),
        (true, true) => Outcome::Reached,
        (true, false) => Outcome::Unknown,
    })
}

/// The invariant itself, independent of the table: a tool that ran was authorized by its own
/// surface's scope table.
fn assert_authorized_by_its_own_table(case: &str, scope: Option<&str>, tool: &Tool, got: &Outcome) {
    if *got == Outcome::Reached {
        assert_eq!(
            scope,
            Some(tool.scope),
            "{case}: {} ran for a key without {}",
            tool.name,
            tool.scope
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_the_paths_reaches_only_the_tool_set_that_authorized_it() {
    let dir = tempfile::tempdir().unwrap();
    let keys: Vec<(Option<&str>, Option<String>)> = SCOPES
        .iter()
        .map(|scope| {
            let key = scope.map(|s| principal(dir.path(), &s.replace(':', "-"), &[s]));
            (*scope, key)
        })
        .collect();
    let server = serve(dir.path(), &[]);
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let tools = tools();
    let mut failures = Vec::new();
    let mut check = |case: String, scope: Option<&str>, tool: &Tool, got: Outcome, want: Want| {
        assert_authorized_by_its_own_table(&case, scope, tool, &got);
        if !want.admits(&got) {
            failures.push(format!("{case}: got {got:?}, want {want:?}"));
        }
    };

    for path in SPELLINGS {
        for (scope, key) in &keys {
            let key = key.as_deref();
            let who = scope.unwrap_or("no key");
            // 2026-07-28: every request stands alone.
            for tool in &tools {
                let answer = call_stateless(&addr, path, key, tool).await;
                let case = format!("{STATELESS} POST {path} as {who} calling {}", tool.name);
                check(case, *scope, tool, outcome(&answer), expected(path, *scope, tool));
            }
            // 2025-11-25: a session opened at the path itself; where the path serves nothing,
            // sessions opened at each served path, replayed against this spelling.
            let sessions = match open_session(&addr, path, key).await {
                Some(session) => vec![(path, Some(session))],
                None if key.is_some() => {
                    let mut sessions = Vec::new();
                    for served in [TRANSFERS, CONVERSATIONS] {
                        sessions.push((served, open_session(&addr, served, key).await));
                    }
                    sessions
                }
                None => vec![(path, None)],
            };
            for (opened_at, session) in &sessions {
                for tool in &tools {
                    let answer = call_in_session(&addr, path, key, session.as_deref(), tool).await;
                    let case = format!(
                        "{LEGACY} POST {path} as {who} calling {} (session opened at {opened_at})",
                        tool.name
                    );
                    check(case, *scope, tool, outcome(&answer), expected(path, *scope, tool));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
