//! A local MCP server with an `inventory` tool: what `ahp demo` starts for its forecaster, and
//! what the tests call through the host's MCP client.
//!
//! A real rmcp server over Streamable HTTP on `127.0.0.1` (both protocol eras, as rmcp serves
//! them), behind a bearer credential: a request without `authorization: Bearer <credential>`
//! gets 401. It records what it saw — every `authorization` value and JSON-RPC method — so a
//! test can prove the host injected the credential. [`Mode`] makes it hostile for the tests
//! of the host's bounds: a huge tool list, a huge result, a slow SSE stream, a hang, or a
//! server of the older era only (it refuses `server/discover`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http_body_util::BodyExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};

use crate::shared_store::StoreLock;

/// The path the server answers at.
pub const PATH: &str = "/mcp";

/// How the server behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// An honest inventory server.
    Honest,
    /// Offers `n` tools (besides `inventory`), each with a description of `description` bytes.
    HugeList {
        /// How many tools.
        tools: usize,
        /// Bytes of each description.
        description: usize,
    },
    /// Answers every call with a text of this many bytes.
    HugeResult(usize),
    /// Answers a call with progress notifications every 100 ms, never a result.
    SlowSse,
    /// Never answers a call.
    Hang,
    /// Refuses `server/discover` (HTTP 400), as a server of the 2025-11-25 era does.
    LegacyOnly,
    /// Echoes the `Authorization` header it was sent: a call with `{"fail": true}` in a
    /// protocol error's message, any other in its result — as text, JSON-escaped in the
    /// structured content and base64-encoded — and in its one tool's description.
    EchoCredential,
}

/// What the server saw.
#[derive(Debug, Default)]
pub struct Seen {
    authorizations: Mutex<Vec<String>>,
    methods: Mutex<Vec<String>>,
}

/// A running inventory server; stops when dropped.
#[derive(Debug)]
pub struct InventoryServer {
    addr: SocketAddr,
    seen: Arc<Seen>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for InventoryServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The rmcp handler.
#[derive(Clone)]
struct Inventory {
    items: Arc<Value>,
    mode: Mode,
    /// The `Authorization` header it requires.
    authorization: Arc<str>,
}

fn object(v: Value) -> Arc<serde_json::Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::default(),
    }
}

impl Inventory {
    fn inventory_tool() -> Tool {
        let mut tool = Tool::new(
            "inventory",
            "The stock of every SKU: on hand, recent daily sales and lead time.",
            object(json!({ "type": "object", "properties": {
                "sku": { "type": "string", "description": "Only this SKU (all if absent)." }
            }})),
        );
        tool.annotations = Some(rmcp::model::ToolAnnotations::new().read_only(true));
        tool
    }
}

impl ServerHandler for Inventory {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ahp-inventory", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = vec![Self::inventory_tool()];
        if self.mode == Mode::EchoCredential {
            tools[0].description = Some(format!("needs {}", self.authorization).into());
        }
        if let Mode::HugeList { tools: n, description } = self.mode {
            let text = "d".repeat(description);
            tools.extend(
                (0..n).map(|i| Tool::new(format!("extra_{i}"), text.clone(), object(json!({ "type": "object" })))),
            );
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match &self.mode {
            Mode::Hang => std::future::pending().await,
            Mode::SlowSse => {
                let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(1));
                for step in 0_u32.. {
                    let _ = context
                        .peer
                        .notify_progress(rmcp::model::ProgressNotificationParam::new(
                            token.clone(),
                            f64::from(step),
                        ))
                        .await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            Mode::HugeResult(n) => {
                return Ok(CallToolResult::success(vec![ContentBlock::text("x".repeat(*n))]).into());
            }
            Mode::EchoCredential => {
                use base64::Engine;
                let sent = format!("Authorization: {}", self.authorization);
                if request.arguments.as_ref().and_then(|a| a.get("fail")) == Some(&Value::Bool(true)) {
                    return Err(ErrorData::invalid_params(
                        format!("refused the request with {sent}"),
                        None,
                    ));
                }
                let mut result = CallToolResult::success(vec![ContentBlock::text(format!("you sent {sent}"))]);
                result.structured_content = Some(json!({
                    "headers": { "authorization": &*self.authorization },
                    "raw": base64::engine::general_purpose::STANDARD.encode(&sent),
                }));
                return Ok(result.into());
            }
            _ => {}
        }
        if request.name != "inventory" {
            return Err(ErrorData::invalid_params(format!("no tool {}", request.name), None));
        }
        let sku = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("sku"))
            .and_then(Value::as_str);
        let items: Vec<&Value> = self.items["inventory"]
            .as_array()
            .map(|a| a.iter().filter(|i| sku.is_none_or(|s| i["sku"] == s)).collect())
            .unwrap_or_default();
        if sku.is_some() && items.is_empty() {
            return Ok(
                CallToolResult::error(vec![ContentBlock::text(format!("unknown SKU {}", sku.unwrap_or("")))]).into(),
            );
        }
        Ok(CallToolResult::structured(json!({ "inventory": items })).into())
    }
}

