//! The helpers every end-to-end suite shares: a transfer token as the operator mints it, a tool
//! call over MCP's stateless HTTP, and a post into a conversation as the human.

use std::path::Path;

use ahp_store::{DEFAULT_TOKEN_TTL, TokenKey, TokenScope, issue_transfer_token};
use serde_json::{Value, json};

use crate::mcp_http::{message, stateless, stateless_with};

/// A single-use `scope` token for `transfer`, minted with `key` as `ahp token issue` does.
pub(crate) fn token_with(key: &TokenKey, transfer: &str, scope: TokenScope) -> String {
    let now = ahp_store::Clock::now(&ahp_store::SystemClock);
    issue_transfer_token(key, transfer, scope, now, DEFAULT_TOKEN_TTL).unwrap()
}

/// A single-use `scope` token for `transfer`, minted with the key of the data directory `dir`.
pub(crate) fn token(dir: &Path, transfer: &str, scope: TokenScope) -> String {
    token_with(&TokenKey::from_env_or_file(dir).unwrap(), transfer, scope)
}

/// The JSON-RPC result of calling `tool` at `url` (with the API key `key`, if any): a tool
/// error included.
pub(crate) async fn result(url: &str, key: Option<&str>, tool: &str, arguments: Value) -> Value {
    let params = json!({"name": tool, "arguments": arguments});
    message(stateless(url, key, "tools/call", Some(tool), params).await).await["result"].clone()
}

/// A tool's structured result (panics on a tool error).
pub(crate) async fn call(url: &str, key: Option<&str>, tool: &str, arguments: Value) -> Value {
    let r = result(url, key, tool, arguments).await;
    assert!(r["isError"] != true, "{tool}: {r}");
    r["structuredContent"].clone()
}

/// Posts `body` into the conversation `cv` as its human participant, under `idempotency`,
/// through the conversation surface at `url`; the message's id.
pub(crate) async fn post(url: &str, key: Option<&str>, cv: &str, body: &str, idempotency: &str) -> String {
    let args = json!({"conversationId": cv, "body": body, "idempotencyKey": idempotency});
    call(url, key, "post_message", args).await["messageId"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The client capabilities of a client that declares the MCP tasks extension.
pub(crate) fn with_tasks() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

/// The JSON-RPC response (result or error) to `tools/call` of `tool` from a client declaring the
/// tasks extension.
pub(crate) async fn call_declaring_tasks(url: &str, key: Option<&str>, tool: &str, arguments: Value) -> Value {
    let params = json!({"name": tool, "arguments": arguments});
    message(stateless_with(url, key, "tools/call", Some(tool), params, with_tasks()).await).await
}

/// The JSON-RPC response to `method` (`tasks/get`, `tasks/cancel`, …) on task `id`, from a
/// client declaring the tasks extension (`declare`) or not.
pub(crate) async fn task_request(url: &str, key: Option<&str>, method: &str, id: &str, declare: bool) -> Value {
    let caps = if declare { with_tasks() } else { json!({}) };
    message(stateless_with(url, key, method, Some(id), json!({"taskId": id}), caps).await).await
}

/// Polls `tasks/get` of `id` until the task is no longer `working`; its last answer.
pub(crate) async fn task_ended(url: &str, key: Option<&str>, id: &str, within: std::time::Duration) -> Value {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let got = task_request(url, key, "tasks/get", id, true).await;
        let status = got["result"]["status"].as_str().unwrap_or_default().to_owned();
        if status != "working" {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {id} still working after {within:?}: {got}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
