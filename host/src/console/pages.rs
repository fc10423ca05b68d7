//! The console's HTML, rendered on the server with maud (every interpolated value is
//! HTML-escaped, so names, reasons and event details a guest or key holder wrote render as
//! text). No inline script or style: `console.js` and `console.css` are the only active parts.

use ahp_store::{
    ApiScope, Budget, Event, EventsPage, Principal, SnapshotSummary, SpendSample, Timestamp, Transfer, TransferStatus,
    TransferSummary,
};
use maud::{DOCTYPE, Markup, html};

use super::chart::{budget_chart, usd};

/// How often a live region polls, in milliseconds: well inside the eight-second cadence the conversation protocol asks of a live view.
pub const LIVE_POLL_MS: u32 = 2000;

/// Most events a transfer's page shows at once: the newest ones, or the ones before its
/// `?before=` cursor. A person reads a screenful; older pages are a link away, and the read
/// (and the live region every [`LIVE_POLL_MS`]) stays the same size however long the log grows.
pub const EVENTS_PER_PAGE: usize = 50;

/// What a transfer's page shows of it, each part one bounded read: the transfer and its
/// budget, one page of its event log and its spend curve.
#[derive(Debug, Clone)]
pub struct TransferView {
    /// The transfer.
    pub transfer: Transfer,
    /// Its budget, once provisioned.
    pub budget: Option<Budget>,
    /// The page of its event log shown.
    pub events: EventsPage,
    /// The page's cursor: events before this id (`None`: the newest).
    pub before: Option<i64>,
    /// Its spend curve, at most [`CHART_POINTS`](super::chart::CHART_POINTS) points.
    pub spend: Vec<SpendSample>,
}

