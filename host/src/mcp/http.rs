//! The MCP transfer server over Streamable HTTP at `/mcp`, behind bearer authorization.
//!
//! Every request must carry `Authorization: Bearer …`: the API key of an unrevoked principal
//! (`ahp principal add`), or an OAuth access token of an issuer the operator added (`ahp auth
//! issuer add`; verified by [`oauth`](super::oauth), which also serves each surface's
//! protected-resource metadata). No or refused credential → `401` with `WWW-Authenticate:
//! Bearer resource_metadata="…", scope="…"` (and `error="invalid_token"` for a refused one); a
//! `tools/call` whose tool needs a scope the principal lacks → `403` with
//! `error="insufficient_scope"` and the scope. `get_status` needs `transfer:read`; `report_usage` needs
//! `transfer:meter` (spend drains a budget, so a key that may move transfers does not thereby
//! get to end them); the other tools `transfer:write` (and still their provision/activate
//! token; see [`transfer_tools::required_scope`]). The conversation tools are at
//! `/mcp/conversations` behind the same keys (see [`conversation_tools::required_scope`] for
//! their scopes). Both tool sets are served the same way (one private `service` function): each module knows its
//! tools and their scopes, this one the routes, the gate and the HTTP settings; who a request
//! acts as is [`identity`](super::identity)'s. Host and Origin headers are
//! validated by rmcp (DNS-rebinding protection); web pages of the origins the operator allowed
//! ([`Site::browsers`]) pass it and get CORS headers ([`cors`]), no other page does.
//! [`Auth::None`] disables the key check and is meant only for loopback (the CLI refuses it
//! elsewhere).
//!
//! Each surface is served at exactly one path — [`TRANSFERS_PATH`] and [`CONVERSATIONS_PATH`] —
//! and each has its own gate, which knows the tool set it fronts and checks every call against
//! that set's scope table. The scope table is therefore the route's, never a guess from the
//! path's spelling: any other path (`/mcp/conversationsX`, `/mcp/`, `/mcp/conversations/x`,
//! `/mcp/./conversations`, `%2F`, a different case, …) matches no route and is `404`, whatever
//! key it carries.
//!
//! A key that does not have a key's shape (prefix, hex, length) is refused before any blocking
//! work: no thread, no store lock, no hash. Timeouts, the body limit and the connection limit
//! are the listener's ([`super::listener`]).
//!
//! rmcp serves both protocol eras: 2025-11-25 sessions (`initialize`) and the stateless
//! 2026-07-28 protocol, where the service factory runs once per request — all state lives in
//! the shared [`TransferTools`].

use crate::shared_store::{SharedStore, StoreLock};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use ahp_store::ApiScope;
use ahp_store::principal::{API_KEY_PREFIX, MAX_API_KEY_LEN};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tower::{Layer, Service};

use super::conversation_tools::{self, ConversationTools};
use super::cors::{self, BrowserOrigin};
use super::oauth::claims::has_jwt_shape;
use super::oauth::metadata::{self, Surface};
use super::oauth::{Refusal, ResourceServer};
use super::transfer_tools::{self, TransferTools};

/// Largest request body accepted, in bytes: a maximal snapshot (~10 MiB) plus JSON overhead.
/// No tool takes a component's bytes (`provision_runtime` names a registered one; components
/// reach a host only through the operator's `ahp component add`, bounded by
/// `MAX_COMPONENT_BYTES`, 32 MiB), so this is no bound on components.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// How HTTP requests are authorized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// Bearer API keys of principals, checked against the store.
    Keys,
    /// No check at all: loopback only.
    None,
}

/// The path of the transfer tools. Only this exact path serves them.
pub const TRANSFERS_PATH: &str = "/mcp";
/// The path of the conversation tools. Only this exact path serves them.
pub const CONVERSATIONS_PATH: &str = "/mcp/conversations";

/// The tool set a gate fronts, and so the scope table it checks calls against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ToolSet {
    /// The six transfer tools ([`transfer_tools::required_scope`]).
    Transfers,
    /// The conversation tools ([`conversation_tools::required_scope`]).
    Conversations,
}

