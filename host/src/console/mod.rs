//! The runtime console at `/console`: web pages for people watching their transfers (the
//! Handoff Protocol's dashboard) and talking to agents (the conversation protocol's Runtime
//! Console), served by `ahp serve --http` beside the MCP surfaces, over the same store.
//!
//! - **Sign-in** with an API key (`ahp principal add`) starts a [`session`]: an `HttpOnly`,
//!   `SameSite=Strict` cookie scoped to `/console`. Sign-out ends it. Each request re-reads the
//!   principal, so revoking a key signs its sessions out. A key without any of the scopes the
//!   console reads with ([`CONSOLE_SCOPES`]; e.g. a metering daemon's `transfer:meter`) could
//!   see nothing here and is refused a session (`403`); each principal holds at most
//!   [`session::MAX_SESSIONS_PER_PRINCIPAL`] sessions.
//! - **Every POST** must come from this origin (`Origin` one of the server's own, and
//!   `Sec-Fetch-Site: same-origin` when the browser sends it) and carry the session's CSRF
//!   token (sign-in, having no session yet, is checked on origin alone).
//! - **Host** must name this server (DNS-rebinding protection, as for `/mcp`).
//! - **Scopes** apply as on the MCP surfaces: without `transfer:read` a key sees no transfers;
//!   the [`agents`] and [`conversations`] pages act as the key's communication principal
//!   ([`api_key_caller`](crate::ops::identity::api_key_caller)), so they show exactly
//!   what the MCP conversation tools show that key, and need `communication:read` (to look) and
//!   `communication:manage` (to start a conversation or post).
//! - **Responses** carry a strict Content-Security-Policy (`default-src 'none'`; scripts, styles
//!   and fetches from this origin only; no inline script or style anywhere), `no-store`,
//!   `nosniff` and `frame-ancestors 'none'`.
//!
//! Pages are rendered on the server ([`pages`]); parts that change (a transfer's status,
//! budget chart and event log; the transfers and conversations tables; a conversation's
//! transcript; an agent's tasks, waits and goals, [`delegation`]; its waiting messages with a skip
//! form, [`waiting`], are read with the page) are *live regions* that `console.js` polls every [`pages::LIVE_POLL_MS`] and
//! swaps in when their version changed. Templates and assets are compiled into the binary.

pub mod agents;
pub mod chart;
mod communication;
pub mod conversations;
pub mod delegation;
pub mod pages;
pub mod session;
pub mod waiting;

use crate::shared_store::{SharedStore, StoreLock};
use std::net::SocketAddr;
use std::sync::Arc;

use ahp_store::principal::{API_KEY_PREFIX, MAX_API_KEY_LEN};
use ahp_store::{ApiScope, Principal, Store, TransferOwner, TransferStatus};
use axum::Form;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::Markup;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use self::session::{COOKIE, Session, Sessions};
use crate::carrier::Carriers;

/// Largest form body the console accepts (a sign-in key, a CSRF token), in bytes.
pub const MAX_FORM_BYTES: usize = 4096;
/// Most transfers the transfers page lists.
pub const TRANSFERS_PER_PAGE: usize = 1000;
/// The scopes the console shows anything for; a key holding none of them gets no session.
pub const CONSOLE_SCOPES: [ApiScope; 3] = [
    ApiScope::TransferRead,
    ApiScope::CommunicationRead,
    ApiScope::CommunicationManage,
];

/// Whether `principal` holds a scope the console shows anything for.
fn may_use_console(principal: &Principal) -> bool {
    CONSOLE_SCOPES.iter().any(|s| principal.has(*s))
}

/// The Content-Security-Policy of every console response.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");

/// The console's shared state.
struct Console {
    store: SharedStore,
    sessions: Sessions,
    hosts: Vec<String>,
    origins: Vec<String>,
    carriers: Arc<dyn Carriers>,
}

