//! The helpers every end-to-end suite shares: a transfer token as the operator mints it, a tool
//! call over MCP's stateless HTTP, and a post into a conversation as the human.

use std::path::Path;

use ahp_store::{DEFAULT_TOKEN_TTL, TokenKey, TokenScope, issue_transfer_token};
use serde_json::{Value, json};

use crate::mcp_http::{message, stateless};

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