impl ToolSet {
    /// The set's path and the scopes its tools need, as its metadata names them.
    fn surface(self) -> Surface {
        match self {
            Self::Transfers => Surface {
                path: TRANSFERS_PATH,
                scopes: &[ApiScope::TransferRead, ApiScope::TransferWrite, ApiScope::TransferMeter],
            },
            Self::Conversations => Surface {
                path: CONVERSATIONS_PATH,
                scopes: &[ApiScope::CommunicationRead, ApiScope::CommunicationManage],
            },
        }
    }

    /// The scope a call of `tool` in this set needs.
    fn scope_of(self, tool: &str) -> ApiScope {
        match self {
            Self::Transfers => transfer_tools::required_scope(tool),
            Self::Conversations => conversation_tools::required_scope(tool),
        }
    }
}

/// The authorization in front of one tool set.
struct Gate {
    store: SharedStore,
    auth: Auth,
    tools: ToolSet,
    oauth: Arc<ResourceServer>,
}

/// Where the HTTP server listens and where clients reach it.
#[derive(Debug, Clone)]
pub struct Site {
    /// The address it listens on.
    pub local: SocketAddr,
    /// The origin clients reach it at (`ahp serve --public-url`; else `http://` and `local`):
    /// the canonical resource URIs tokens must name, and a Host and Origin it accepts.
    pub public: url::Url,
    /// The origins of the web pages allowed to call the MCP endpoints from a browser (`ahp
    /// serve --allow-origin`; none by default): Origins it accepts, and CORS for them.
    pub browsers: Vec<BrowserOrigin>,
}

impl Site {
    /// A site reached at its listening address.
    ///
    /// # Panics
    ///
    /// Never: an `http://` URL of a socket address parses.
    pub fn local(local: SocketAddr) -> Self {
        let public = url::Url::parse(&format!("http://{local}")).expect("a socket address is a URL's authority");
        Self {
            local,
            public,
            browsers: Vec::new(),
        }
    }
}

/// The `/mcp` router, ready for `axum::serve`: both surfaces and, unless `auth` is
/// [`Auth::None`], their protected-resource metadata; CORS on all of them for the site's
/// [`browsers`](Site::browsers).
///
/// # Errors
///
/// If the site's public URL is not an origin.
pub fn router(
    tools: TransferTools,
    carriers: Arc<dyn crate::carrier::Carriers>,
    store: SharedStore,
    auth: Auth,
    site: &Site,
) -> anyhow::Result<axum::Router> {
    let oauth = Arc::new(ResourceServer::new(&site.public, store.clone())?);
    let conversations = ConversationTools::new(store.clone(), auth == Auth::None).with_carriers(carriers);
    Ok(site_routes(
        service(tools, site),
        service(conversations, site),
        store,
        auth,
        oauth,
        site,
    ))
}

/// The two surfaces' routes, each at exactly its path behind a gate of its own tool set, their
/// metadata unless `auth` is [`Auth::None`], and CORS for the site's browsers over all of them.
fn site_routes<T, C>(
    transfers: T,
    conversations: C,
    store: SharedStore,
    auth: Auth,
    oauth: Arc<ResourceServer>,
    site: &Site,
) -> axum::Router
where
    T: Service<Request, Error = Infallible> + Clone + Send + Sync + 'static,
    T::Response: IntoResponse,
    T::Future: Send + 'static,
    C: Service<Request, Error = Infallible> + Clone + Send + Sync + 'static,
    C::Response: IntoResponse,
    C::Future: Send + 'static,
{
    // Each surface at exactly its path, behind a gate of its own tool set.
    let gate = |tools| {
        middleware::from_fn_with_state(
            Arc::new(Gate {
                store: store.clone(),
                auth,
                tools,
                oauth: oauth.clone(),
            }),
            authorize,
        )
    };
    let surfaces = axum::Router::new()
        .route_service(TRANSFERS_PATH, gate(ToolSet::Transfers).layer(transfers))
        .route_service(CONVERSATIONS_PATH, gate(ToolSet::Conversations).layer(conversations));
    let surfaces = match auth {
        Auth::None => surfaces,
        Auth::Keys => surfaces.merge(metadata::routes(
            oauth,
            [ToolSet::Transfers.surface(), ToolSet::Conversations.surface()],
        )),
    };
    cors::allow(surfaces, &site.browsers)
}

