//! How the agents and conversations pages reach the conversation domain: as the signed-in key's
//! communication principal (the very [`Caller`](ahp_store::conversation::Caller) the MCP
//! conversation tools use for that key),
//! on a blocking thread, with every refusal turned into a page a person can read.
//!
//! Not-found is existence-hiding all the way to the browser: a foreign id and a missing one get
//! the same `404` page, which names neither.

use crate::shared_store::StoreLock;
use std::sync::Arc;

use ahp_store::Store;
use ahp_store::conversation::{Caller as Talker, ConversationError, ConversationResult, Scope};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{Console, SignedIn, caller, html, pages, session};
use crate::ops::identity::api_key_caller;

/// The `?after=` cursor of a paged list.
#[derive(Deserialize)]
pub(super) struct Cursor {
    after: Option<String>,
}

impl Cursor {
    /// The id the page starts after (an empty `?after=` is the first page).
    pub(super) fn after(self) -> Option<String> {
        self.after.filter(|a| !a.is_empty())
    }
}

/// What the conversation domain refused, or that the store could not be reached.
pub(super) enum Refusal {
    /// The domain's refusal.
    Domain(ConversationError),
    /// The store failed or is unavailable: already a response.
    Unavailable(Response),
}

/// Runs `f` on the store on a blocking thread.
pub(super) async fn talk<T: Send + 'static>(
    console: &Arc<Console>,
    f: impl FnOnce(&mut Store) -> ConversationResult<T> + Send + 'static,
) -> Result<T, Refusal> {
    let store = console.store.clone();
    match tokio::task::spawn_blocking(move || f(&mut store.locked())).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Refusal::Domain(e)),
        Err(_) => Err(Refusal::Unavailable(
            (StatusCode::INTERNAL_SERVER_ERROR, "the store is unavailable").into_response(),
        )),
    }
}

/// The signed-in person and the communication caller their key maps to.
pub(super) struct Person {
    /// The console session and API-key principal.
    pub(super) caller: SignedIn,
    /// The key's communication principal and scopes.
    pub(super) talker: Talker,
}

/// The signed-in person for a page that needs `scope`, or the page saying why not (sign-in
/// redirect, or `403` naming what the key cannot do).
pub(super) async fn person(
    console: &Arc<Console>,
    headers: &HeaderMap,
    scope: Scope,
    what: &str,
) -> Result<Person, Response> {
    let caller = caller(console, headers, true).await?;
    let talker = api_key_caller(&caller.principal);
    if talker.has(scope) {
        Ok(Person { caller, talker })
    } else {
        let text = format!(
            "This key cannot {what}: it does not hold communication:{}.",
            scope.as_str()
        );
        Err((
            StatusCode::FORBIDDEN,
            html(pages::message(Some(caller.who()), "Not allowed", &text)),
        )
            .into_response())
    }
}

/// The signed-in person polling a live region: a session (`401` without one) and
/// `communication:read` (`403` without it).
pub(super) async fn live_reader(console: &Arc<Console>, headers: &HeaderMap) -> Result<Person, Response> {
    let caller = caller(console, headers, false).await?;
    let talker = api_key_caller(&caller.principal);
    if talker.has(Scope::Read) {
        Ok(Person { caller, talker })
    } else {
        Err((StatusCode::FORBIDDEN, "this key does not hold communication:read").into_response())
    }
}

/// The signed-in person behind a state-changing form: a session (`401` without one), the
/// session's CSRF token (`403` without it) and `communication:manage` (`403` without it).
pub(super) async fn poster(console: &Arc<Console>, headers: &HeaderMap, csrf: &str) -> Result<Person, Response> {
    let caller = caller(console, headers, false).await?;
    if !session::csrf_matches(&caller.session, csrf) {
        return Err((StatusCode::FORBIDDEN, "stale or missing form token; reload the page").into_response());
    }
    let talker = api_key_caller(&caller.principal);
    if !talker.has(Scope::Manage) {
        let text = "This key cannot start conversations or post: it does not hold communication:manage.";
        return Err((
            StatusCode::FORBIDDEN,
            html(pages::message(Some(caller.who()), "Not allowed", text)),
        )
            .into_response());
    }
    Ok(Person { caller, talker })
}

/// The `404` page for a conversation or agent that is missing or outside the key's reach.
pub(super) fn not_found(who: &SignedIn, what: &str) -> Response {
    let text = format!("No such {what}.");
    (
        StatusCode::NOT_FOUND,
        html(pages::message(Some(who.who()), "Not found", &text)),
    )
        .into_response()
}

/// The page for a refusal no handler treats specially.
pub(super) fn refused(who: &SignedIn, what: &str, refusal: Refusal) -> Response {
    let e = match refusal {
        Refusal::Domain(e) => e,
        Refusal::Unavailable(r) => return r,
    };
    let (status, title) = match &e {
        ConversationError::AgentNotFound(_)
        | ConversationError::ConversationNotFound(_)
        | ConversationError::MessageNotFound(_) => return not_found(who, what),
        ConversationError::MissingScope(_) => (StatusCode::FORBIDDEN, "Not allowed"),
        ConversationError::InvalidInput { .. } => (StatusCode::BAD_REQUEST, "Bad request"),
        ConversationError::ConversationClosed(_)
        | ConversationError::IdempotencyConflict { .. }
        | ConversationError::LimitReached { .. } => (StatusCode::CONFLICT, "Not done"),
        _ => {
            tracing::error!("console conversation call failed: {e}");
            return (StatusCode::INTERNAL_SERVER_ERROR, "the store failed").into_response();
        }
    };
    (status, html(pages::message(Some(who.who()), title, &e.to_string()))).into_response()
}

/// A fresh idempotency key for one rendering of a form, so that submitting that form twice
/// (a double click, a resent POST) creates or posts once.
pub(super) fn form_key() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    format!("console-{}", hex::encode(bytes))
}