/// The `/console` router over `store`, for a server listening on `local`; `carriers` says which
/// agents' wake carriers this process holds (the agent cards' readiness flag), and is told of
/// every message the console commits (a dispatch opportunity).
pub fn router(store: SharedStore, local: SocketAddr, carriers: Arc<dyn Carriers>) -> axum::Router {
    let port = local.port();
    let ip = match local.ip() {
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        v4 => v4.to_string(),
    };
    let mut hosts = vec![
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        format!("{ip}:{port}"),
    ];
    hosts.dedup();
    let origins = hosts.iter().map(|h| format!("http://{h}")).collect();
    let console = Arc::new(Console {
        store,
        sessions: Sessions::default(),
        hosts,
        origins,
        carriers,
    });
    axum::Router::new()
        .route("/console", get(|| async { Redirect::to("/console/transfers") }))
        .route("/console/", get(|| async { Redirect::to("/console/transfers") }))
        .route("/console/sign-in", get(sign_in_page).post(sign_in))
        .route("/console/sign-out", post(sign_out))
        .route("/console/transfers", get(transfers))
        .route("/console/transfers/live", get(transfers_live))
        .route("/console/transfers/{id}", get(transfer))
        .route("/console/transfers/{id}/live", get(transfer_live))
        .route("/console/agents", get(agents::agents))
        .route("/console/agents/{id}", get(delegation::agent))
        .route("/console/agents/{id}/live", get(delegation::agent_live))
        .route("/console/agents/{id}/conversations", post(agents::start_conversation))
        .route("/console/agents/{id}/skip", post(waiting::skip))
        .route("/console/conversations", get(conversations::conversations))
        .route("/console/conversations/live", get(conversations::conversations_live))
        .route("/console/conversations/{id}", get(conversations::conversation))
        .route("/console/conversations/{id}/live", get(conversations::transcript_live))
        .route(
            "/console/conversations/{id}/messages",
            post(conversations::post_message).layer(DefaultBodyLimit::max(conversations::MAX_MESSAGE_FORM_BYTES)),
        )
        .route(
            "/console/assets/console.css",
            get(|| async { asset("text/css; charset=utf-8", CSS) }),
        )
        .route(
            "/console/assets/console.js",
            get(|| async { asset("text/javascript; charset=utf-8", JS) }),
        )
        .layer(DefaultBodyLimit::max(MAX_FORM_BYTES))
        .layer(middleware::from_fn_with_state(console.clone(), guard))
        .with_state(console)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Host check for every request, origin check for every POST, and the security headers on
/// every response.
async fn guard(State(console): State<Arc<Console>>, req: Request, next: Next) -> Response {
    let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok());
    let mut response = if !host.is_some_and(|h| console.hosts.iter().any(|x| x == h)) {
        (StatusCode::FORBIDDEN, "this Host is not served here").into_response()
    } else if req.method() == Method::POST && !same_origin(&console, req.headers()) {
        (StatusCode::FORBIDDEN, "cross-origin request refused").into_response()
    } else {
        next.run(req).await
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // Not `no-referrer`: under it a browser sends `Origin: null` on its own form POSTs, which
    // the origin check would then refuse.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// Whether a POST comes from one of this server's own origins.
fn same_origin(console: &Console, headers: &HeaderMap) -> bool {
    let origin = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok());
    let fetch_site = headers.get("sec-fetch-site").and_then(|o| o.to_str().ok());
    origin.is_some_and(|o| console.origins.iter().any(|x| x == o)) && fetch_site.is_none_or(|s| s == "same-origin")
}

/// Runs `f` on the store on a blocking thread.
async fn read<T: Send + 'static>(
    console: &Arc<Console>,
    f: impl FnOnce(&mut Store) -> ahp_store::Result<T> + Send + 'static,
) -> Result<T, Response> {
    let store = console.store.clone();
    match tokio::task::spawn_blocking(move || f(&mut store.locked())).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(ahp_store::Error::TransferNotFound(_) | ahp_store::Error::InvalidInput { .. })) => Err((
            StatusCode::NOT_FOUND,
            Html(pages::message(None, "Not found", "No such transfer.").into_string()),
        )
            .into_response()),
        Ok(Err(e)) => {
            tracing::error!("console read failed: {e}");
            Err((StatusCode::INTERNAL_SERVER_ERROR, "the store failed").into_response())
        }
        Err(_) => Err((StatusCode::INTERNAL_SERVER_ERROR, "the store is unavailable").into_response()),
    }
}

/// Who is signed in to the console: its session (cookie value and contents) and its principal.
struct SignedIn {
    cookie: String,
    session: Session,
    principal: Principal,
}

impl SignedIn {
    /// Whose transfers the caller sees: its key's own (the rule `get_status` follows).
    fn owner(&self) -> TransferOwner {
        crate::ops::identity::api_key_owner(&self.principal)
    }

    fn who(&self) -> (&Principal, &str) {
        (&self.principal, &self.session.csrf)
    }
}