/// The Streamable HTTP service of one tool set (either surface) on a server listening on
/// `local`: the Host/Origin rules and body limit of [`service_config`]. Bearer keys and scopes
/// are checked by the gate in front of it ([`site_routes`]).
fn service<S: rmcp::ServerHandler + Clone>(tools: S, site: &Site) -> StreamableHttpService<S, LocalSessionManager> {
    StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(LocalSessionManager::default()),
        service_config(site),
    )
}

/// Both surfaces' gates and metadata in front of stubs that answer `transfers` and
/// `conversations`: the authorization of [`router`] without the tools.
#[cfg(test)]
pub(crate) fn stub_router(store: SharedStore, oauth: Arc<ResourceServer>) -> axum::Router {
    let stub = |body: &'static str| axum::routing::any(move || async move { body });
    let site = Site::local(SocketAddr::from(([127, 0, 0, 1], 7070)));
    site_routes(
        stub("transfers"),
        stub("conversations"),
        store,
        Auth::Keys,
        oauth,
        &site,
    )
}

/// The Streamable HTTP settings both MCP surfaces share: the Host names and Origins of the site
/// (its listening address, its public origin and the browsers' origins; DNS-rebinding
/// protection), and the body limit. Every Origin names its port: rmcp reads a missing one as
/// "any port".
fn service_config(site: &Site) -> StreamableHttpServerConfig {
    let local = site.local;
    let mut origins = vec![format!("http://{local}"), format!("http://localhost:{}", local.port())];
    origins.extend(BrowserOrigin::of(&site.public).map(|o| o.with_port().to_owned()));
    origins.extend(site.browsers.iter().map(|o| o.with_port().to_owned()));
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
        local.ip().to_string(),
    ];
    hosts.extend(site.public.host_str().map(str::to_owned));
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .with_max_request_body_bytes(MAX_REQUEST_BYTES)
}

fn challenge(status: StatusCode, value: &str, message: &str) -> Response {
    let mut r = (status, message.to_owned()).into_response();
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_str(value).expect("ASCII header"),
    );
    r
}

impl Gate {
    /// `401`: a credential is needed (`refused`: the one presented was refused, and why).
    fn unauthorized(&self, refused: Option<&str>, message: &str) -> Response {
        let value = metadata::unauthorized(&self.oauth, &self.tools.surface(), refused);
        challenge(StatusCode::UNAUTHORIZED, &value, message)
    }
}

