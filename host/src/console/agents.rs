//! The agents page (`/console/agents`): one card per agent of the signed-in key's communication
//! principal — its Agent Card, its current endpoint, its queued deliveries and whether it is
//! ready to be woken here — each with a form that starts a conversation with it, and a link to
//! the agent's own page ([`delegation`](super::delegation): its tasks, waits and goals).
//!
//! An agent is *ready* when it has a current, live endpoint and this process holds that
//! endpoint's wake carrier at its controller generation ([`Carriers::holds`]): only then does a
//! message to it wake a turn without anyone reattaching it. The card names the kind of carrier:
//! the agent's sandbox (push: a host runs its turns) or an MCP App card in a chat (pull: the
//! card asks the chat to run them, [`crate::app_views`]). A ready agent's card also says
//! whether its sandbox is *live* here or *parked* ([`Carriers::residency`]): a parked agent is
//! still ready, and its next turn starts a fresh sandbox.

use std::sync::Arc;

use ahp_store::conversation::{AgentListing, NewConversation, Scope};
use ahp_store::{Principal, Timestamp};
use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::Console;
use super::communication::{Cursor, Refusal, form_key, not_found, person, poster, refused, talk};
use super::pages::{age, layout};
use crate::carrier::{Carriers, Residency};

/// Most agents one page lists (a principal owns at most
/// [`MAX_AGENTS_PER_PRINCIPAL`](ahp_store::conversation::bounds::MAX_AGENTS_PER_PRINCIPAL));
/// the rest are a "next page" link away.
pub const AGENTS_PER_PAGE: usize = 100;

/// One agent card: the listing, and whether this host holds its carrier.
#[derive(Debug, Clone)]
pub struct AgentCardView {
    /// The agent, its current endpoint and its queued count.
    pub listing: AgentListing,
    /// Its current endpoint is live and this process holds that endpoint's wake carrier.
    pub ready: bool,
    /// For an agent this host carries: its sandbox is live here, or parked.
    pub sandbox: Option<Residency>,
}

impl AgentCardView {
    /// The card for `listing`, asking `carriers` about its current endpoint.
    pub fn new(listing: AgentListing, carriers: &dyn Carriers) -> Self {
        let endpoint = listing.current_endpoint.as_ref();
        let ready = endpoint.is_some_and(|e| carriers.holds(e));
        let sandbox = endpoint.and_then(|e| carriers.residency(e));
        Self {
            listing,
            ready,
            sandbox,
        }
    }
}

/// `GET /console/agents`.
pub(super) async fn agents(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Query(cursor): Query<Cursor>,
) -> Response {
    let p = match person(&console, &headers, Scope::Read, "read agents").await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let after = cursor.after();
    let talker = p.talker.clone();
    let page = talk(&console, move |s| {
        let mut rows = s.list_agent_listings(&talker, after.as_deref(), AGENTS_PER_PAGE + 1)?;
        let more = rows.len() > AGENTS_PER_PAGE;
        rows.truncate(AGENTS_PER_PAGE);
        Ok((rows, more, s.now()))
    })
    .await;
    match page {
        Ok((rows, more, now)) => {
            let cards: Vec<_> = rows
                .into_iter()
                .map(|l| AgentCardView::new(l, console.carriers.as_ref()))
                .collect();
            let forms = p.talker.has(Scope::Manage);
            super::html(agents_page(p.caller.who(), &cards, more, forms, now))
        }
        Err(e) => refused(&p.caller, "agent", e),
    }
}

/// The form that starts a conversation with one agent.
#[derive(Deserialize)]
pub(super) struct StartForm {
    csrf: String,
    idempotency: String,
    title: String,
}

/// `POST /console/agents/{id}/conversations`: starts a conversation with the agent, titled as
/// the form says, and sends the browser to it.
pub(super) async fn start_conversation(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(agent): Path<String>,
    Form(form): Form<StartForm>,
) -> Response {
    let p = match poster(&console, &headers, &form.csrf).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    if !ahp_store::id::is_well_formed(&agent, ahp_store::conversation::AGENT_ID_PREFIX) {
        return not_found(&p.caller, "agent");
    }
    let talker = p.talker.clone();
    let new = NewConversation {
        title: form.title,
        agents: vec![agent],
    };
    match talk(&console, move |s| {
        s.create_conversation(&talker, &new, &form.idempotency)
    })
    .await
    {
        Ok(created) => Redirect::to(&format!("/console/conversations/{}", created.value.id)).into_response(),
        Err(Refusal::Domain(e @ ahp_store::conversation::ConversationError::InvalidInput { .. })) => {
            let text = format!("Could not start the conversation: {e}.");
            let page = layout(
                "Not started",
                Some(p.caller.who()),
                html! {
                    h1 { "Not started" }
                    p.error role="alert" { (text) }
                    p { a href="/console/agents" { "← Agents" } }
                },
            );
            (StatusCode::BAD_REQUEST, super::html(page)).into_response()
        }
        Err(e) => refused(&p.caller, "agent", e),
    }
}

