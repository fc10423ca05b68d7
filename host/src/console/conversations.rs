//! The conversations pages — the conversation protocol's chat panel: the list of the signed-in key's
//! conversations (`/console/conversations`), and one conversation (`/console/conversations/{id}`)
//! with its ordered transcript, each message's provenance (the human participant, or the agent
//! with the exact endpoint and controller generation it posted through), reply-to links, and a
//! form that posts as the human.
//!
//! **Provenance is what the store proves.** An agent's message says "replied from its sandbox"
//! only when its author endpoint is host-held ([`Store::host_held_endpoints`]): the store admits
//! no caller but the host through such an endpoint, so the message can only have come from the
//! agent's own turn in its sandbox. A message posted through an endpoint a client attached says
//! so ("posted through a client's endpoint"), whoever the client was.
//!
//! Message bodies are untrusted (any key holder or agent wrote them): they are only ever
//! interpolated as maud-escaped element text, never into an attribute or a script, under the
//! console's strict Content-Security-Policy.
//!
//! The transcript is a live region. Messages are append-only, so its version is computed from
//! the conversation's head (message count, state, participants' card revisions) without reading
//! the transcript: a poll of an unchanged conversation answers `204` after one short read.

use std::collections::HashSet;
use std::sync::Arc;

use ahp_store::conversation::bounds::{MAX_MESSAGE_BODY_BYTES, MAX_PAGE_LIMIT};
use ahp_store::conversation::{
    Acting, Agent, Author, CONVERSATION_ID_PREFIX, Caller as Talker, Conversation, ConversationError,
    ConversationResult, ConversationState, IdempotencyKey, NewMessage, Scope, TranscriptMessage,
};
use ahp_store::{Principal, Store, Timestamp};
use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::communication::{Cursor, Refusal, form_key, live_reader, not_found, person, poster, refused, talk};
use super::pages::{LIVE_POLL_MS, age, layout};
use super::{Console, MAX_FORM_BYTES, live};

/// Most conversations one page lists; the rest are a "next page" link away.
pub const CONVERSATIONS_PER_PAGE: usize = 100;
/// Most messages a conversation page shows at once (the newest ones unless the person pages
/// back): one bounded store read, and what the live region re-renders when a message arrives.
pub const TRANSCRIPT_WINDOW: usize = MAX_PAGE_LIMIT;
/// Largest post-message form body: a body at the store's bound with every byte
/// percent-encoded (three bytes each), plus the form's tokens.
pub const MAX_MESSAGE_FORM_BYTES: usize = 3 * MAX_MESSAGE_BODY_BYTES + MAX_FORM_BYTES;

/// `GET /console/conversations`.
pub(super) async fn conversations(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Query(cursor): Query<Cursor>,
) -> Response {
    let p = match person(&console, &headers, Scope::Read, "read conversations").await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let after = cursor.after();
    let (talker, a) = (p.talker.clone(), after.clone());
    match talk(&console, move |s| list(s, &talker, a.as_deref())).await {
        Ok((rows, more, now)) => super::html(conversations_page(p.caller.who(), &rows, after.as_deref(), more, now)),
        Err(e) => refused(&p.caller, "conversation", e),
    }
}

/// `GET /console/conversations/live`: the conversations table's rows.
pub(super) async fn conversations_live(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Query(cursor): Query<Cursor>,
) -> Response {
    let p = match live_reader(&console, &headers).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let talker = p.talker.clone();
    match talk(&console, move |s| list(s, &talker, cursor.after().as_deref())).await {
        Ok((rows, _, now)) => live(conversation_rows(&rows, now)),
        Err(e) => refused(&p.caller, "conversation", e),
    }
}

/// A page of the caller's conversations after `after`, whether more follow, and the time.
fn list(
    s: &mut Store,
    talker: &Talker,
    after: Option<&str>,
) -> ConversationResult<(Vec<Conversation>, bool, Timestamp)> {
    let mut rows = s.list_conversations(talker, after, CONVERSATIONS_PER_PAGE + 1)?;
    let more = rows.len() > CONVERSATIONS_PER_PAGE;
    rows.truncate(CONVERSATIONS_PER_PAGE);
    Ok((rows, more, s.now()))
}

/// Which part of a transcript a page shows.
#[derive(Deserialize)]
pub(super) struct Window {
    /// Show the messages after this seq; without it, the newest [`TRANSCRIPT_WINDOW`].
    after: Option<u64>,
}