/// The caller signed in by the request's cookie, or the response for one who is not: a
/// redirect to sign-in for a page, `401` for a live region or a POST.
async fn caller(console: &Arc<Console>, headers: &HeaderMap, page: bool) -> Result<SignedIn, Response> {
    let refuse = |console: &Console, cookie: Option<&str>| {
        if let Some(c) = cookie {
            console.sessions.end(c);
        }
        let mut r = if page {
            Redirect::to("/console/sign-in").into_response()
        } else {
            (StatusCode::UNAUTHORIZED, "sign in first").into_response()
        };
        r.headers_mut().insert(
            header::SET_COOKIE,
            HeaderValue::from_str(&session::clear_cookie()).expect("ASCII"),
        );
        r
    };
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|h| session::cookie(h, COOKIE))
        .map(str::to_owned);
    let Some(cookie) = cookie else {
        return Err(refuse(console, None));
    };
    let Some(session) = console.sessions.find(&cookie) else {
        return Err(refuse(console, Some(&cookie)));
    };
    let id = session.principal_id.clone();
    match read(console, move |s| s.active_principal(&id)).await? {
        Some(principal) if may_use_console(&principal) => Ok(SignedIn {
            cookie,
            session,
            principal,
        }),
        _ => Err(refuse(console, Some(&cookie))),
    }
}

fn html(markup: Markup) -> Response {
    Html(markup.into_string()).into_response()
}

async fn sign_in_page(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    match caller(&console, &headers, true).await {
        Ok(c) => Redirect::to(home(&c.principal)).into_response(),
        Err(_) => html(pages::sign_in(None)),
    }
}

/// Where a signed-in key starts: the transfers, or the agents for a key that can read only
/// those.
fn home(principal: &Principal) -> &'static str {
    if !principal.has(ApiScope::TransferRead) && principal.has(ApiScope::CommunicationRead) {
        "/console/agents"
    } else {
        "/console/transfers"
    }
}

#[derive(Deserialize)]
struct SignInForm {
    key: String,
}

async fn sign_in(State(console): State<Arc<Console>>, Form(form): Form<SignInForm>) -> Response {
    let refused = || {
        (
            StatusCode::UNAUTHORIZED,
            html(pages::sign_in(Some("Unknown or revoked API key."))),
        )
            .into_response()
    };
    let key = form.key.trim().to_owned();
    // The cheap shape check first: a key of the wrong form never costs a hash or the store lock.
    if key.len() > MAX_API_KEY_LEN || !key.starts_with(API_KEY_PREFIX) {
        return refused();
    }
    let principal = match read(&console, move |s| s.authenticate(&key)).await {
        Ok(Some(p)) => p,
        Ok(None) => return refused(),
        Err(r) => return r,
    };
    if !may_use_console(&principal) {
        // Nothing here would be visible to it: no session, so none to hold or steal.
        let page = pages::sign_in(Some(
            "This API key holds none of the scopes the console shows (transfer:read, communication:read, communication:manage).",
        ));
        return (StatusCode::FORBIDDEN, html(page)).into_response();
    }
    let (id, _) = console.sessions.start(&principal.id);
    tracing::info!(principal = %principal.name, "console sign-in");
    let mut r = Redirect::to(home(&principal)).into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&session::set_cookie(&id)).expect("hex"),
    );
    r
}

#[derive(Deserialize)]
struct CsrfForm {
    csrf: String,
}

async fn sign_out(State(console): State<Arc<Console>>, headers: HeaderMap, Form(form): Form<CsrfForm>) -> Response {
    let c = match caller(&console, &headers, false).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    if !session::csrf_matches(&c.session, &form.csrf) {
        return (StatusCode::FORBIDDEN, "stale or missing form token; reload the page").into_response();
    }
    console.sessions.end(&c.cookie);
    let mut r = Redirect::to("/console/sign-in").into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&session::clear_cookie()).expect("ASCII"),
    );
    r
}

#[derive(Deserialize)]
struct Filter {
    status: Option<String>,
}

/// The status a filter names (`None` for all), or the `400` page for one that names none.
fn parse_filter(filter: &Filter) -> Result<Option<TransferStatus>, Box<Response>> {
    match filter.status.as_deref() {
        None | Some("") => Ok(None),
        Some(s) => s.parse().map(Some).map_err(|_| {
            let page = pages::message(None, "Bad filter", &format!("{s:?} is not a transfer status"));
            Box::new((StatusCode::BAD_REQUEST, html(page)).into_response())
        }),
    }
}