/// Whether `key` has the shape of an API key: [`API_KEY_PREFIX`], then lowercase hex, at most
/// [`MAX_API_KEY_LEN`] bytes in all. Keys `ahp principal add` mints always do.
fn has_key_shape(key: &str) -> bool {
    key.len() <= MAX_API_KEY_LEN
        && key
            .strip_prefix(API_KEY_PREFIX)
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
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
        return gate.unauthorized(None, "an API key or access token is required (Authorization: Bearer …)");
    };
    // The cheap checks first: a string that can be neither a key nor a token costs no blocking
    // thread, no store lock and no hash, however many of them arrive.
    let principal = if has_key_shape(&key) {
        let store = gate.store.clone();
        let principal = tokio::task::spawn_blocking(move || Some(store.locked().authenticate(&key))).await;
        match principal {
            Ok(Some(Ok(Some(p)))) => p,
            Ok(Some(Ok(None))) => {
                return gate.unauthorized(Some("unknown or revoked API key"), "unknown or revoked API key");
            }
            _ => return (StatusCode::INTERNAL_SERVER_ERROR, "the store is unavailable").into_response(),
        }
    } else if has_jwt_shape(&key) {
        match gate.oauth.authenticate(&key, gate.tools.surface().path).await {
            Ok(p) => p,
            Err(Refusal::Invalid(why)) => {
                return gate.unauthorized(Some(&why), &format!("access token refused: {why}"));
            }
            Err(Refusal::Unavailable(why)) => return (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
        }
    } else {
        return gate.unauthorized(Some("neither an API key nor a JWT"), "unknown or revoked API key");
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
    for scope in required_scopes(gate.tools, &bytes) {
        if !principal.has(scope) {
            let value = metadata::insufficient_scope(&gate.oauth, &gate.tools.surface(), &[scope]);
            return challenge(
                StatusCode::FORBIDDEN,
                &value,
                &format!("insufficient_scope: this call needs {scope}"),
            );
        }
    }
    if principal.scopes.is_empty() {
        let surface = gate.tools.surface();
        return challenge(
            StatusCode::FORBIDDEN,
            &metadata::insufficient_scope(&gate.oauth, &surface, surface.scopes),
            "no scopes",
        );
    }
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.extensions_mut().insert(principal);
    next.run(req).await
}

/// The scopes a JSON-RPC message (or batch) needs: one per `tools/call`, by tool name; the
/// surface's read scope for `tasks/get`, its write scope for `tasks/cancel` and `tasks/update`
/// (`transfer:write`, `communication:manage`). Other methods (initialize, tools/list, ping, …)
/// need only an authenticated principal. A body that
/// is not JSON needs nothing here; rmcp rejects it.
fn required_scopes(tools: ToolSet, body: &[u8]) -> Vec<ApiScope> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Vec::new();
    };
    let messages = match value {
        serde_json::Value::Array(items) => items,
        single => vec![single],
    };
    messages
        .iter()
        .filter_map(|m| match m["method"].as_str()? {
            "tools/call" => Some(tools.scope_of(m["params"]["name"].as_str().unwrap_or_default())),
            // A task's result is what its tool returned: reading it needs the surface's read
            // scope, cancelling it its write scope.
            "tasks/get" => Some(tools.surface().scopes[0]),
            "tasks/cancel" | "tasks/update" => Some(tools.surface().scopes[1]),
            _ => None,
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
        let scopes = |v: serde_json::Value| required_scopes(ToolSet::Transfers, v.to_string().as_bytes());
        assert_eq!(scopes(call("get_status")), [ApiScope::TransferRead]);
        assert_eq!(scopes(call("activate")), [ApiScope::TransferWrite]);
        assert_eq!(scopes(call("report_usage")), [ApiScope::TransferMeter]);
        for tool in ["snapshot_state", "provision_runtime", "push_state"] {
            assert_eq!(scopes(call(tool)), [ApiScope::TransferWrite], "{tool}");
        }
        assert_eq!(scopes(call("no_such_tool")), [ApiScope::TransferWrite]);
        assert!(scopes(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).is_empty());
        assert_eq!(
            scopes(json!([call("get_status"), call("push_state"), call("report_usage")])),
            [ApiScope::TransferRead, ApiScope::TransferWrite, ApiScope::TransferMeter]
        );
        assert!(required_scopes(ToolSet::Transfers, b"not json").is_empty());
        let method = |m: &str| json!({"jsonrpc": "2.0", "id": 1, "method": m, "params": {"taskId": "mtk_x"}});
        assert_eq!(scopes(method("tasks/get")), [ApiScope::TransferRead]);
        assert_eq!(scopes(method("tasks/cancel")), [ApiScope::TransferWrite]);
        assert_eq!(scopes(method("tasks/update")), [ApiScope::TransferWrite]);
        let conv = |v: serde_json::Value| required_scopes(ToolSet::Conversations, v.to_string().as_bytes());
        assert_eq!(conv(call("read_conversation")), [ApiScope::CommunicationRead]);
        assert_eq!(conv(call("post_message")), [ApiScope::CommunicationManage]);
        assert_eq!(conv(call("get_status")), [ApiScope::CommunicationManage]);
        assert_eq!(conv(call("ask_agent")), [ApiScope::CommunicationManage]);
        assert_eq!(conv(method("tasks/get")), [ApiScope::CommunicationRead]);
        assert_eq!(conv(method("tasks/cancel")), [ApiScope::CommunicationManage]);
    }
}

#[cfg(test)]
mod shape_tests {
    use std::time::Duration;

    use ahp_store::Store;
    use axum::routing::post;
    use tower::ServiceExt;

    use super::*;

    fn gated(store: SharedStore) -> axum::Router {
        axum::Router::new()
            .route("/mcp", post(|| async { "reached" }))
            .layer(middleware::from_fn_with_state(
                Arc::new(Gate {
                    oauth: test_oauth(&store),
                    store,
                    auth: Auth::Keys,
                    tools: ToolSet::Transfers,
                }),
                authorize,
            ))
    }