/// What a conversation page shows: the conversation, its participants' cards, and one window
/// of its transcript.
#[derive(Debug, Clone)]
pub struct TranscriptView {
    /// The conversation.
    pub conversation: Conversation,
    /// Its agent participants, in join order.
    pub agents: Vec<Agent>,
    /// The window shows messages with seq greater than this.
    pub after: u64,
    /// Whether the window was asked for explicitly (`?after=`) rather than "the newest".
    pub pinned: bool,
    /// The window's messages, oldest first.
    pub messages: Vec<TranscriptMessage>,
    /// The author endpoints among them that are host-held: their messages came from the
    /// agent's turn in its sandbox (see the [module docs](self)).
    pub host_held: HashSet<String>,
    /// The transcript live region's version for this window, so the first poll of a freshly
    /// rendered page is already a `204`.
    pub version: String,
}

/// A conversation's head: what the page shows above the transcript, and the transcript live
/// region's version.
struct Head {
    conversation: Conversation,
    agents: Vec<Agent>,
    version: String,
}

/// The conversation and its participants as the human sees them, and the live region's
/// version for `window` (which changes exactly when the rendered transcript would).
fn head(s: &mut Store, talker: &Talker, id: &str, window: Option<u64>) -> ConversationResult<Head> {
    let conversation = s.get_conversation(talker, &Acting::Human, id)?;
    let agents = conversation
        .agents
        .iter()
        .map(|a| s.get_agent(talker, a))
        .collect::<ConversationResult<Vec<_>>>()?;
    let mut facts = format!("{window:?}|{}|{}", conversation.message_count, conversation.state);
    for a in &agents {
        facts.push_str(&format!("|{}@{}", a.id, a.profile_revision));
    }
    let version = hex::encode(&Sha256::digest(facts.as_bytes())[..8]);
    Ok(Head {
        conversation,
        agents,
        version,
    })
}

/// Reads the window of the transcript the page shows under `head`.
fn view(s: &mut Store, talker: &Talker, head: Head, window: Option<u64>) -> ConversationResult<TranscriptView> {
    let newest = head.conversation.message_count.saturating_sub(TRANSCRIPT_WINDOW as u64);
    let after = window.unwrap_or(newest);
    let messages = s.read_transcript(talker, &Acting::Human, &head.conversation.id, after, TRANSCRIPT_WINDOW)?;
    let authors: Vec<&str> = messages
        .iter()
        .filter_map(|m| match &m.author {
            Author::Agent { endpoint_id, .. } => Some(endpoint_id.as_str()),
            Author::Human => None,
        })
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let host_held = s.host_held_endpoints(&authors)?;
    Ok(TranscriptView {
        conversation: head.conversation,
        agents: head.agents,
        after,
        pinned: window.is_some(),
        messages,
        host_held,
        version: head.version,
    })
}

/// What a conversation page shows — the conversation `id` as `talker`'s human participant sees
/// it, and the transcript `window` (the newest [`TRANSCRIPT_WINDOW`] messages for `None`) — in
/// the reads `GET /console/conversations/{id}` makes.
///
/// # Errors
///
/// The store's refusals: not found (foreign or missing), missing scope, bad input.
pub fn read_view(s: &mut Store, talker: &Talker, id: &str, window: Option<u64>) -> ConversationResult<TranscriptView> {
    let head = head(s, talker, id, window)?;
    view(s, talker, head, window)
}

/// `GET /console/conversations/{id}`.
pub(super) async fn conversation(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(window): Query<Window>,
) -> Response {
    let p = match person(&console, &headers, Scope::Read, "read conversations").await {
        Ok(p) => p,
        Err(r) => return r,
    };
    if !ahp_store::id::is_well_formed(&id, CONVERSATION_ID_PREFIX) {
        return not_found(&p.caller, "conversation");
    }
    let talker = p.talker.clone();
    match talk(&console, move |s| read_view(s, &talker, &id, window.after)).await {
        Ok(v) => {
            let form = p.talker.has(Scope::Manage).then(PostDraft::default);
            super::html(conversation_page(p.caller.who(), &v, form.as_ref()))
        }
        Err(e) => refused(&p.caller, "conversation", e),
    }
}

