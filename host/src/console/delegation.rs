//! An agent's page (`/console/agents/{id}`): its Agent Card and its delegation — the tasks it is
//! assigned and the tasks it created, its waits and the goals it controls or created — as a live
//! region (`/console/agents/{id}/live`) that `console.js` polls like the transcript.
//!
//! Read as the signed-in key's communication principal acting as the human owner, so the page
//! shows exactly what `list_agent_tasks`, `read_agent_wait` and `get_goal` show that key. Every
//! row carries its provenance: a task's creator (an agent, or the owner), assignee, goal and its
//! current attempt with the attempt's endpoint generation and wake; a wait's sources with their
//! states and the wake it fired. Every value is escaped by maud. An agent outside the key's reach
//! and a missing one get the same `404`.

use std::sync::Arc;

use ahp_store::conversation::{Acting, Agent, Caller as Talker, ConversationResult, Delivery, Scope};
use ahp_store::delegation::{AgentTask, AgentWait, Goal, StepStatus, TaskQuery};
use ahp_store::{Principal, Store, Timestamp};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use maud::{Markup, html};

use super::communication::{live_reader, not_found, person, refused, talk};
use super::pages::{LIVE_POLL_MS, age, layout};
use super::{Console, live};

/// Most rows of each section (tasks assigned, tasks created, waits, goals): the newest are not
/// hidden behind older ones only because ids are random; the section says when it is full.
pub const ROWS_PER_SECTION: usize = 50;

/// Most goals of the principal looked through for the agent's (a principal holds at most
/// [`MAX_ACTIVE_GOALS_PER_PRINCIPAL`](ahp_store::delegation::bounds::MAX_ACTIVE_GOALS_PER_PRINCIPAL)
/// active goals; closed ones beyond this are not shown).
const GOALS_SCANNED: usize = 1000;

/// What an agent's delegation section shows.
#[derive(Debug, Clone)]
pub struct DelegationView {
    /// The agent.
    pub agent: Agent,
    /// Tasks assigned to it.
    pub assigned: Vec<AgentTask>,
    /// Tasks it created.
    pub created: Vec<AgentTask>,
    /// Its waits.
    pub waits: Vec<AgentWait>,
    /// Goals it controls or created.
    pub goals: Vec<Goal>,
    /// The deliveries queued in its inbox, oldest first (at most
    /// [`WAITING_SHOWN`](super::waiting::WAITING_SHOWN) + 1).
    pub waiting: Vec<Delivery>,
    /// When this was read.
    pub now: Timestamp,
}

/// Reads the delegation of `agent` as `talker`'s human owner.
///
/// # Errors
///
/// [`AgentNotFound`](ahp_store::conversation::ConversationError::AgentNotFound) for an agent
/// the principal does not own (or none); [`MissingScope`](ahp_store::conversation::ConversationError::MissingScope).
pub fn read_view(s: &mut Store, talker: &Talker, agent: &str) -> ConversationResult<DelegationView> {
    let agent = s.get_agent(talker, agent)?;
    let by = |assignee: bool| TaskQuery {
        assignee: assignee.then(|| agent.id.clone()),
        creator: (!assignee).then(|| agent.id.clone()),
        ..TaskQuery::default()
    };
    let assigned = s.list_agent_tasks(talker, &Acting::Human, &by(true), ROWS_PER_SECTION)?;
    let created = s.list_agent_tasks(talker, &Acting::Human, &by(false), ROWS_PER_SECTION)?;
    let waits = s.list_agent_waits(talker, &Acting::Human, Some(&agent.id), None, ROWS_PER_SECTION)?;
    let mut goals = Vec::new();
    let mut after: Option<String> = None;
    let page = ahp_store::delegation::bounds::MAX_PAGE_LIMIT;
    for _ in 0..GOALS_SCANNED.div_ceil(page) {
        let list = s.list_goals(talker, &Acting::Human, after.as_deref(), page)?;
        let full = list.len() == page;
        after = list.last().map(|g| g.id.clone());
        let mine = |g: &Goal| {
            g.controller_agent_id.as_ref() == Some(&agent.id) || g.creator_agent_id.as_ref() == Some(&agent.id)
        };
        goals.extend(list.into_iter().filter(mine));
        if !full || goals.len() >= ROWS_PER_SECTION {
            break;
        }
    }
    goals.truncate(ROWS_PER_SECTION);
    let waiting = s.queued_deliveries(talker, &agent.id, 0, super::waiting::WAITING_SHOWN + 1)?;
    Ok(DelegationView {
        agent,
        assigned,
        created,
        waits,
        goals,
        waiting,
        now: s.now(),
    })
}

/// `GET /console/agents/{id}`.
pub(super) async fn agent(State(console): State<Arc<Console>>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let p = match person(&console, &headers, Scope::Read, "read agents").await {
        Ok(p) => p,
        Err(r) => return r,
    };
    if !ahp_store::id::is_well_formed(&id, ahp_store::conversation::AGENT_ID_PREFIX) {
        return not_found(&p.caller, "agent");
    }
    let talker = p.talker.clone();
    match talk(&console, move |s| read_view(s, &talker, &id)).await {
        Ok(v) => {
            let manage = p.talker.has(Scope::Manage);
            super::html(agent_page(p.caller.who(), &v, manage))
        }
        Err(e) => refused(&p.caller, "agent", e),
    }
}