    /// The resource server of a test site.
    pub(super) fn test_oauth(store: &SharedStore) -> Arc<ResourceServer> {
        let public = url::Url::parse("http://127.0.0.1:7070").unwrap();
        Arc::new(ResourceServer::new(&public, store.clone()).unwrap())
    }

    fn request(key: &str) -> Request {
        axum::http::Request::post("/mcp")
            .header(header::AUTHORIZATION, format!("Bearer {key}"))
            .body(Body::from("{}"))
            .unwrap()
    }

    // Holding the store lock across the awaits is the point: it stands for a busy writer.
    #[allow(clippy::await_holding_lock)]
    #[tokio::test]
    async fn a_key_of_the_wrong_shape_is_refused_without_waiting_for_the_store() {
        let store = crate::shared_store::share(Store::open_in_memory().unwrap());
        let app = gated(store.clone());
        let hex_of = |n: usize| "a".repeat(n);
        let longest = format!("{API_KEY_PREFIX}{}", hex_of(MAX_API_KEY_LEN - API_KEY_PREFIX.len()));
        let one_past = format!("{longest}a");
        // A writer holds the store (an fsync, a long sweep): whatever must consult it waits.
        let held = store.locked();
        for key in [
            one_past.as_str(),
            API_KEY_PREFIX,
            "ahp_key_ABCDEF",
            "ahp_key_0123 456",
            "sk-live-0123",
        ] {
            let answer = tokio::time::timeout(Duration::from_secs(1), app.clone().oneshot(request(key)))
                .await
                .unwrap_or_else(|_| panic!("{key:?} waited for the store"))
                .unwrap();
            assert_eq!(answer.status(), StatusCode::UNAUTHORIZED, "{key:?}");
            let challenge = answer.headers()[header::WWW_AUTHENTICATE].to_str().unwrap();
            assert!(challenge.contains("invalid_token"), "{challenge}");
        }
        // The longest well-shaped key is looked up, so it waits for the store …
        let waiting = tokio::time::timeout(Duration::from_millis(200), app.clone().oneshot(request(&longest))).await;
        assert!(waiting.is_err(), "a well-shaped key must be checked against the store");
        drop(held);
        // … and, unknown, is refused once the store is free.
        let answer = app.oneshot(request(&longest)).await.unwrap();
        assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
    }
}

#[cfg(test)]
mod route_tests {
    use ahp_store::Store;
    use tower::ServiceExt;

    use super::*;

    /// Every spelling of the two paths a client or an attacker might send; only the first two
    /// are served.
    const SPELLINGS: [&str; 22] = [
        "/mcp",
        "/mcp/conversations",
        "/mcp/",
        "/mcp/conversations/",
        "/mcp/conversationsX",
        "/mcp/conversations%2F",
        "/mcp/conversations%2f",
        "/mcp%2Fconversations",
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
    ];

    fn call(path: &str, key: &str, tool: &str) -> Request {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool}});
        axum::http::Request::post(path)
            .header(header::AUTHORIZATION, format!("Bearer {key}"))
            .body(Body::from(body.to_string()))
            .unwrap()
    }

    #[tokio::test]
    async fn a_call_reaches_only_the_tool_set_whose_scope_table_authorized_it() {
        let mut store = Store::open_in_memory().unwrap();
        let keys: Vec<(ApiScope, String)> = ApiScope::ALL
            .into_iter()
            .map(|scope| {
                let name = scope.as_str().replace(':', "-");
                (scope, store.add_principal(&name, &[scope]).unwrap().1)
            })
            .collect();
        let store = crate::shared_store::share(store);
        let app = stub_router(store.clone(), super::shape_tests::test_oauth(&store));
        let tools = [
            "get_status",
            "snapshot_state",
            "report_usage",
            "read_conversation",
            "post_message",
            "get_agent_task",
            "complete_agent_task_attempt",
        ];
        for path in SPELLINGS {
            let served = match path {
                TRANSFERS_PATH => Some(ToolSet::Transfers),
                CONVERSATIONS_PATH => Some(ToolSet::Conversations),
                _ => None,
            };
            for (scope, key) in &keys {
                for tool in tools {
                    let answer = app.clone().oneshot(call(path, key, tool)).await.unwrap();
                    let status = answer.status();
                    let body = axum::body::to_bytes(answer.into_body(), 1024).await.unwrap();
                    let case = format!("{path} {scope} {tool}: {status} {body:?}");
                    match served {
                        None => assert_eq!(status, StatusCode::NOT_FOUND, "{case}"),
                        Some(set) if set.scope_of(tool) == *scope => {
                            let reached = match set {
                                ToolSet::Transfers => "transfers",
                                ToolSet::Conversations => "conversations",
                            };
                            assert_eq!((status, &body[..]), (StatusCode::OK, reached.as_bytes()), "{case}");
                        }
                        Some(_) => assert_eq!(status, StatusCode::FORBIDDEN, "{case}"),
                    }
                }
            }
            // Without a key every served path asks for one; no other path exists.
            let anonymous = axum::http::Request::post(path).body(Body::from("{}")).unwrap();
            let status = app.clone().oneshot(anonymous).await.unwrap().status();
            let expected = if served.is_some() {
                StatusCode::UNAUTHORIZED
            } else {
                StatusCode::NOT_FOUND
            };
            assert_eq!(status, expected, "{path} without a key");
        }
    }
}