/// The frame every page shares: head, navigation with sign-out, and `body`.
pub fn layout(title: &str, who: Option<(&Principal, &str)>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · ahp console" }
                link rel="stylesheet" href="/console/assets/console.css";
                script src="/console/assets/console.js" defer {}
            }
            body {
                header.top {
                    a.brand href="/console/transfers" { "ahp" }
                    @if let Some((principal, csrf)) = who {
                        nav {
                            a href="/console/transfers" { "Transfers" }
                            a href="/console/agents" { "Agents" }
                            a href="/console/conversations" { "Conversations" }
                        }
                        form.signout method="post" action="/console/sign-out" {
                            input type="hidden" name="csrf" value=(csrf);
                            span.who { (principal.name) }
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// The sign-in form; `error` says why the last attempt failed.
pub fn sign_in(error: Option<&str>) -> Markup {
    layout(
        "Sign in",
        None,
        html! {
            h1 { "Sign in" }
            p { "Paste an API key made with " code { "ahp principal add NAME --scope …" } "." }
            @if let Some(error) = error {
                p.error role="alert" { (error) }
            }
            form.signin method="post" action="/console/sign-in" {
                label for="key" { "API key" }
                input #key type="password" name="key" autocomplete="off" required maxlength="128";
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// A page saying the key lacks `scope`.
pub fn missing_scope(who: (&Principal, &str), scope: ApiScope) -> Markup {
    layout(
        "Not allowed",
        Some(who),
        html! {
            h1 { "Not allowed" }
            p.error { "This key does not hold " code { (scope) } "." }
        },
    )
}

/// Humane age: `42 s`, `5 min`, `3 h`, `2 d`.
pub fn age(then: Timestamp, now: Timestamp) -> String {
    let s = (now.as_micros() - then.as_micros()).max(0) / 1_000_000;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86_400 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86_400),
    }
}

fn status_badge(status: TransferStatus, activating: bool) -> Markup {
    html! {
        span class=(format!("badge {status}")) { (status) }
        @if activating { " " span.badge.activating { "activating" } }
    }
}

fn budget_bar(summary: &TransferSummary) -> Markup {
    html! {
        @if let Some(b) = summary.budget {
            meter min="0" max=(b.allocated_micro_usd) value=(b.spent_micro_usd.min(b.allocated_micro_usd))
                title=(format!("{} of {}", usd(b.spent_micro_usd), usd(b.allocated_micro_usd))) {}
            " " span.money { (usd(b.spent_micro_usd)) " / " (usd(b.allocated_micro_usd)) }
        } @else {
            span.muted { "—" }
        }
    }
}

/// The transfers list's filter values: every status, and "all".
fn status_filter(current: Option<TransferStatus>) -> Markup {
    html! {
        form.filter method="get" action="/console/transfers" {
            label for="status" { "Status" }
            select #status name="status" {
                option value="" selected[current.is_none()] { "all" }
                @for s in TransferStatus::ALL {
                    option value=(s) selected[current == Some(s)] { (s) }
                }
            }
            button type="submit" { "Filter" }
        }
    }
}

/// The rows of the transfers table (the live region's content).
pub fn transfer_rows(rows: &[TransferSummary], now: Timestamp) -> Markup {
    html! {
        @if rows.is_empty() {
            tr { td colspan="7" .muted { "No transfers." } }
        }
        @for row in rows {
            @let t = &row.transfer;
            tr data-status=(t.status) {
                td { a href=(format!("/console/transfers/{}", t.id)) { code { (t.id) } } }
                td { (status_badge(t.status, t.activating)) }
                td { (t.tier.map(|x| x.to_string()).unwrap_or_default()) }
                td.component { (t.component.as_deref().unwrap_or("")) }
                td { (budget_bar(row)) }
                td { @if let Some((kind, at)) = row.last_event { (kind) " " span.muted { (age(at, now)) " ago" } } }
                td { (age(t.created_at, now)) }
            }
        }
    }
}

/// The transfers page: filter, and the table whose body updates live.
pub fn transfers(
    who: (&Principal, &str),
    rows: &[TransferSummary],
    filter: Option<TransferStatus>,
    now: Timestamp,
) -> Markup {
    let live = match filter {
        Some(s) => format!("/console/transfers/live?status={s}"),
        None => "/console/transfers/live".to_owned(),
    };
    layout(
        "Transfers",
        Some(who),
        html! {
            h1 { "Transfers" }
            (status_filter(filter))
            table.transfers {
                thead { tr { th { "Transfer" } th { "Status" } th { "Tier" } th { "Component" } th { "Budget" } th { "Last event" } th { "Age" } } }
                tbody #live data-live=(live) data-every=(LIVE_POLL_MS) { (transfer_rows(rows, now)) }
            }
        },
    )
}

/// The part of a transfer's page that changes: status, budget chart and one page of the event
/// log.
pub fn transfer_live(view: &TransferView, now: Timestamp) -> Markup {
    let t = &view.transfer;
    html! {
        h2 { "State" }
        dl.facts {
            dt { "Status" } dd #status { (status_badge(t.status, t.activating)) }
            dt { "Tier" } dd { (t.tier.map(|x| x.to_string()).unwrap_or_else(|| "—".into())) }
            dt { "Component" } dd.component { (t.component.as_deref().unwrap_or("—")) }
            dt { "Created" } dd { (t.created_at) " (" (age(t.created_at, now)) " ago)" }
            @if let Some(at) = t.activated_at { dt { "Activated" } dd { (at) } }
            @if let Some(reason) = &t.end_reason { dt { "Ended because" } dd { (reason) } }
            @if let Some(b) = view.budget {
                dt { "Budget" } dd { (usd(b.spent_micro_usd)) " of " (usd(b.allocated_micro_usd)) " spent; "
                    (usd(b.remaining_micro_usd())) " left; " (usd(b.rate_micro_usd_per_cpu_second)) " per CPU-second" }
            }
        }
        h2 { "Budget over time" }
        (budget_chart(&view.spend, view.budget.map_or(0, |b| b.allocated_micro_usd), now))
        h2 { "Event log " span.muted { "(" span #event-count { (view.events.events.len()) } " shown)" } }
        (event_pager(view))
        (event_log(&view.events.events))
    }
}

/// Links to the older page of the log, and back to the newest.
fn event_pager(view: &TransferView) -> Markup {
    let id = &view.transfer.id;
    html! {
        @if view.events.next_before.is_some() || view.before.is_some() {
            p.pager {
                @if let Some(older) = view.events.next_before {
                    a.older href=(format!("/console/transfers/{id}?before={older}")) { "← Older events" }
                    " "
                }
                @if view.before.is_some() {
                    a.newest href=(format!("/console/transfers/{id}")) { "Newest events →" }
                }
            }
        }
    }
}

fn event_log(events: &[Event]) -> Markup {
    html! {
        table.events {
            thead { tr { th { "#" } th { "When" } th { "Event" } th { "Detail" } } }
            tbody {
                @for e in events {
                    tr data-kind=(e.kind) {
                        td { (e.id) }
                        td.when { (e.at) }
                        td { (e.kind) }
                        td { code.detail { (e.detail) } }
                    }
                }
            }
        }
    }
}

/// A transfer's page: snapshot summary (references only), then the live part.
pub fn transfer(who: (&Principal, &str), view: &TransferView, snapshot: &SnapshotSummary, now: Timestamp) -> Markup {
    let id = &view.transfer.id;
    let live = match view.before {
        Some(before) => format!("/console/transfers/{id}/live?before={before}"),
        None => format!("/console/transfers/{id}/live"),
    };
    layout(
        id,
        Some(who),
        html! {
            p { a href="/console/transfers" { "← Transfers" } }
            h1 { "Transfer " code { (id) } }
            section.snapshot {
                h2 { "Snapshot" }
                dl.facts {
                    dt { "Source host" } dd { (snapshot.source_host) }
                    dt { "Messages" } dd { (snapshot.message_count) " (" (snapshot.history_bytes) " bytes)" }
                    dt { "System prompt" } dd { (snapshot.system_prompt_bytes) " bytes" }
                    dt { "Tool state" } dd { (snapshot.tool_state_bytes) " bytes" }
                    dt { "Checksum" } dd { code { (view.transfer.checksum) } }
                }
                h3 { "MCP servers" }
                @if snapshot.mcp_servers.is_empty() {
                    p.muted { "None." }
                } @else {
                    table.servers {
                        thead { tr { th { "Server" } th { "Credential reference" } } }
                        tbody { @for s in &snapshot.mcp_servers { tr { td { code { (s.server) } } td { code { (s.cred_ref) } } } } }
                    }
                }
            }
            section #live data-live=(live) data-every=(LIVE_POLL_MS) {
                (transfer_live(view, now))
            }
        },
    )
}

/// A plain page for a refusal or a missing resource.
pub fn message(who: Option<(&Principal, &str)>, title: &str, text: &str) -> Markup {
    layout(title, who, html! { h1 { (title) } p.error { (text) } })
}