/// The caller, if it holds `scope`; otherwise the refusal (a page saying so, or `403`).
async fn caller_with(
    console: &Arc<Console>,
    headers: &HeaderMap,
    page: bool,
    scope: ApiScope,
) -> Result<SignedIn, Response> {
    let c = caller(console, headers, page).await?;
    if c.principal.has(scope) {
        Ok(c)
    } else if page {
        Err((StatusCode::FORBIDDEN, html(pages::missing_scope(c.who(), scope))).into_response())
    } else {
        Err((StatusCode::FORBIDDEN, format!("this key does not hold {scope}")).into_response())
    }
}

/// A live region's response: its HTML and a version the poller compares.
fn live(markup: Markup) -> Response {
    let body = markup.into_string();
    let version = hex::encode(&Sha256::digest(body.as_bytes())[..8]);
    let mut r = Html(body).into_response();
    r.headers_mut()
        .insert("x-live-version", HeaderValue::from_str(&version).expect("hex"));
    r
}

async fn transfers(State(console): State<Arc<Console>>, headers: HeaderMap, Query(filter): Query<Filter>) -> Response {
    let c = match caller_with(&console, &headers, true, ApiScope::TransferRead).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let status = match parse_filter(&filter) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let owner = c.owner();
    match read(&console, move |s| {
        Ok((s.list_transfer_summaries(&owner, status, TRANSFERS_PER_PAGE)?, s.now()))
    })
    .await
    {
        Ok((rows, now)) => html(pages::transfers(c.who(), &rows, status, now)),
        Err(r) => r,
    }
}

async fn transfers_live(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Query(filter): Query<Filter>,
) -> Response {
    let owner = match caller_with(&console, &headers, false, ApiScope::TransferRead).await {
        Ok(c) => c.owner(),
        Err(r) => return r,
    };
    let status = match parse_filter(&filter) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    match read(&console, move |s| {
        Ok((s.list_transfer_summaries(&owner, status, TRANSFERS_PER_PAGE)?, s.now()))
    })
    .await
    {
        Ok((rows, now)) => live(pages::transfer_rows(&rows, now)),
        Err(r) => r,
    }
}

/// Which page of a transfer's event log to show.
#[derive(Deserialize)]
struct EventCursor {
    /// Show the events before this event id; without it, the newest.
    before: Option<String>,
}

/// The cursor `?before=` names, or the `400` page for one that is not an event id.
fn parse_cursor(cursor: &EventCursor) -> Result<Option<i64>, Box<Response>> {
    match cursor.before.as_deref() {
        None | Some("") => Ok(None),
        Some(s) => match s.parse::<i64>() {
            Ok(before) if before >= 1 => Ok(Some(before)),
            _ => {
                let page = pages::message(None, "Bad cursor", &format!("{s:?} is not an event id"));
                Err(Box::new((StatusCode::BAD_REQUEST, html(page)).into_response()))
            }
        },
    }
}

/// A transfer's page as [`pages::TransferView`] shows it: bounded reads only (one page of its
/// log and a downsampled spend curve, never the whole log).
///
/// Another principal's transfer reads exactly like a missing one.
fn transfer_view(
    s: &mut Store,
    id: &str,
    owner: &TransferOwner,
    before: Option<i64>,
) -> ahp_store::Result<(pages::TransferView, ahp_store::Timestamp)> {
    let now = s.now();
    let view = pages::TransferView {
        transfer: s.transfer_as(id, owner)?,
        budget: s.budget(id)?,
        events: s.event_page(
            id,
            ahp_store::EventPage {
                limit: pages::EVENTS_PER_PAGE,
                before,
            },
        )?,
        before,
        spend: s.spend_curve(id, now, chart::CHART_POINTS)?,
    };
    Ok((view, now))
}

async fn transfer(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(cursor): Query<EventCursor>,
) -> Response {
    let c = match caller_with(&console, &headers, true, ApiScope::TransferRead).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let before = match parse_cursor(&cursor) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let owner = c.owner();
    match read(&console, move |s| {
        let (view, now) = transfer_view(s, &id, &owner, before)?;
        Ok((view, s.snapshot_summary(&id)?, now))
    })
    .await
    {
        Ok((view, snapshot, now)) => html(pages::transfer(c.who(), &view, &snapshot, now)),
        Err(r) => r,
    }
}

async fn transfer_live(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(cursor): Query<EventCursor>,
) -> Response {
    let owner = match caller_with(&console, &headers, false, ApiScope::TransferRead).await {
        Ok(c) => c.owner(),
        Err(r) => return r,
    };
    let before = match parse_cursor(&cursor) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    match read(&console, move |s| transfer_view(s, &id, &owner, before)).await {
        Ok((view, now)) => live(pages::transfer_live(&view, now)),
        Err(r) => r,
    }
}