#[cfg(test)]
mod cors_tests {
    //! CORS for the site's browsers, in front of the real Streamable HTTP service and its
    //! Origin check.

    use ahp_store::Store;
    use axum::http::{HeaderMap, Method};
    use tower::ServiceExt;

    use super::*;

    /// The origin the operator allows (the Inspector's).
    const ALLOWED: &str = "http://localhost:6274";
    /// Another origin: the same host on another port.
    const OTHER: &str = "http://localhost:6275";
    const METADATA: &str = "/.well-known/oauth-protected-resource/mcp";

    /// Both surfaces (the conversation tools serve at both paths: no host needed) and their
    /// metadata on a site at 127.0.0.1:7070 allowing `browsers`, and an API key.
    fn app(browsers: &[&str]) -> (axum::Router, String) {
        let mut store = Store::open_in_memory().unwrap();
        let key = store.add_principal("browser", &ApiScope::ALL).unwrap().1;
        let store = crate::shared_store::share(store);
        let mut site = Site::local(SocketAddr::from(([127, 0, 0, 1], 7070)));
        site.browsers = browsers.iter().map(|o| o.parse().unwrap()).collect();
        let tools = || service(ConversationTools::new(store.clone(), false), &site);
        let oauth = super::shape_tests::test_oauth(&store);
        (
            site_routes(tools(), tools(), store.clone(), Auth::Keys, oauth, &site),
            key,
        )
    }