/// The agents page: a card per agent, and a link to the next page when there is one.
pub fn agents_page(
    who: (&Principal, &str),
    cards: &[AgentCardView],
    more: bool,
    forms: bool,
    now: Timestamp,
) -> Markup {
    layout(
        "Agents",
        Some(who),
        html! {
            h1 { "Agents" }
            @if cards.is_empty() {
                p.muted { "No agents yet. An agent appears here once it is created with this key (" code { "create_agent" } " on " code { "/mcp/conversations" } ") or a transfer of this key's owner is activated." }
            }
            @if !forms && !cards.is_empty() {
                p.muted { "This key holds no " code { "communication:manage" } ", so it cannot start conversations." }
            }
            div.cards {
                @for card in cards { (agent_card(who.1, card, forms, now)) }
            }
            @if more {
                @if let Some(last) = cards.last() {
                    p { a.next href=(format!("/console/agents?after={}", last.listing.agent.id)) { "Next page →" } }
                }
            }
        },
    )
}

/// Which kind of wake carrier the endpoint has: the push carrier (the agent's sandbox, whose
/// turns a host runs) or the pull carrier (an MCP App card in someone's chat, which asks that
/// chat to run the turn), or none.
fn carrier(e: &ahp_store::conversation::Endpoint) -> &'static str {
    if e.host_held {
        "its sandbox — a host runs its turns"
    } else if e.app_host_id.is_some() {
        "an MCP App card in a chat — the card asks the chat to run its turns"
    } else {
        "none — a message waits in its inbox until it reads it"
    }
}

fn agent_card(csrf: &str, card: &AgentCardView, form: bool, now: Timestamp) -> Markup {
    let l = &card.listing;
    let a = &l.agent;
    html! {
        article.agent id=(a.id) data-ready=(card.ready) {
            header {
                h2 { a href=(format!("/console/agents/{}", a.id)) { (a.card.display_name) } }
                span.handle { "@" (a.card.handle) }
                @if card.ready {
                    span.badge.ready { "ready — this host holds its carrier" }
                } @else {
                    span.badge.not-ready { "not ready" }
                }
                @if let Some(r) = card.sandbox {
                    span.badge.residency data-sandbox=(r.as_str()) {
                        @match r {
                            Residency::Live => "live — its sandbox is kept here",
                            Residency::Parked => "parked — its next turn starts a fresh sandbox",
                        }
                    }
                }
            }
            @if !a.card.description.is_empty() { p.description { (a.card.description) } }
            @if !a.card.specialties.is_empty() {
                ul.specialties { @for s in &a.card.specialties { li { (s) } } }
            }
            dl.facts {
                dt { "Agent" } dd { code { (a.id) } }
                dt { "Endpoint" }
                dd.endpoint {
                    @if let Some(e) = &l.current_endpoint {
                        code { (e.id) } " · " (e.state) " · generation " (e.generation)
                        " · lease until " time datetime=(e.lease_expires_at) { (e.lease_expires_at) }
                        " · " @if e.wake_capable { "wake-capable" } @else { "not wake-capable" }
                    } @else {
                        span.muted { "none attached (controller generation " (a.controller_generation) ")" }
                    }
                }
                dt { "Carrier" }
                dd.carrier {
                    @match l.current_endpoint.as_ref().map(carrier) {
                        Some(kind) => (kind),
                        None => span.muted { "none" },
                    }
                }
                dt { "Queued" } dd.queued { (l.queued_count) " deliveries" }
                dt { "Created" } dd { (age(a.created_at, now)) " ago" }
            }
            @if form {
                form.start method="post" action=(format!("/console/agents/{}/conversations", a.id)) {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="idempotency" value=(form_key());
                    label { "Title " input type="text" name="title" required maxlength=(ahp_store::conversation::bounds::MAX_TITLE_BYTES) placeholder="What about?"; }
                    button type="submit" { "Start a conversation" }
                }
            }
        }
    }
}