/// `GET /console/agents/{id}/live`: the delegation section.
pub(super) async fn agent_live(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let p = match live_reader(&console, &headers).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    if !ahp_store::id::is_well_formed(&id, ahp_store::conversation::AGENT_ID_PREFIX) {
        return not_found(&p.caller, "agent");
    }
    let talker = p.talker.clone();
    match talk(&console, move |s| read_view(s, &talker, &id)).await {
        Ok(v) => live(delegation(&v)),
        Err(e) => refused(&p.caller, "agent", e),
    }
}

/// An agent's page: its card, the messages waiting for it (with a skip form each when `manage`)
/// and the live delegation section.
pub fn agent_page(who: (&Principal, &str), v: &DelegationView, manage: bool) -> Markup {
    let a = &v.agent;
    layout(
        &a.card.display_name,
        Some(who),
        html! {
            p { a href="/console/agents" { "← Agents" } }
            h1 { (a.card.display_name) " " span.handle { "@" (a.card.handle) } }
            @if !a.card.description.is_empty() { p.description { (a.card.description) } }
            dl.facts {
                dt { "Agent" } dd { code { (a.id) } }
                dt { "Controller generation" } dd { (a.controller_generation) }
                dt { "Created" } dd { (age(a.created_at, v.now)) " ago" }
            }
            section.waiting { (super::waiting::waiting(&a.id, &v.waiting, manage.then_some(who.1), v.now)) }
            section.delegation #live data-live=(format!("/console/agents/{}/live", a.id)) data-every=(LIVE_POLL_MS) {
                (delegation(v))
            }
        },
    )
}

/// Who created a task or goal: an agent (linked), or the owner as a human.
fn creator(agent: Option<&String>) -> Markup {
    html! {
        @match agent {
            Some(a) => a href=(format!("/console/agents/{a}")) { code { (a) } },
            None => span.muted { "the owner" },
        }
    }
}

/// The delegation section (the live region's content).
pub fn delegation(v: &DelegationView) -> Markup {
    html! {
        h2 { "Tasks assigned to it" }
        (tasks(&v.assigned, v.now, "No tasks assigned."))
        h2 { "Tasks it created" }
        (tasks(&v.created, v.now, "No tasks created."))
        h2 { "Waits" }
        @if v.waits.is_empty() {
            p.muted { "No waits." }
        } @else {
            table.waits {
                thead { tr { th { "Wait" } th { "Mode" } th { "State" } th { "Sources" } th { "Goal" } th { "Wake" } th { "Registered" } } }
                tbody {
                    @for w in &v.waits {
                        tr id=(w.id) data-state=(w.state) {
                            td { code { (w.id) } }
                            td { (w.mode) }
                            td { (w.state) }
                            td.sources {
                                @for s in &w.sources {
                                    span.source data-state=(s.task_state) { code { (s.task_id) } " " (s.task_state) } " "
                                }
                            }
                            td { @if let Some(g) = &w.goal_id { code { (g) } } @else { "-" } }
                            td { @if let Some(k) = &w.wake_id { code.wake { (k) } } @else { span.muted { "not fired" } } }
                            td { (age(w.created_at, v.now)) " ago" }
                        }
                    }
                }
            }
        }
        h2 { "Goals it controls or created" }
        @if v.goals.is_empty() {
            p.muted { "No goals." }
        } @else {
            table.goals {
                thead { tr { th { "Goal" } th { "Title" } th { "State" } th { "Revision" } th { "Plan" } th { "Controller" } th { "Creator" } } }
                tbody {
                    @for g in &v.goals {
                        tr id=(g.id) data-state=(g.state) {
                            td { code { (g.id) } }
                            td { (g.title) }
                            td { (g.state) }
                            td { (g.revision) }
                            td {
                                ol.plan { @for s in &g.plan { li data-status=(s.status) { (s.title) @if s.status != StepStatus::Pending { " (" (s.status) ")" } } } }
                            }
                            td { (creator(g.controller_agent_id.as_ref())) }
                            td { (creator(g.creator_agent_id.as_ref())) }
                        }
                    }
                }
            }
        }
    }
}

fn tasks(tasks: &[AgentTask], now: Timestamp, empty: &str) -> Markup {
    html! {
        @if tasks.is_empty() {
            p.muted { (empty) }
        } @else {
            table.tasks {
                thead { tr { th { "Task" } th { "Title" } th { "State" } th { "Creator" } th { "Assignee" } th { "Goal" } th { "Attempt" } th { "Result" } th { "Created" } } }
                tbody {
                    @for t in tasks {
                        tr id=(t.id) data-state=(t.state) {
                            td { code { (t.id) } }
                            td { (t.title) }
                            td { (t.state) }
                            td { (creator(t.creator_agent_id.as_ref())) }
                            td { a href=(format!("/console/agents/{}", t.assignee_agent_id)) { code { (t.assignee_agent_id) } } }
                            td { @if let Some(g) = &t.goal_id { code { (g) } } @else { "-" } }
                            td.attempt {
                                @if let Some(a) = &t.current_attempt {
                                    code { (a.id) } " #" (a.number) " · " (a.state) " · generation " (a.generation) " · wake " code.wake { (a.wake_id) }
                                } @else {
                                    span.muted { "none" }
                                }
                            }
                            td.result { @if let Some(r) = &t.result { (r) } @else { "-" } }
                            td { (age(t.created_at, now)) " ago" }
                        }
                    }
                }
            }
        }
    }
}