/// Checks the bearer credential and records what each request carried.
async fn gate(
    State((seen, credential, mode)): State<(Arc<Seen>, Arc<str>, Mode)>,
    request: Request,
    next: Next,
) -> Response {
    let auth = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    seen.authorizations.locked().push(auth.clone());
    if auth != format!("Bearer {credential}") {
        return (StatusCode::UNAUTHORIZED, "a bearer credential is required").into_response();
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = body.collect().await.map(|b| b.to_bytes()) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let method = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v["method"].as_str().map(str::to_owned));
    if let Some(m) = &method {
        seen.methods.locked().push(m.clone());
    }
    if mode == Mode::LegacyOnly && method.as_deref() == Some("server/discover") {
        let error = json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32601, "message": "Method not found" } });
        let mut response = (StatusCode::BAD_REQUEST, error.to_string()).into_response();
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        return response;
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

impl InventoryServer {
    /// Starts a server on a free port of `127.0.0.1` that serves `items` (the forecaster's
    /// tool-state shape: `{"inventory": [{"sku", "onHand", "dailySales", "leadTimeDays"}]}`)
    /// to requests bearing `credential`, behaving as `mode`.
    ///
    /// # Errors
    ///
    /// If no port can be bound.
    pub async fn start(credential: &str, items: Value, mode: Mode) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Seen::default());
        let handler = Inventory {
            items: Arc::new(items),
            mode: mode.clone(),
            authorization: Arc::from(format!("Bearer {credential}")),
        };
        let config = StreamableHttpServerConfig::default().with_allowed_hosts([
            "127.0.0.1".to_owned(),
            addr.to_string(),
            "localhost".to_owned(),
        ]);
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let state = (seen.clone(), Arc::<str>::from(credential), mode);
        let router = axum::Router::new()
            .route_service(PATH, service)
            .layer(middleware::from_fn_with_state(state, gate));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self { addr, seen, task })
    }

    /// Its MCP URL, `http://127.0.0.1:PORT/mcp`: what a snapshot's `mcpConfig` names.
    pub fn url(&self) -> String {
        format!("http://{}{PATH}", self.addr)
    }

    /// Its origin, `http://127.0.0.1:PORT`: what a policy's server rule names.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every `authorization` header value it received, in order (empty for none).
    pub fn authorizations(&self) -> Vec<String> {
        self.seen.authorizations.locked().clone()
    }

    /// Every JSON-RPC method it received (`initialize`, `server/discover`, `tools/list`, …).
    pub fn methods(&self) -> Vec<String> {
        self.seen.methods.locked().clone()
    }

    /// The policy rule that lets guests reach it with the credential behind `cred_ref`
    /// injected (not revealed), each call costing `tool_call_micro_usd`.
    pub fn policy_rule(&self, cred_ref: &str, tool_call_micro_usd: u64) -> crate::policy::ServerRule {
        crate::policy::ServerRule {
            server: self.origin(),
            credential: Some(crate::policy::CredentialRule {
                cred_ref: cred_ref.into(),
                inject: crate::policy::Injection::default(),
                reveal: false,
            }),
            tool_call_micro_usd,
        }
    }
}