/// `GET /console/conversations/{id}/live`: the transcript, or `204` when the poller's
/// `X-Live-Version` is still current.
pub(super) async fn transcript_live(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(window): Query<Window>,
) -> Response {
    let p = match live_reader(&console, &headers).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    if !ahp_store::id::is_well_formed(&id, CONVERSATION_ID_PREFIX) {
        return (StatusCode::NOT_FOUND, "no such conversation").into_response();
    }
    let seen = headers
        .get("x-live-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let talker = p.talker.clone();
    let result = talk(&console, move |s| {
        let head = head(s, &talker, &id, window.after)?;
        if seen.as_deref() == Some(head.version.as_str()) {
            return Ok((head.version, None));
        }
        Ok((head.version.clone(), Some(view(s, &talker, head, window.after)?)))
    })
    .await;
    let (version, view) = match result {
        Ok(v) => v,
        Err(Refusal::Domain(ConversationError::ConversationNotFound(_))) => {
            return (StatusCode::NOT_FOUND, "no such conversation").into_response();
        }
        Err(e) => return refused(&p.caller, "conversation", e),
    };
    let mut r = match view {
        Some(v) => Html(transcript(&v).into_string()).into_response(),
        None => StatusCode::NO_CONTENT.into_response(),
    };
    r.headers_mut()
        .insert("x-live-version", HeaderValue::from_str(&version).expect("hex"));
    r
}

/// The post-message form.
#[derive(Deserialize)]
pub(super) struct PostForm {
    csrf: String,
    idempotency: String,
    body: String,
}

/// `POST /console/conversations/{id}/messages`: posts the body as the conversation's human
/// participant and sends the browser back to the conversation, at the new message. Bad input
/// shows the page again with the error and the text as typed; nothing is posted.
pub(super) async fn post_message(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<PostForm>,
) -> Response {
    let p = match poster(&console, &headers, &form.csrf).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    if !ahp_store::id::is_well_formed(&id, CONVERSATION_ID_PREFIX) {
        return not_found(&p.caller, "conversation");
    }
    // Browsers submit a textarea's line breaks as CRLF; the transcript stores plain newlines.
    let body = form.body.replace("\r\n", "\n");
    let new = NewMessage {
        conversation: id.clone(),
        acting: Acting::Human,
        body: body.clone(),
        reply_to: None,
        idempotency: IdempotencyKey::Key(form.idempotency),
    };
    let talker = p.talker.clone();
    let carriers = console.carriers.clone();
    // The post operation (the one post path): it schedules the agents the post woke, on
    // `talk`'s blocking thread.
    let posting = move |s: &mut Store| crate::ops::Conversations::new(s, carriers.as_ref()).post(&talker, &new);
    let refusal = match talk(&console, posting).await {
        Ok(posted) => {
            return Redirect::to(&format!("/console/conversations/{id}#{}", posted.value.id)).into_response();
        }
        Err(Refusal::Domain(e)) => e,
        Err(e) => return refused(&p.caller, "conversation", e),
    };
    let status = match &refusal {
        ConversationError::InvalidInput { .. } => StatusCode::BAD_REQUEST,
        ConversationError::ConversationClosed(_)
        | ConversationError::IdempotencyConflict { .. }
        | ConversationError::LimitReached { .. } => StatusCode::CONFLICT,
        _ => return refused(&p.caller, "conversation", Refusal::Domain(refusal)),
    };
    let error = match refusal {
        ConversationError::IdempotencyConflict { .. } => {
            "Not posted: this form was already sent with other text. Post it again from here.".to_owned()
        }
        e => format!("Not posted: {e}."),
    };
    let draft = PostDraft {
        body,
        error: Some(error),
    };
    let talker = p.talker.clone();
    match talk(&console, move |s| read_view(s, &talker, &id, None)).await {
        Ok(v) => (status, super::html(conversation_page(p.caller.who(), &v, Some(&draft)))).into_response(),
        Err(e) => refused(&p.caller, "conversation", e),
    }
}

/// The post form's state: what was typed, and why the last attempt was refused.
#[derive(Debug, Clone, Default)]
pub struct PostDraft {
    /// The text the form shows (empty for a fresh form).
    pub body: String,
    /// Why the last post was refused.
    pub error: Option<String>,
}

/// The conversations list page.
pub fn conversations_page(
    who: (&Principal, &str),
    rows: &[Conversation],
    after: Option<&str>,
    more: bool,
    now: Timestamp,
) -> Markup {
    let live = match after {
        Some(a) => format!("/console/conversations/live?after={a}"),
        None => "/console/conversations/live".to_owned(),
    };
    layout(
        "Conversations",
        Some(who),
        html! {
            h1 { "Conversations" }
            p.muted { "Start one from an agent's card on the " a href="/console/agents" { "Agents" } " page." }
            table.conversations {
                thead { tr { th { "Title" } th { "State" } th { "Agents" } th { "Messages" } th { "Last message" } th { "Started" } } }
                tbody #live data-live=(live) data-every=(LIVE_POLL_MS) { (conversation_rows(rows, now)) }
            }
            @if more {
                @if let Some(last) = rows.last() {
                    p { a.next href=(format!("/console/conversations?after={}", last.id)) { "Next page →" } }
                }
            }
        },
    )
}

/// The rows of the conversations table (the live region's content).
pub fn conversation_rows(rows: &[Conversation], now: Timestamp) -> Markup {
    html! {
        @if rows.is_empty() {
            tr { td colspan="6" .muted { "No conversations." } }
        }
        @for c in rows {
            tr data-state=(c.state) {
                td { a href=(format!("/console/conversations/{}", c.id)) { (c.title) } }
                td { span class=(format!("badge {}", c.state)) { (c.state) } }
                td { @for a in &c.agents { code { (a) } " " } }
                td { (c.message_count) }
                td { @if let Some(at) = c.last_message_at { (age(at, now)) " ago" } @else { span.muted { "—" } } }
                td { (age(c.created_at, now)) " ago" }
            }
        }
    }
}

/// A conversation's page: its facts, the live transcript, and the post form (`form` is `None`
/// when the key cannot post).
pub fn conversation_page(who: (&Principal, &str), v: &TranscriptView, form: Option<&PostDraft>) -> Markup {
    let c = &v.conversation;
    let live = if v.pinned {
        format!("/console/conversations/{}/live?after={}", c.id, v.after)
    } else {
        format!("/console/conversations/{}/live", c.id)
    };
    layout(
        &c.title,
        Some(who),
        html! {
            p { a href="/console/conversations" { "← Conversations" } }
            h1 { (c.title) }
            dl.facts {
                dt { "Conversation" } dd { code { (c.id) } }
                dt { "State" } dd { span class=(format!("badge {}", c.state)) { (c.state) } }
                dt { "Agents" }
                dd { @for a in &v.agents { (a.card.display_name) " " span.muted { "@" (a.card.handle) } " " code { (a.id) } br; } }
                dt { "Started" } dd { time datetime=(c.created_at) { (c.created_at) } }
            }
            section.transcript #live data-live=(live) data-every=(LIVE_POLL_MS) data-version=(v.version) { (transcript(v)) }
            @match form {
                Some(draft) if c.state == ConversationState::Open => { (post_form(who.1, &c.id, draft)) }
                Some(_) => { p.muted { "This conversation is closed." } }
                None => { p.muted { "This key holds no " code { "communication:manage" } ", so it cannot post." } }
            }
        },
    )
}

fn post_form(csrf: &str, id: &str, draft: &PostDraft) -> Markup {
    html! {
        form.post method="post" action=(format!("/console/conversations/{id}/messages")) {
            @if let Some(error) = &draft.error { p.error role="alert" { (error) } }
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="idempotency" value=(form_key());
            label for="body" { "Message, as the human" }
            textarea #body name="body" rows="4" required maxlength=(MAX_MESSAGE_BODY_BYTES) { (draft.body) }
            button type="submit" { "Post" }
        }
    }
}

/// The transcript window (the live region's content): each message with its provenance (for
/// an agent's, whether it came from its sandbox: see the [module docs](self)), time and
/// reply-to link, and links to the messages before and after the window.
pub fn transcript(v: &TranscriptView) -> Markup {
    let c = &v.conversation;
    let count = c.message_count;
    let shown_to = v.messages.last().map_or(v.after, |m| m.seq);
    let name = |agent: &str| {
        v.agents
            .iter()
            .find(|a| a.id == agent)
            .map(|a| a.card.display_name.as_str())
    };
    let seq_of = |id: &str| v.messages.iter().find(|m| m.id == id).map(|m| m.seq);
    html! {
        h2 { "Transcript " span.muted #message-count { "(" (count) ")" } }
        @if v.after > 0 {
            p { a.earlier href=(format!("/console/conversations/{}?after={}", c.id, v.after.saturating_sub(TRANSCRIPT_WINDOW as u64))) { "← Earlier messages" } }
        }
        @if v.messages.is_empty() {
            p.muted { "No messages yet." }
        }
        ol.transcript {
            @for m in &v.messages {
                @let kind = match m.author { Author::Human => "human", Author::Agent { .. } => "agent" };
                li class=(format!("message {kind}")) id=(m.id) data-seq=(m.seq) {
                    div.meta {
                        @match &m.author {
                            Author::Human => { span.author { "Human" } }
                            Author::Agent { agent_id, endpoint_id, generation } => {
                                span.author { (name(agent_id).unwrap_or("Agent")) }
                                " " span.provenance {
                                    @if v.host_held.contains(endpoint_id) {
                                        span.origin.sandbox { "replied from its sandbox" } ", "
                                    } @else {
                                        span.origin.client { "posted through a client's endpoint" } ", "
                                    }
                                    "agent " code { (agent_id) } " via " code { (endpoint_id) } " · generation " (generation)
                                }
                            }
                        }
                        " · " a.seq href=(format!("#{}", m.id)) { "#" (m.seq) }
                        " · " time datetime=(m.created_at) { (m.created_at) }
                        @if let Some(target) = &m.reply_to {
                            " · " a.reply-to href=(format!("#{target}")) {
                                "in reply to " @if let Some(seq) = seq_of(target) { "#" (seq) } @else { code { (target) } }
                            }
                        }
                    }
                    div.body { (m.body) }
                }
            }
        }
        @if shown_to < count {
            p { a.later href=(format!("/console/conversations/{}?after={}", c.id, shown_to)) { "Later messages →" } }
        }
    }
}
