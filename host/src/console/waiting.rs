//! An agent's waiting messages on its page (`/console/agents/{id}`): the deliveries queued in
//! its inbox, oldest first, each with its tries — how many turns read it and ended without
//! answering it — and, for a key that holds `communication:manage`, a form that skips one
//! (`POST /console/agents/{id}/skip`): a message the agent keeps failing on is consumed without
//! an answer, audited as skipped, and the agent's next turn goes on with the ones after it.
//!
//! Read and written as the signed-in key's communication principal, the agent's owner: an agent
//! outside the key's reach is the same `404` as a missing one. Every value is escaped by maud.

use std::sync::Arc;

use ahp_store::Timestamp;
use ahp_store::conversation::Delivery;
use axum::Form;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::Console;
use super::communication::{not_found, poster, refused, talk};
use super::pages::age;

/// Most waiting messages the agent's page shows (the oldest: the one an agent is stuck on is
/// first); the section says when there are more.
pub const WAITING_SHOWN: usize = 50;

/// The form that skips one waiting message.
#[derive(Deserialize)]
pub(super) struct SkipForm {
    csrf: String,
    message: String,
}

/// `POST /console/agents/{id}/skip`: skips the message the form names and sends the browser
/// back to the agent's page.
pub(super) async fn skip(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(agent): Path<String>,
    Form(form): Form<SkipForm>,
) -> Response {
    let p = match poster(&console, &headers, &form.csrf).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    if !ahp_store::id::is_well_formed(&agent, ahp_store::conversation::AGENT_ID_PREFIX) {
        return not_found(&p.caller, "agent");
    }
    let talker = p.talker.clone();
    let page = format!("/console/agents/{agent}");
    match talk(&console, move |s| s.skip_delivery(&talker, &agent, &form.message)).await {
        Ok(_) => Redirect::to(&page).into_response(),
        Err(e) => refused(&p.caller, "message", e),
    }
}

/// The waiting messages section: `waiting` (at most [`WAITING_SHOWN`] + 1 read, the extra one
/// only saying there are more), with a skip form each when `csrf` is given.
pub fn waiting(agent: &str, waiting: &[Delivery], csrf: Option<&str>, now: Timestamp) -> Markup {
    let more = waiting.len() > WAITING_SHOWN;
    html! {
        h2 { "Messages waiting" }
        @if waiting.is_empty() {
            p.muted { "No message waits: every one was answered or handled." }
        } @else {
            table.waiting {
                thead { tr { th { "Message" } th { "Conversation" } th { "Tries" } th { "Waiting" } th { "Body" } @if csrf.is_some() { th {} } } }
                tbody {
                    @for d in waiting.iter().take(WAITING_SHOWN) {
                        tr id=(d.message.id) data-tries=(d.tries) {
                            td { code { (d.message.id) } }
                            td { a href=(format!("/console/conversations/{}", d.message.conversation_id)) { code { (d.message.conversation_id) } } }
                            td.tries { (d.tries) }
                            td { (age(d.created_at, now)) }
                            td.body { (d.message.body) }
                            @if let Some(csrf) = csrf {
                                td {
                                    form.skip method="post" action=(format!("/console/agents/{agent}/skip")) {
                                        input type="hidden" name="csrf" value=(csrf);
                                        input type="hidden" name="message" value=(d.message.id);
                                        button type="submit" title="Consume it without an answer: the agent goes on with the next" { "Skip" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if more { p.muted { "More wait after these." } }
        }
    }
}
