//! The MCP transfer server over Streamable HTTP at `/mcp`, behind bearer-key authorization.
//!
//! Every request must carry `Authorization: Bearer <api key>` of an unrevoked principal
//! (`ahp principal add`). No or unknown key → `401` with `WWW-Authenticate: Bearer`; a
//! `tools/call` whose tool needs a scope the principal lacks → `403` with
//! `error="insufficient_scope"`. `get_status` needs `transfer:read`; the other tools
//! `transfer:write` (and still their provision/activate token). The conversation tools are at
//! `/mcp/conversations` behind the same keys (see
//! [`conversation_tools::required_scope`] for their scopes). Host and Origin headers are
//! validated by rmcp (DNS-rebinding protection). [`Auth::None`] disables the key check and is
//! meant only for loopback (the CLI refuses it elsewhere).
//!
//! rmcp serves both protocol eras: 2025-11-25 sessions (`initialize`) and the stateless
//! 2026-07-28 protocol, where the service factory runs once per request — all state lives in
//! the shared [`TransferTools`].

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use ahp_store::{ApiScope, Store};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use super::TransferTools;
use super::conversation_tools::{self, ConversationTools};

/// Largest request body accepted, in bytes: a maximal snapshot (~10 MiB) plus JSON overhead.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// How HTTP requests are authorized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// Bearer API keys of principals, checked against the store.
    Keys,
    /// No check at all: loopback only.
    None,
}

struct Gate {
    store: Arc<Mutex<Store>>,
    auth: Auth,
}

/// The `/mcp` router, ready for `axum::serve`.
pub fn router(tools: TransferTools, store: Arc<Mutex<Store>>, auth: Auth, local: SocketAddr) -> axum::Router {
    let origins = [format!("http://{local}"), format!("http://localhost:{}", local.port())];
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts([
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
            local.ip().to_string(),
        ])
        .with_allowed_origins(origins)
        .with_max_request_body_bytes(MAX_REQUEST_BYTES);
    let service = StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let conversations = ConversationTools::new(store.clone(), auth == Auth::None);
    axum::Router::new()
        .nest_service(
            "/mcp/conversations",
            conversation_tools::http_service(conversations, local),
        )
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(
            Arc::new(Gate { store, auth }),
            authorize,
        ))
}

/// Serves `router` on `listener` until `shutdown` resolves.
///
/// # Errors
///
/// If the listener fails.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}

fn challenge(status: StatusCode, value: &str, message: &str) -> Response {
    let mut r = (status, message.to_owned()).into_response();
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_str(value).expect("ASCII header"),
    );
    r
}

async fn authorize(State(gate): State<Arc<Gate>>, req: Request, next: Next) -> Response {
    if gate.auth == Auth::None {
        return next.run(req).await;
    }
    let key = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .map(str::to_owned);
    let Some(key) = key else {
        return challenge(
            StatusCode::UNAUTHORIZED,
            r#"Bearer realm="ahp""#,
            "an API key is required (Authorization: Bearer …)",
        );
    };
    let store = gate.store.clone();
    let principal = tokio::task::spawn_blocking(move || store.lock().ok().map(|s| s.authenticate(&key))).await;
    let principal = match principal {
        Ok(Some(Ok(Some(p)))) => p,
        Ok(Some(Ok(None))) => {
            return challenge(
                StatusCode::UNAUTHORIZED,
                r#"Bearer realm="ahp", error="invalid_token""#,
                "unknown or revoked API key",
            );
        }
        _ => return (StatusCode::INTERNAL_SERVER_ERROR, "the store is unavailable").into_response(),
    };
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body over {MAX_REQUEST_BYTES} bytes"),
            )
                .into_response();
        }
    };
    let conversations = parts.uri.path().starts_with("/mcp/conversations");
    for scope in required_scopes(conversations, &bytes) {
        if !principal.has(scope) {
            let value = format!(r#"Bearer realm="ahp", error="insufficient_scope", scope="{scope}""#);
            return challenge(
                StatusCode::FORBIDDEN,
                &value,
                &format!("insufficient_scope: this call needs {scope}"),
            );
        }
    }
    if principal.scopes.is_empty() {
        return challenge(
            StatusCode::FORBIDDEN,
            r#"Bearer realm="ahp", error="insufficient_scope""#,
            "no scopes",
        );
    }
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.extensions_mut().insert(principal);
    next.run(req).await
}

/// The scopes a JSON-RPC message (or batch) needs: one per `tools/call`, by tool name. Other
/// methods (initialize, tools/list, ping, …) need only an authenticated principal. A body that
/// is not JSON needs nothing here; rmcp rejects it.
fn required_scopes(conversations: bool, body: &[u8]) -> Vec<ApiScope> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Vec::new();
    };
    let messages = match value {
        serde_json::Value::Array(items) => items,
        single => vec![single],
    };
    messages
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| {
            if conversations {
                conversation_tools::required_scope(m["params"]["name"].as_str().unwrap_or(""))
            } else if m["params"]["name"] == "get_status" {
                ApiScope::TransferRead
            } else {
                ApiScope::TransferWrite
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scopes_follow_the_tool_called() {
        let call = |name: &str| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}});
        let scopes = |v: serde_json::Value| required_scopes(false, v.to_string().as_bytes());
        assert_eq!(scopes(call("get_status")), [ApiScope::TransferRead]);
        assert_eq!(scopes(call("activate")), [ApiScope::TransferWrite]);
        assert_eq!(scopes(call("no_such_tool")), [ApiScope::TransferWrite]);
        assert!(scopes(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).is_empty());
        assert_eq!(
            scopes(json!([call("get_status"), call("push_state")])),
            [ApiScope::TransferRead, ApiScope::TransferWrite]
        );
        assert!(required_scopes(false, b"not json").is_empty());
        let conv = |v: serde_json::Value| required_scopes(true, v.to_string().as_bytes());
        assert_eq!(conv(call("read_conversation")), [ApiScope::CommunicationRead]);
        assert_eq!(conv(call("post_message")), [ApiScope::CommunicationManage]);
        assert_eq!(conv(call("get_status")), [ApiScope::CommunicationManage]);
    }
}