    fn request(method: Method, path: &str, origin: Option<&str>) -> axum::http::request::Builder {
        let r = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "127.0.0.1:7070");
        match origin {
            Some(o) => r.header(header::ORIGIN, o),
            None => r,
        }
    }

    /// What a browser asks before it sends an MCP call with a bearer credential.
    fn preflight(path: &str, origin: &str) -> Request {
        request(Method::OPTIONS, path, Some(origin))
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
            .header(
                header::ACCESS_CONTROL_REQUEST_HEADERS,
                "authorization,content-type,mcp-protocol-version,mcp-session-id",
            )
            .body(Body::empty())
            .unwrap()
    }

    /// An `initialize` call, with `key` if given.
    fn initialize(path: &str, origin: Option<&str>, key: Option<&str>) -> Request {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "page", "version": "1"}}});
        let r = request(Method::POST, path, origin)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream");
        let r = match key {
            Some(k) => r.header(header::AUTHORIZATION, format!("Bearer {k}")),
            None => r,
        };
        r.body(Body::from(body.to_string())).unwrap()
    }

    fn metadata(origin: Option<&str>) -> Request {
        request(Method::GET, METADATA, origin).body(Body::empty()).unwrap()
    }

    async fn send(app: &axum::Router, req: Request) -> (StatusCode, HeaderMap) {
        let answer = app.clone().oneshot(req).await.unwrap();
        (answer.status(), answer.headers().clone())
    }

    /// The CORS headers of an answer, by name.
    fn cors(headers: &HeaderMap) -> Vec<String> {
        let mut names: Vec<String> = headers
            .keys()
            .map(|k| k.as_str().to_owned())
            .filter(|k| k.starts_with("access-control-"))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    fn listed(headers: &HeaderMap, name: header::HeaderName) -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .flat_map(|v| v.to_str().unwrap().split(','))
            .map(|s| s.trim().to_ascii_lowercase())
            .collect()
    }

    #[tokio::test]
    async fn an_allowed_page_may_call_both_surfaces_and_read_their_metadata() {
        let (app, key) = app(&[ALLOWED]);
        for path in [TRANSFERS_PATH, CONVERSATIONS_PATH, METADATA] {
            let (status, headers) = send(&app, preflight(path, ALLOWED)).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], ALLOWED, "{path}");
            let allowed = listed(&headers, header::ACCESS_CONTROL_ALLOW_HEADERS);
            for h in cors::REQUEST_HEADERS {
                assert!(
                    allowed.contains(&h.as_str().to_owned()),
                    "{path}: {h} not in {allowed:?}"
                );
            }
            let methods = listed(&headers, header::ACCESS_CONTROL_ALLOW_METHODS);
            assert_eq!(methods, ["get", "post", "delete"], "{path}");
            assert_eq!(headers[header::ACCESS_CONTROL_MAX_AGE], "600", "{path}");
        }
        for path in [TRANSFERS_PATH, CONVERSATIONS_PATH] {
            // Without a credential: the challenge, readable by the page.
            let (status, headers) = send(&app, initialize(path, Some(ALLOWED), None)).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
            assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], ALLOWED, "{path}");
            assert!(headers.contains_key(header::WWW_AUTHENTICATE), "{path}");
            let exposed = listed(&headers, header::ACCESS_CONTROL_EXPOSE_HEADERS);
            assert_eq!(exposed, ["mcp-session-id", "www-authenticate"], "{path}");
            // With one: past the gate and rmcp's Origin check, a session the page can read.
            let (status, headers) = send(&app, initialize(path, Some(ALLOWED), Some(&key))).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], ALLOWED, "{path}");
            assert!(headers.contains_key("mcp-session-id"), "{path}");
        }
        let (status, headers) = send(&app, metadata(Some(ALLOWED))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], ALLOWED);
    }

    /// Another origin, on a host allowing one, is answered exactly as on a host allowing none;
    /// so is the allowed origin on a host allowing none; and a client without `Origin` (no
    /// browser) is unaffected either way.
    #[tokio::test]
    async fn any_other_page_gets_no_cors_and_the_refusals_of_before() {
        for (browsers, origin) in [(&[ALLOWED][..], OTHER), (&[][..], ALLOWED), (&[][..], OTHER)] {
            let (app, key) = app(browsers);
            let case = format!("{origin} with {browsers:?} allowed");
            for path in [TRANSFERS_PATH, CONVERSATIONS_PATH] {
                let (status, headers) = send(&app, preflight(path, origin)).await;
                assert_eq!(
                    (status, cors(&headers)),
                    (StatusCode::UNAUTHORIZED, vec![]),
                    "{case}: {path}"
                );
                let (status, headers) = send(&app, initialize(path, Some(origin), None)).await;
                assert_eq!(
                    (status, cors(&headers)),
                    (StatusCode::UNAUTHORIZED, vec![]),
                    "{case}: {path}"
                );
                // A valid key does not help a page of another origin: rmcp's Origin check.
                let (status, headers) = send(&app, initialize(path, Some(origin), Some(&key))).await;
                assert_eq!(
                    (status, cors(&headers)),
                    (StatusCode::FORBIDDEN, vec![]),
                    "{case}: {path}"
                );
                let (status, headers) = send(&app, initialize(path, None, Some(&key))).await;
                assert_eq!((status, cors(&headers)), (StatusCode::OK, vec![]), "{case}: {path}");
            }
            // The metadata is public; only the browser's reading of it is withheld.
            let (status, headers) = send(&app, metadata(Some(origin))).await;
            assert_eq!((status, cors(&headers)), (StatusCode::OK, vec![]), "{case}");
            let (status, headers) = send(&app, preflight(METADATA, origin)).await;
            assert_eq!(
                (status, cors(&headers)),
                (StatusCode::METHOD_NOT_ALLOWED, vec![]),
                "{case}"
            );
        }
    }
}
